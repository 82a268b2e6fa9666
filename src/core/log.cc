#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace rankd {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn ";
    case LogLevel::kInfo: return "info ";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool ParseLogLevel(std::string_view name, LogLevel* out) {
  if (name == "error")
    *out = LogLevel::kError;
  else if (name == "warn")
    *out = LogLevel::kWarn;
  else if (name == "info")
    *out = LogLevel::kInfo;
  else if (name == "debug")
    *out = LogLevel::kDebug;
  else
    return false;
  return true;
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, std::string_view msg) {
  if (!LogEnabled(level)) return;
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char head[64];
  std::snprintf(head, sizeof head, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %s ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms),
                LevelName(level));
  std::string line(head);
  AppendLogSafe(msg, line);
  WriteLine(STDERR_FILENO, line);
}

namespace {
// The length of the valid UTF-8 sequence at s[i] (lead byte >= 0x80), or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = at(i);
  size_t n = c >= 0xC2 && c <= 0xDF   ? 2
             : c >= 0xE0 && c <= 0xEF ? 3
             : c >= 0xF0 && c <= 0xF4 ? 4
                                      : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  unsigned char c1 = at(i + 1);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
      (c == 0xF4 && c1 > 0x8F))
    return 0;  // overlong, a surrogate, or past U+10FFFF
  return n;
}
}  // namespace

void AppendLogSafe(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      size_t j = i + 1;
      while (j < s.size() && static_cast<unsigned char>(s[j]) >= 0x20 &&
             static_cast<unsigned char>(s[j]) < 0x7F)
        ++j;
      out.append(s.substr(i, j - i));
      i = j;
      continue;
    }
    if (size_t n = c >= 0x80 ? Utf8Length(s, i) : 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
    ++i;
  }
}

void WriteLine(int fd, std::string_view line) {
  std::string buf;
  buf.reserve(line.size() + 1);
  buf.append(line);
  buf.push_back('\n');
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n <= 0) return;  // nowhere to report a failing log
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace rankd
