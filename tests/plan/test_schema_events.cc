// The schema's events, event_log and counters families (src/plan/schema.h, docs/events.md):
// what a parsed schema holds, and every load error, named by family or event type and
// member.
#include <doctest/doctest.h>

#include <string>

#include "plan/schema.h"

using namespace rankd;

namespace {

// docs/events.md's example, with a user-keyed family beside it.
constexpr std::string_view kEvents = R"({
  "schema_version": 1,
  "events": {
    "impression": {"user": "i64", "item": "i64", "marks": {"family": "served", "max": 500, "ttl_s": 604800}},
    "click":      {"user": "i64", "item": "i64"},
    "dwell":      {"user": "i64", "item": "i64", "value": true}
  },
  "event_log": {"sink": "events"},
  "families": {
    "item_counts": {"type": "counters", "key": "cnt:item:{id}", "by": "item",
                    "count": ["impression", "click"], "bucket_s": 3600, "keep_s": 604800,
                    "fields": {
                      "clicks_1d": {"sum": "click", "window_s": 86400},
                      "imps_1d":   {"sum": "impression", "window_s": 86400},
                      "ctr_1d":    {"rate": ["click", "impression"], "window_s": 86400, "prior": [1, 50]}
                    }},
    "user_dwell": {"type": "counters", "key": "cnt:user:{id}", "by": "user", "count": ["dwell"],
                   "bucket_s": 60, "keep_s": 3600, "cache_ms": 500,
                   "fields": {"dwell_1h": {"sum": "dwell", "window_s": 3600}}},
    "served": {"type": "zset", "key": "served:{id}"}
  }
})";

Result<SchemaPtr> Parse(std::string_view text) { return ParseSchema(text, "s.json"); }

// kEvents with `from` replaced by `to` (which must occur once).
std::string With(std::string_view from, std::string_view to) {
  std::string s(kEvents);
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(s.find(from, at + 1) == std::string::npos);
  return s.replace(at, from.size(), to);
}

// The load error of `text`: it must fail.
std::string ErrorOf(std::string_view text) {
  auto s = Parse(text);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == ErrorCode::kBadRequest);
  return s.error().message;
}

// A schema of one counters family `c` over the events of kEvents.
std::string Counters(std::string_view members) {
  return R"({"schema_version": 1, "events": {"click": {"user": "i64", "item": "i64"},
    "dwell": {"user": "str", "item": "i64", "value": true}},
    "families": {"c": {"type": "counters", "key": "c:{id}", )" +
         std::string(members) + "}}}";
}
constexpr std::string_view kGood =
    R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600, "fields": {"n": {"sum": "click", "window_s": 60}})";

}  // namespace

TEST_CASE("events: docs/events.md's example parses into event types, counters and the event log") {
  auto s = Parse(kEvents);
  REQUIRE(s.has_value());
  const Schema& schema = **s;
  REQUIRE(schema.events.size() == 3);
  const EventType* imp = schema.FindEvent("impression");
  REQUIRE(imp != nullptr);
  CHECK(imp->user == ColumnType::kI64);
  CHECK_FALSE(imp->value);
  REQUIRE(imp->marks.has_value());
  CHECK(imp->marks->family == "served");
  CHECK(imp->marks->max == 500);
  CHECK(imp->marks->ttl_s == 604800);
  CHECK(schema.FindEvent("dwell")->value);
  CHECK_FALSE(schema.FindEvent("click")->marks.has_value());
  CHECK(schema.FindEvent("nope") == nullptr);
  CHECK(schema.event_log_sink == "events");

  const KeyFamily& c = *schema.Find("item_counts");
  CHECK(c.type == FamilyType::kCounters);
  CHECK_FALSE(c.cacheable());
  CHECK(c.has_fields());
  REQUIRE(c.counters.has_value());
  const CountersSpec& spec = *c.counters;
  CHECK(spec.by == CountersSpec::By::kItem);
  CHECK(spec.count == std::vector<std::string>{"impression", "click"});
  CHECK(spec.valued == std::vector<uint8_t>{0, 0});
  CHECK(spec.bucket_s == 3600);
  CHECK(spec.buckets() == 168);
  CHECK(spec.cache_ms == 0);
  REQUIRE(c.fields.size() == 3);
  CHECK(c.FieldIndex("ctr_1d") == 2);
  for (const SchemaField& f : c.fields) CHECK(ColumnTypeOf(f.type) == ColumnType::kF64);
  const CounterField& ctr = spec.fields[2];
  CHECK(ctr.kind == CounterField::Kind::kRate);
  CHECK(spec.count[ctr.num] == "click");
  CHECK(spec.count[ctr.den] == "impression");
  CHECK(ctr.window_s == 86400);
  CHECK(ctr.prior_a == 1);
  CHECK(ctr.prior_b == 50);
  CHECK(spec.fields[0].kind == CounterField::Kind::kSum);
  CHECK(spec.fields[0].prior_a == 0);

  const KeyFamily& u = *schema.Find("user_dwell");
  CHECK(u.counters->by == CountersSpec::By::kUser);
  CHECK(u.counters->valued == std::vector<uint8_t>{1});
  CHECK(u.counters->cache_ms == 500);
  // Cached with its staleness bound, never tracked; without cache_ms, not cached at all.
  CHECK(u.cacheable());
  CHECK_FALSE(u.tracked());
  CHECK_FALSE(c.tracked());
  CHECK(schema.Find("served")->tracked());
}

