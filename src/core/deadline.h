// Deadlines: absolute points on the steady clock; "none" means no limit.
// Pure functions: any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace rankd {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Deadline = std::optional<TimePoint>;

// The earlier of the request deadline and start + node_timeout.
inline Deadline ComputeEffectiveDeadline(TimePoint start, Deadline request_deadline,
                                         std::optional<std::chrono::milliseconds> node_timeout) {
  Deadline effective = request_deadline;
  if (node_timeout) {
    TimePoint node_deadline = start + *node_timeout;
    if (!effective || node_deadline < *effective) effective = node_deadline;
  }
  return effective;
}

inline bool deadline_exceeded(Deadline d, TimePoint now = Clock::now()) { return d && now >= *d; }

// Whole milliseconds left, rounded up so that a timer never fires before the deadline;
// 0 when it has passed. REQUIRES: d has a value.
inline uint64_t ms_until(TimePoint d, TimePoint now = Clock::now()) {
  if (now >= d) return 0;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(d - now).count();
  return static_cast<uint64_t>((us + 999) / 1000);
}

}  // namespace rankd
