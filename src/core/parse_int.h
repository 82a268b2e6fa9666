// ParseStrictInt: the one integer parser for text from outside (flags, URLs, Redis
// replies). Strict: the whole string must be one decimal integer that fits T — no sign
// other than a leading '-' (for signed T), no spaces, no '+', no trailing bytes.
//
// Inline because the Redis reply scanner calls it for every reply header.
// Threads: any thread (pure).
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>

namespace rankd {

template <std::integral T>
inline std::optional<T> ParseStrictInt(std::string_view s) {
  // Fast path: at most digits10 digits cannot overflow T, so a plain loop needs no
  // overflow checks (Redis replies: ids, counts, lengths). The rest goes to from_chars.
  const char* p = s.data();
  size_t n = s.size();
  bool neg = false;
  if constexpr (std::is_signed_v<T>) {
    if (n > 0 && *p == '-') neg = true, ++p, --n;
  }
  if (n > 0 && n <= static_cast<size_t>(std::numeric_limits<T>::digits10)) {
    std::make_unsigned_t<T> v = 0;
    for (size_t i = 0; i < n; ++i) {
      const unsigned d = static_cast<unsigned char>(p[i]) - unsigned{'0'};
      if (d > 9) return std::nullopt;
      v = static_cast<std::make_unsigned_t<T>>(v * 10 + d);
    }
    const T t = static_cast<T>(v);
    return neg ? static_cast<T>(-t) : t;
  }
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace rankd