TEST_CASE("events: a schema without events has none, and its families are as before") {
  auto s = Parse(R"({"schema_version": 1, "families": {"h": {"type": "hash", "key": "h:{id}",
      "fields": {"a": "i64"}}}})");
  REQUIRE(s.has_value());
  CHECK((*s)->events.empty());
  CHECK((*s)->event_log_sink.empty());
  CHECK_FALSE((*s)->families[0].counters.has_value());
}

TEST_CASE("events: a changed counters definition changes the family's cache id") {
  auto a = Parse(kEvents);
  auto b = Parse(With(R"("prior": [1, 50])", R"("prior": [1, 60])"));
  auto c = Parse(kEvents);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE(c.has_value());
  CHECK((*a)->Find("item_counts")->cache_id != (*b)->Find("item_counts")->cache_id);
  CHECK((*a)->Find("item_counts")->cache_id == (*c)->Find("item_counts")->cache_id);
}

TEST_CASE("events: errors in the top-level members") {
  CHECK(ErrorOf(With(R"("event_log": {"sink": "events"},)",
                     R"("event_log": {"sink": "events"}, "extra": 1,)")) ==
        "s.json: extra: unknown member (expected schema_version, families, events, event_log, "
        "indexes)");
  CHECK(ErrorOf(R"({"schema_version": 1, "events": [], "families": {}})") ==
        "s.json: events: must be an object of event types by name");
  CHECK(ErrorOf(R"({"schema_version": 1, "events": {"Bad": {}}, "families": {}})") ==
        "s.json: events: 'Bad' is not a valid name ([a-z_][a-z0-9_]{0,63})");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {}, "events": {}, "events": {}})") ==
        "s.json: events: given twice");
}

TEST_CASE("events: errors in an event type name it and the member") {
  auto event = [](std::string_view def) {
    return ErrorOf(R"({"schema_version": 1, "families": {"z": {"type": "zset", "key": "z:{id}"}},
        "events": {"e": )" +
                   std::string(def) + "}}");
  };
  CHECK(event("1") == "s.json: event type 'e': must be an object");
  CHECK(event(R"({"item": "i64"})") == "s.json: event type 'e': user: missing (i64 or str)");
  CHECK(event(R"({"user": "i64"})") == "s.json: event type 'e': item: missing (i64 or str)");
  CHECK(event(R"({"user": "u64", "item": "i64"})") ==
        "s.json: event type 'e': user: must be \"i64\" or \"str\", got \"u64\"");
  CHECK(event(R"({"user": "i64", "item": 5})") ==
        "s.json: event type 'e': item: must be \"i64\" or \"str\", got 5");
  CHECK(event(R"({"user": "i64", "item": "i64", "value": "yes"})") ==
        "s.json: event type 'e': value: must be true or false, got \"yes\"");
  CHECK(event(R"({"user": "i64", "item": "i64", "weight": 1})") ==
        "s.json: event type 'e': weight: unknown member (expected user, item, value, marks)");
  CHECK(event(R"({"user": "i64", "user": "i64", "item": "i64"})") ==
        "s.json: event type 'e': user: given twice");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {},
        "events": {"e": {"user": "i64", "item": "i64"}, "e": {"user": "i64", "item": "i64"}}})") ==
        "s.json: event type 'e': declared twice");
}

