// The POST /events body of docs/api.md, checked against the schema's event types
// (docs/events.md): {"events": [{"type", "user_id", "item_id", "value", "ts_ms",
// "served_id", "event_id"}, ...]}. All or nothing: the first bad event is the error.
//
// Threads: any thread (the parser buffer is thread-local).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "events/event.h"
#include "plan/schema.h"

namespace rankd {

// The bound on "events" when no --max-events-per-request is given.
inline constexpr size_t kDefaultMaxEventsPerRequest = 1000;

// Errors: bad_request for a body that is no {"events": [...]} (invalid JSON, no array,
// over `max_events` events); bad_event naming the event's index and field for the first
// event that is not of the schema: an undeclared type, an id of the wrong type or not a
// valid id, a value missing, present for a type without one, not finite or over
// kMaxEventValue, a ts_ms outside [now − the longest keep_s of a counters family,
// now + kEventMaxFutureMs], a served_id that is not 32 lowercase hex digits, an event_id
// that is not 1..64 printable ASCII bytes, an unknown field. A null served_id or event_id
// is none.
Result<std::vector<Event>> ParseEvents(std::string_view body, const Schema& schema, int64_t now_ms,
                                       size_t max_events);

}  // namespace rankd
