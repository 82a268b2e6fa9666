// ParseStrictInt: the one integer parser for text from outside (flags, URLs, Redis
// replies). Strict: the whole string must be one decimal integer that fits T — no sign
// other than a leading '-' (for signed T), no spaces, no '+', no trailing bytes.
//
// Inline because the Redis reply scanner calls it for every reply header.
// Threads: any thread (pure).
#pragma once

#include <charconv>
#include <concepts>
#include <optional>
#include <string_view>

namespace rankd {

template <std::integral T>
inline std::optional<T> ParseStrictInt(std::string_view s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace rankd
