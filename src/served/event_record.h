// The event-log record of one accepted event (docs/events.md, "The event log"): one JSON
// object per event of a POST /events that Redis acknowledged, written through the
// served-log sink the schema's `event_log` names (served/shard_log.h).
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "events/event.h"

namespace rankd {

// Appends {"event_id", "type", "user_id", "item_id", "served_id", "value", "ts_ms",
// "received_ms"} of `e`: `event_id` is the client's when it sent one, else `random_id`;
// `served_id` and `value` (a type without one) are null when absent; `received_ms` is
// when the request was read. No trailing newline.
void AppendEventRecord(const Event& e, std::string_view random_id, int64_t received_ms,
                       std::string& out);

}  // namespace rankd
