// Client text quoted in an answer or a log line (a plan name, a parameter, a header):
// at most kMaxClientText bytes of it, so that an error body never echoes a megabyte the
// client sent (docs/api.md, "Errors").
//
// Threads: any thread; a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rankd {

inline constexpr size_t kMaxClientText = 256;

// `s` itself when it fits in `max` bytes; else its first bytes up to `max` (not cutting a
// UTF-8 sequence) followed by "...(N bytes)".
inline std::string ClientText(std::string_view s, size_t max = kMaxClientText) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace rankd
