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
  line.append(msg);
  WriteLine(STDERR_FILENO, line);
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
