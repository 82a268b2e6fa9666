// ParseStrictF64: the one parser of doubles in text from outside (Redis hash fields).
// Strict: the whole string must be one finite number in std::from_chars's general format
// (no spaces, no '+', no "inf" or "nan"); out-of-range values are rejected.
//
// Inline, with a fast path: a feed request parses hundreds of fields like "0.734". A
// plain decimal of at most 15 digits is m / 10^k with m < 2^53 and k <= 15, both exact
// doubles, and one IEEE division of exact operands is correctly rounded — the same
// double from_chars gives. Anything else goes
// to from_chars.
// Threads: any thread (pure).
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rankd {

inline std::optional<double> ParseStrictF64(std::string_view s) {
  static constexpr double kPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const char* p = s.data();
  const char* const end = p + s.size();
  const bool neg = p != end && *p == '-';
  p += neg;
  uint64_t m = 0;
  int digits = 0, point = -1;  // point: digits before the '.', or -1 without one
  for (; p != end; ++p) {
    const unsigned d = static_cast<unsigned char>(*p) - unsigned{'0'};
    if (d <= 9) {
      m = m * 10 + d;
      ++digits;
    } else if (*p == '.' && point < 0) {
      point = digits;
    } else {
      break;
    }
  }
  // "1." and ".5" are left to from_chars, as is every other form.
  const bool plain =
      p == end && digits >= 1 && digits <= 15 && (point < 0 || (point >= 1 && digits > point));
  if (plain) {
    const double v = static_cast<double>(m) / kPow10[point < 0 ? 0 : digits - point];
    return neg ? -v : v;
  }
  double v = 0;
  auto [q, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || q != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace rankd
