#include "api/event_request.h"

#include <algorithm>
#include <cmath>

#include "api/json_body.h"
#include "core/client_text.h"

namespace rankd {

using simdjson::dom::element;
using simdjson::dom::element_type;

namespace {

// The longest keep_s of the schema's counters families: older events count nowhere.
int64_t LongestKeepMs(const Schema& schema) {
  int64_t keep_s = 0;
  for (const KeyFamily& f : schema.families)
    if (f.counters) keep_s = std::max(keep_s, f.counters->keep_s);
  return keep_s * 1000;
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsPrintableAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// Reads one event; `at` is "events[i]".
class EventReader {
 public:
  EventReader(const Schema& schema, int64_t now_ms, int64_t oldest_ms)
      : schema_(schema), now_ms_(now_ms), oldest_ms_(oldest_ms) {}

  Result<Event> Read(element e, const std::string& at) const {
    simdjson::dom::object obj;
    if (e.get_object().get(obj)) return Bad(at, "", "must be an object, got " + ShortJson(e));
    Event ev;
    ev.ts_ms = now_ms_;
    element v;
    std::string_view s;
    if (obj["type"].get(v)) return Bad(at, "type", "missing");
    if (v.get_string().get(s)) return Bad(at, "type", "must be a string");
    ev.type = schema_.FindEvent(s);
    if (!ev.type)
      return Bad(at, "type", "'" + ClientText(s, 64) + "' is not an event type of the schema");
    if (auto id = Id(obj, at, "user_id", ev.type->user); !id)
      return Fail(std::move(id.error()));
    else
      ev.user = std::move(*id);
    if (auto id = Id(obj, at, "item_id", ev.type->item); !id)
      return Fail(std::move(id.error()));
    else
      ev.item = std::move(*id);
    bool has_value = !obj["value"].get(v);
    if (ev.type->value) {
      if (!has_value)
        return Bad(at, "value", "missing: type '" + ev.type->name + "' carries a value");
      double d;
      if (v.get_double().get(d) || !std::isfinite(d) || std::fabs(d) > kMaxEventValue)
        return Bad(at, "value",
                   "must be a finite number of at most 1e9 in magnitude, got " + ShortJson(v));
      ev.value = d;
    } else if (has_value) {
      return Bad(at, "value", "type '" + ev.type->name + "' carries no value");
    }
    if (!obj["ts_ms"].get(v)) {
      int64_t ts;
      if (v.get_int64().get(ts)) return Bad(at, "ts_ms", "must be an integer, got " + ShortJson(v));
      if (ts < oldest_ms_ || ts > now_ms_ + kEventMaxFutureMs)
        return Bad(at, "ts_ms",
                   std::to_string(ts) + " is outside [" + std::to_string(oldest_ms_) + ", " +
                       std::to_string(now_ms_ + kEventMaxFutureMs) +
                       "]: older than the longest keep_s, or over 5 minutes ahead");
      ev.ts_ms = ts;
    }
    if (!obj["served_id"].get(v) && !v.is_null()) {
      if (v.get_string().get(s) || s.size() != 32 || !IsLowerHex(s))
        return Bad(at, "served_id", "must be 32 lowercase hex digits, got " + ShortJson(v));
      ev.served_id = std::string(s);
    }
    if (!obj["event_id"].get(v) && !v.is_null()) {  // null: none, as for served_id
      if (v.get_string().get(s) || s.empty() || s.size() > 64 || !IsPrintableAscii(s))
        return Bad(at, "event_id", "must be 1..64 printable ASCII bytes, got " + ShortJson(v));
      ev.event_id = std::string(s);
    }
    for (auto [key, value] : obj)
      if (key != "type" && key != "user_id" && key != "item_id" && key != "value" &&
          key != "ts_ms" && key != "served_id" && key != "event_id")
        return Bad(at, ClientText(key, 64),
                   "unknown field (expected type, user_id, item_id, "
                   "value, ts_ms, served_id, event_id)");
    return ev;
  }

 private:
  static Error Err(const std::string& at, std::string_view field, const std::string& what) {
    return Error::BadEvent(at + (field.empty() ? "" : "." + std::string(field)) + ": " + what);
  }
  static Result<Event> Bad(const std::string& at, std::string_view field, const std::string& what) {
    return Fail(Err(at, field, what));
  }

  Result<UserId> Id(simdjson::dom::object obj, const std::string& at, std::string_view field,
                    ColumnType type) const {
    element v;
    if (obj[field].get(v)) return Fail(Err(at, field, "missing"));
    if (type == ColumnType::kStr) {
      std::string_view s;
      if (v.get_string().get(s) || !ValidStrId(s))
        return Fail(Err(
            at, field, "must be a string of 1..256 bytes without '{' or '}', got " + ShortJson(v)));
      return UserId::Str(std::string(s));
    }
    int64_t n;
    if (v.get_int64().get(n) || n < 0)
      return Fail(Err(at, field, "must be an integer >= 0, got " + ShortJson(v)));
    return UserId(n);
  }

  const Schema& schema_;
  const int64_t now_ms_;
  const int64_t oldest_ms_;
};

}  // namespace

Result<std::vector<Event>> ParseEvents(std::string_view body, const Schema& schema, int64_t now_ms,
                                       size_t max_events) {
  auto obj = ParseJsonObjectBody(body);
  if (!obj) return Fail(std::move(obj.error()));
  element v;
  simdjson::dom::array events;
  if ((*obj)["events"].get(v) || v.get_array().get(events))
    return Fail(Error::BadRequest("events: missing or not an array"));
  if (events.size() > max_events)
    return Fail(Error::BadRequest("events: " + std::to_string(events.size()) +
                                  " events, over --max-events-per-request " +
                                  std::to_string(max_events)));
  for (auto [key, value] : *obj)
    if (key != "events")
      return Fail(Error::BadRequest(ClientText(key, 64) + ": unknown field (expected events)"));
  if (schema.events.empty() && events.size() > 0)
    return Fail(Error::BadEvent("events[0].type: the schema declares no event types"));
  EventReader reader(schema, now_ms, now_ms - LongestKeepMs(schema));
  std::vector<Event> out;
  out.reserve(events.size());
  size_t i = 0;
  for (element e : events) {
    auto ev = reader.Read(e, "events[" + std::to_string(i++) + "]");
    if (!ev) return Fail(std::move(ev.error()));
    out.push_back(std::move(*ev));
  }
  return out;
}

}  // namespace rankd