TEST_CASE("events: errors in marks name the event type and marks.<member>") {
  auto marks = [](std::string_view m, std::string_view user = "i64",
                  std::string_view item = "i64") {
    return ErrorOf(R"({"schema_version": 1, "families": {
        "z": {"type": "zset", "key": "z:{id}"},
        "zs": {"type": "zset", "key": "zs:{id}", "id": "str"},
        "zm": {"type": "zset", "key": "zm:{id}", "members": "str"},
        "h": {"type": "hash", "key": "h:{id}", "fields": {"a": "i64"}}},
        "events": {"e": {"user": ")" +
                   std::string(user) + R"(", "item": ")" + std::string(item) + R"(", "marks": )" +
                   std::string(m) + "}}}");
  };
  CHECK(marks("[]") ==
        "s.json: event type 'e': marks: must be an object {\"family\", \"max\", \"ttl_s\"}");
  CHECK(marks(R"({"max": 5, "ttl_s": 60})") == "s.json: event type 'e': marks.family: missing");
  CHECK(marks(R"({"family": "z", "ttl_s": 60})") == "s.json: event type 'e': marks.max: missing");
  CHECK(marks(R"({"family": "z", "max": 5})") == "s.json: event type 'e': marks.ttl_s: missing");
  CHECK(marks(R"({"family": "z", "max": 5.5, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.max: must be an integer");
  CHECK(marks(R"({"family": "z", "max": 5, "ttl_s": 60, "x": 1})") ==
        "s.json: event type 'e': marks.x: unknown member (expected family, max, ttl_s)");
  CHECK(marks(R"({"family": "nope", "max": 5, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.family: unknown family 'nope'");
  CHECK(marks(R"({"family": "h", "max": 5, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.family: family 'h' is a hash, not a zset");
  CHECK(marks(R"({"family": "zs", "max": 5, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.family: zset 'zs' is keyed by str ids but the user ids "
        "are i64");
  CHECK(marks(R"({"family": "zm", "max": 5, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.family: zset 'zm' holds str members but the item ids "
        "are i64");
  CHECK(marks(R"({"family": "z", "max": 0, "ttl_s": 60})") ==
        "s.json: event type 'e': marks.max: must be 1..100000, got 0");
  CHECK(marks(R"({"family": "z", "max": 5, "ttl_s": 0})") ==
        "s.json: event type 'e': marks.ttl_s: must be 1..316224000, got 0");
  // Matching id types load.
  CHECK(Parse(R"({"schema_version": 1, "families": {"zs": {"type": "zset", "key": "zs:{id}",
        "id": "str", "members": "str"}}, "events": {"e": {"user": "str", "item": "str",
        "marks": {"family": "zs", "max": 5, "ttl_s": 60}}}})")
            .has_value());
}

TEST_CASE("events: errors in event_log") {
  CHECK(ErrorOf(With(R"("event_log": {"sink": "events"})", R"("event_log": "events")")) ==
        "s.json: event_log: must be an object {\"sink\": NAME}");
  CHECK(ErrorOf(With(R"("event_log": {"sink": "events"})", R"("event_log": {})")) ==
        "s.json: event_log.sink: missing");
  CHECK(ErrorOf(With(R"("event_log": {"sink": "events"})", R"("event_log": {"sink": "a b"})")) ==
        "s.json: event_log.sink: must be a sink name (1 to 64 of A-Z a-z 0-9 _ - .)");
  CHECK(ErrorOf(With(R"("event_log": {"sink": "events"})",
                     R"("event_log": {"sink": "events", "rate": 1})")) ==
        "s.json: event_log.rate: unknown member (expected sink)");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {}, "event_log": {"sink": "events"}})") ==
        "s.json: event_log: the schema declares no events: no record would reach it");
}

