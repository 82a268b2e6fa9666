#include "core/json_write.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace rankd {

void AppendJsonDouble(double d, std::string& out) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, r.ptr);
}

void AppendJsonInt(int64_t v, std::string& out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendJsonFloats(std::span<const float> v, std::string& out) {
  out += '[';
  char buf[24];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    if (!std::isfinite(v[i])) {
      out += "null";
      continue;
    }
    auto r = std::to_chars(buf, buf + sizeof buf, v[i]);
    out.append(buf, r.ptr);
  }
  out += ']';
}

char* WriteJsonReal(char* p, double d) {
  if (!std::isfinite(d)) return std::copy_n("null", 4, p);
  // Whole numbers without a trailing zero (most counts) print as integers, which is what
  // the shortest form is for them, at a fraction of its cost.
  if (d != 0 && std::fabs(d) < 1e15 && d == std::trunc(d) && static_cast<int64_t>(d) % 10 != 0)
    return std::to_chars(p, p + 32, static_cast<int64_t>(d)).ptr;
  return std::fabs(d) >= 1e15 ? std::to_chars(p, p + 32, d, std::chars_format::scientific).ptr
                              : std::to_chars(p, p + 32, d).ptr;
}

void AppendJsonReal(double d, std::string& out) {
  char buf[32];
  out.append(buf, WriteJsonReal(buf, d));
}

}  // namespace rankd
