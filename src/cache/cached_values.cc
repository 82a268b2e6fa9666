// The value types of cached_values.h. Threads: any (one owner at a time).
#include "cache/cached_values.h"

#include <string>
#include <variant>

namespace rankd {

CachedField CachedFields::operator[](size_t i) const {
  const Cell& c = cells_[i];
  CachedField f;
  f.state = c.state;
  switch (c.kind) {
    case kNone: break;
    case kI64: f.value = i64(i); break;
    case kF64: f.value = f64(i); break;
    case kStr: f.value = std::string(str(i)); break;
    case kBool: f.value = boolean(i); break;
  }
  return f;
}

void CachedFields::Set(size_t i, const CachedField& f) {
  SetNoValue(i, f.state);
  if (f.state != CachedField::State::kValue) return;
  if (const auto* v = std::get_if<int64_t>(&f.value)) {
    SetI64(i, *v);
  } else if (const auto* d = std::get_if<double>(&f.value)) {
    SetF64(i, *d);
  } else if (const auto* s = std::get_if<std::string>(&f.value)) {
    SetStr(i, *s);
  } else if (const auto* b = std::get_if<bool>(&f.value)) {
    SetBool(i, *b);
  }
}

}  // namespace rankd
