#include "http/message.h"

namespace rankd::http {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Request::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string_view Request::query() const {
  std::string_view t = target;
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view{} : t.substr(q + 1);
}

std::string_view Request::header(std::string_view name) const {
  for (const auto& h : headers)
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  return {};
}

}  // namespace rankd::http
