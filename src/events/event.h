// One event of POST /events (docs/events.md), as read and checked against the schema
// (api/event_request.h): what the counters, the marks and the event log take.
//
// Threads: a plain value.
#pragma once

#include <cstdint>
#include <string>

#include "data/value.h"
#include "plan/schema.h"

namespace rankd {

struct Event {
  const EventType* type = nullptr;  // one of the schema's, which must outlive the event
  UserId user;                      // an integer or a string, of the type's id types
  UserId item;
  double value = 1;       // 1 for a type without a value
  int64_t ts_ms = 0;      // as sent, or when the request was read
  std::string served_id;  // 32 lowercase hex digits, or ""
  std::string event_id;   // the client's, 1..64 printable ASCII bytes, or ""
};

// How far ahead of the request's time an event's ts_ms may be.
inline constexpr int64_t kEventMaxFutureMs = 300000;
}  // namespace rankd