TEST_CASE("counters: a family's own members") {
  CHECK(Parse(Counters(kGood)).has_value());
  CHECK(ErrorOf(Counters(R"("count": ["click"], "bucket_s": 60, "keep_s": 600, "fields": {})")) ==
        "s.json: family 'c': by: missing (item or user)");
  CHECK(ErrorOf(Counters(R"("by": "viewer", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "fields": {})")) == "s.json: family 'c': by: must be \"item\" or \"user\", got \"viewer\"");
  CHECK(ErrorOf(Counters(R"("by": "item", "bucket_s": 60, "keep_s": 600, "fields": {})")) ==
        "s.json: family 'c': count: missing (the event types it counts)");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": [], "bucket_s": 60, "keep_s": 600,
        "fields": {})")) ==
        "s.json: family 'c': count: must be a non-empty array of event type names");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["view"], "bucket_s": 60, "keep_s": 600,
        "fields": {})")) ==
        "s.json: family 'c': count: 'view' is not a declared event type (declared: click, dwell)");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click", "click"], "bucket_s": 60,
        "keep_s": 600, "fields": {})")) == "s.json: family 'c': count: 'click' is listed twice");
  {  // one more than a bucket's slot holds (kMaxCountedTypes), checked before the names
    std::string many;
    for (size_t i = 0; i <= kMaxCountedTypes; ++i)
      many += (i ? ", \"t" : "\"t") + std::to_string(i) + '"';
    CHECK(ErrorOf(Counters(R"("by": "item", "count": [)" + many +
                           R"(], "bucket_s": 60, "keep_s": 600, "fields": {})")) ==
          "s.json: family 'c': count: at most 16 event types, got 17");
  }
  CHECK(ErrorOf(Counters(R"("by": "user", "count": ["click", "dwell"], "bucket_s": 60,
        "keep_s": 600, "fields": {})")) ==
        "s.json: family 'c': by: the family is keyed by i64 ids (its id) but event type 'dwell' "
        "has str user ids");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "keep_s": 600, "fields": {})")) ==
        "s.json: family 'c': bucket_s: missing");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 0, "keep_s": 600,
        "fields": {})")) == "s.json: family 'c': bucket_s: must be an integer 1..86400, got 0");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 86401, "keep_s": 600,
        "fields": {})")) == "s.json: family 'c': bucket_s: must be an integer 1..86400, got 86401");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "fields": {})")) ==
        "s.json: family 'c': keep_s: missing");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 90,
        "fields": {})")) == "s.json: family 'c': keep_s: 90 is not a multiple of bucket_s (60)");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 60060,
        "fields": {})")) == "s.json: family 'c': keep_s: must be an integer 60..60000, got 60060");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 30,
        "fields": {})")) == "s.json: family 'c': keep_s: must be an integer 60..60000, got 30");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "cache_ms": -1, "fields": {})")) ==
        "s.json: family 'c': cache_ms: must be an integer 0..60000, got -1");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "cache_ms": 60001, "fields": {})")) ==
        "s.json: family 'c': cache_ms: must be an integer 0..60000, got 60001");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "cache_ms": 2.5, "fields": {})")) ==
        "s.json: family 'c': cache_ms: must be an integer 0..60000, got 2.5");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600)")) ==
        "s.json: family 'c': fields: missing (a counters family needs fields)");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "fields": {})")) == "s.json: family 'c': fields: must declare at least one field");
  CHECK(ErrorOf(Counters(std::string(kGood) + R"(, "members": "i64")")) ==
        "s.json: family 'c': members: only list, zset and set families have members");
  // 1,000 buckets and the longest cache_ms load; a str-keyed family counts by str ids.
  CHECK(Parse(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 60000,
        "cache_ms": 60000, "fields": {"n": {"sum": "click", "window_s": 60000}})"))
            .has_value());
  CHECK(Parse(R"({"schema_version": 1, "events": {"e": {"user": "str", "item": "i64"}},
        "families": {"c": {"type": "counters", "key": "c:{id}", "id": "str", "by": "user",
        "count": ["e"], "bucket_s": 1, "keep_s": 10, "fields": {"n": {"sum": "e", "window_s": 5}}}}})")
            .has_value());
}

TEST_CASE("counters: counters-only members on other families, and counting without events") {
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {"h": {"type": "hash", "key": "h:{id}",
        "fields": {"a": "i64"}, "bucket_s": 60}}})") ==
        "s.json: family 'h': bucket_s: only counters families have it");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {"l": {"type": "list", "key": "l:{id}",
        "by": "item"}}})") == "s.json: family 'l': by: only counters families have it");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {"c": {"type": "counters", "key": "c:{id}",
        "by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600, "fields": {}}}})") ==
        "s.json: family 'c': count: 'click' is not a declared event type (the schema declares no "
        "events)");
  CHECK(ErrorOf(
            R"({"schema_version": 1, "families": {"c": {"type": "counter", "key": "c:{id}"}}})") ==
        "s.json: family 'c': type: unknown type 'counter' (expected hash, json, list, zset, set, "
        "counters)");
  CHECK(ErrorOf(R"({"schema_version": 1, "families": {"c": {"type": "counters",
        "key": "rankd:c:{id}"}}})") ==
        "s.json: family 'c': key: must not start with 'rankd:' (rankd's own keys)");
}

