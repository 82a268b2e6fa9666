// Fuzz target `events_json`: a POST /events body -> ParseEvents against a schema with
// events (i64 and str ids, a valued type, marks, counters families by item and by user)
// at a fixed request time -> the accepted events checked against the contract of
// docs/api.md -> the counters and marks writes /events would send (CounterBatch, aggregated
// and grouped by cluster slot, and not, and MarkBatch: their Redis commands) -> the error
// body's text otherwise.
// Everything /events does with a body except HTTP and Redis.
// Corpus: tests/fuzz/corpus/events_json; dictionary events_json.dict.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/event_request.h"
#include "core/json_escape.h"
#include "events/counter_write.h"
#include "events/zset_marks.h"
#include "plan/schema.h"

using namespace rankd;

namespace {

constexpr int64_t kNowMs = 1764590000000;  // the request's time
constexpr size_t kMaxEvents = 64;          // --max-events-per-request, small: fast runs
constexpr int64_t kLongestKeepMs = 7 * 86400 * 1000LL;

constexpr std::string_view kSchema = R"({"schema_version": 1,
  "events": {
    "impression": {"user": "i64", "item": "i64", "marks": {"family": "served", "max": 5, "ttl_s": 600}},
    "click": {"user": "i64", "item": "i64"},
    "dwell": {"user": "i64", "item": "i64", "value": true},
    "like": {"user": "str", "item": "str", "marks": {"family": "liked", "max": 3, "ttl_s": 60}},
    "rating": {"user": "str", "item": "str", "value": true}
  },
  "families": {
    "item_counts": {"type": "counters", "key": "cnt:item:{id}", "by": "item",
                    "count": ["impression", "click", "dwell"], "bucket_s": 3600, "keep_s": 604800,
                    "fields": {"ctr_1d": {"rate": ["click", "impression"], "window_s": 86400, "prior": [1, 50]}}},
    "user_counts": {"type": "counters", "key": "cnt:user:{id}", "by": "user",
                    "count": ["click"], "bucket_s": 60, "keep_s": 3600,
                    "fields": {"clicks_1h": {"sum": "click", "window_s": 3600}}},
    "str_counts": {"type": "counters", "key": "cnt:s:{id}", "id": "str", "by": "item",
                   "count": ["like", "rating"], "bucket_s": 1, "keep_s": 600,
                   "fields": {"likes": {"sum": "like", "window_s": 600}}},
    "served": {"type": "zset", "key": "served:{id}"},
    "liked": {"type": "zset", "key": "liked:{id}", "id": "str", "members": "str"}
  }})";

const SchemaPtr& EventSchema() {
  static const SchemaPtr schema = [] {
    Result<SchemaPtr> s = ParseSchema(kSchema, "fuzz_events_json/schema.json");
    if (!s) {
      std::fprintf(stderr, "fuzz_events_json: %s\n", s.error().message.c_str());
      std::abort();
    }
    return *s;
  }();
  return schema;
}

IdRef Ref(const UserId& id) { return id.is_str ? IdRef{0, id.str} : IdRef{id.num, {}}; }

// What ParseEvents promises of an accepted event (api/event_request.h); a breach traps.
void Check(const Event& e) {
  const bool ok = e.type != nullptr && e.user.is_str == (e.type->user == ColumnType::kStr) &&
                  e.item.is_str == (e.type->item == ColumnType::kStr) &&
                  (e.user.is_str ? ValidStrId(e.user.str) : e.user.num >= 0) &&
                  (e.item.is_str ? ValidStrId(e.item.str) : e.item.num >= 0) &&
                  std::isfinite(e.value) && std::fabs(e.value) <= kMaxEventValue &&
                  (e.type->value || e.value == 1) && e.ts_ms >= kNowMs - kLongestKeepMs &&
                  e.ts_ms <= kNowMs + kEventMaxFutureMs &&
                  (e.served_id.empty() || e.served_id.size() == 32) && e.event_id.size() <= 64;
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Schema& schema = *EventSchema();
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::string out;
  Result<std::vector<Event>> events = ParseEvents(body, schema, kNowMs, kMaxEvents);
  if (!events) {
    const ErrorCode code = events.error().code;
    if (code != ErrorCode::kBadRequest && code != ErrorCode::kBadEvent) __builtin_trap();
    AppendJsonString(events.error().message, out);  // what the error body escapes
    return 0;
  }
  if (events->size() > kMaxEvents) __builtin_trap();
  CounterBatch aggregated(EventSchema(), kNowMs);
  CounterBatch each(EventSchema(), kNowMs, /*aggregate=*/false);
  MarkBatch marks;
  for (const Event& e : *events) {
    Check(e);
    aggregated.Add(*e.type, Ref(e.user), Ref(e.item), e.value, e.ts_ms);
    each.Add(*e.type, Ref(e.user), Ref(e.item), e.value, e.ts_ms);
    if (e.type->marks)
      if (const KeyFamily* f = schema.Find(e.type->marks->family))
        marks.Add(*f, *e.type->marks, e.user, e.item, e.ts_ms);
  }
  if (aggregated.increments() > each.increments()) __builtin_trap();
  // Grouped by cluster slot, and not: both shapes of a write, as EVALSHA and as EVAL.
  RedisCommands cmds;
  CounterWrite(aggregated, "p:", /*cluster=*/true).Commands(cmds, /*eval=*/false, {});
  CounterWrite(each, "", /*cluster=*/false).Commands(cmds, /*eval=*/true, {});
  MarkWrite(marks, "p:", /*cluster=*/true).Commands(cmds, /*eval=*/false, {});
  return 0;
}
