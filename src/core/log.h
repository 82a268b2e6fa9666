// Logging: one line per event on stderr, written with a single write(2) so lines from
// different threads never interleave. Levels: error, warn, info, debug.
//
// Threads: any thread.
#pragma once

#include <string_view>

namespace rankd {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void SetLogLevel(LogLevel level);
bool ParseLogLevel(std::string_view name, LogLevel* out);
bool LogEnabled(LogLevel level);

// "2026-11-26T01:02:03.456Z info  <msg>", the message escaped (AppendLogSafe): a line is
// one line whatever a client or a Redis reply put into it.
void Log(LogLevel level, std::string_view msg);
// Appends `s` with every byte below 0x20, 0x7F and every byte not part of valid UTF-8
// written as \xNN; the rest as it is.
void AppendLogSafe(std::string_view s, std::string& out);
inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }
inline void LogWarn(std::string_view m) { Log(LogLevel::kWarn, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }

// Writes `line` plus a newline to `fd` in one write (access log lines, already JSON).
void WriteLine(int fd, std::string_view line);

}  // namespace rankd