TEST_CASE("counters: errors in a field name the family and fields.<name>.<member>") {
  auto field = [](std::string_view def) {
    return ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "fields": {"f": )" + std::string(def) +
                            "}"));
  };
  CHECK(field(R"("f64")") ==
        "s.json: family 'c': fields.f: must be {\"sum\": TYPE, \"window_s\": W} or {\"rate\": "
        "[NUM, DEN], \"window_s\": W, \"prior\": [a, b]}");
  CHECK(field(R"({"window_s": 60})") ==
        "s.json: family 'c': fields.f: must have exactly one of sum and rate");
  CHECK(field(R"({"sum": "click", "rate": ["click", "click"], "window_s": 60})") ==
        "s.json: family 'c': fields.f: must have exactly one of sum and rate");
  CHECK(field(R"({"sum": "click", "window_s": 60, "avg": 1})") ==
        "s.json: family 'c': fields.f.avg: unknown member (expected sum or rate, window_s, prior)");
  CHECK(field(R"({"sum": "dwell", "window_s": 60})") ==
        "s.json: family 'c': fields.f.sum: 'dwell' is not counted by this family (count: click)");
  CHECK(field(R"({"sum": 1, "window_s": 60})") ==
        "s.json: family 'c': fields.f.sum: must be an event type name");
  CHECK(field(R"({"sum": "click"})") == "s.json: family 'c': fields.f.window_s: missing");
  CHECK(field(R"({"sum": "click", "window_s": 90})") ==
        "s.json: family 'c': fields.f.window_s: must be a multiple of bucket_s (60) from 60 to "
        "keep_s (600), got 90");
  CHECK(field(R"({"sum": "click", "window_s": 660})") ==
        "s.json: family 'c': fields.f.window_s: must be a multiple of bucket_s (60) from 60 to "
        "keep_s (600), got 660");
  CHECK(field(R"({"sum": "click", "window_s": 0})") ==
        "s.json: family 'c': fields.f.window_s: must be a multiple of bucket_s (60) from 60 to "
        "keep_s (600), got 0");
  CHECK(field(R"({"sum": "click", "window_s": 60, "prior": [1, 1]})") ==
        "s.json: family 'c': fields.f.prior: only a rate has a prior");
  CHECK(field(R"({"rate": "click", "window_s": 60})") ==
        "s.json: family 'c': fields.f.rate: must be [NUMERATOR, DENOMINATOR] event types");
  CHECK(field(R"({"rate": ["click"], "window_s": 60})") ==
        "s.json: family 'c': fields.f.rate: must be [NUMERATOR, DENOMINATOR] event types");
  CHECK(
      field(R"({"rate": ["click", "view"], "window_s": 60})") ==
      "s.json: family 'c': fields.f.rate[1]: 'view' is not counted by this family (count: click)");
  CHECK(field(R"({"rate": ["click", "click"], "window_s": 60, "prior": [1]})") ==
        "s.json: family 'c': fields.f.prior: must be [a, b], two finite numbers >= 0, got [1]");
  CHECK(field(R"({"rate": ["click", "click"], "window_s": 60, "prior": [-1, 2]})") ==
        "s.json: family 'c': fields.f.prior: must be [a, b], two finite numbers >= 0, got [-1,2]");
  CHECK(field(R"({"rate": ["click", "click"], "window_s": 60, "prior": [0.5, "2"]})") ==
        "s.json: family 'c': fields.f.prior: must be [a, b], two finite numbers >= 0, got "
        "[0.5,\"2\"]");
  CHECK(ErrorOf(Counters(R"("by": "item", "count": ["click"], "bucket_s": 60, "keep_s": 600,
        "fields": {"Bad": {"sum": "click", "window_s": 60}})")) ==
        "s.json: family 'c': fields: 'Bad' is not a valid name ([a-z_][a-z0-9_]{0,63})");
}
