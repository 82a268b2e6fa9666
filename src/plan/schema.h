// Schema: the declared Redis layout of a plans folder (`schema.json`, docs/data.md):
// families of keys, each with a key template, an id type, and its fields (hash, json,
// counters) or member type (list, zset, set); and the event types rankd accepts, with the
// counters families they keep (docs/events.md). Without a schema.json a folder uses the
// built-in demo schema (kDemoSchemaJson, also shipped as plans/schema.json). Parsed and
// validated once at load, immutable after, installed with the plans and models as one
// snapshot.
//
// Threads: ParseSchema and DemoSchema from any thread (FamilyCacheId takes a mutex, at
// load only); a Schema is immutable once built: any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/key_template.h"
#include "data/value.h"

namespace rankd {

// kCounters: kept by rankd from events (docs/events.md), read like a hash.
enum class FamilyType : uint8_t { kHash, kJson, kList, kZset, kSet, kCounters };
std::string_view FamilyTypeName(FamilyType t);

// A field's declared type. kBool is stored as 0/1/true/false (a JSON boolean in a json
// family) and becomes an i64 column holding 0 or 1. kVec ("vec:D", hash and json
// families only) is D little-endian float32 in a hash (4·D bytes), an array of D
// numbers in a json family, and becomes a kVec column of dimension D (docs/vectors.md).
enum class FieldType : uint8_t { kI64, kF64, kStr, kBool, kVec };
std::string_view FieldTypeName(FieldType t);  // "i64", ..., "vec" (without its dimension)
ColumnType ColumnTypeOf(FieldType t);

// Values of a family read from Redis that became null or were dropped, by kind
// (rankd_redis_bad_values_total{family, kind}). One per family name for the life of the
// process (a reload keeps counting into it). Relaxed atomics: any thread.
struct FamilyValueStats {
  std::atomic<uint64_t> missing_field{0};     // a declared field absent (or the whole key)
  std::atomic<uint64_t> unparsable_field{0};  // a value not of its declared type
  std::atomic<uint64_t> bad_id{0};            // a member or id that is no valid id (dropped)
  std::atomic<uint64_t> bad_json{0};  // a json value that is no object, invalid, or too large
  // A vec field's value of the wrong length, not numbers, or with a non-finite element
  // (the cell null; counted once when decoded, as bad_json).
  std::atomic<uint64_t> bad_vector{0};
};
// Calls fn(family name, stats) for every family ever loaded, in name order.
void ForEachFamilyValueStats(
    const std::function<void(const std::string&, const FamilyValueStats&)>& fn);

struct SchemaField {
  std::string name;
  FieldType type = FieldType::kI64;
  uint32_t dim = 0;  // kVec: 1..kMaxVecDim
  // The declared type as written: "f64", "vec:64".
  std::string TypeText() const;
};

// A counters family's field (docs/events.md): a sum of one counted type, or a rate of
// two, over the buckets whose start b satisfies now - window_s < b <= now.
struct CounterField {
  enum class Kind : uint8_t { kSum, kRate };
  Kind kind = Kind::kSum;
  uint32_t num = 0;  // index into CountersSpec::count: what is summed (the rate's numerator)
  uint32_t den = 0;  // kRate: the denominator's type
  int64_t window_s = 0;
  double prior_a = 0, prior_b = 0;  // kRate: (sum(num) + a) / (sum(den) + a + b)
};

// What a `counters` family keeps: per id (`by`), per counted event type, the sum of
// its events' values (1 each without a value) in buckets of bucket_s seconds aligned to
// the Unix epoch, for keep_s seconds.
struct CountersSpec {
  enum class By : uint8_t { kItem, kUser };
  By by = By::kItem;
  std::vector<std::string> count;    // event type names, as declared
  std::vector<uint8_t> valued;       // count[t] carries a value (sums are f64, else exact)
  int64_t bucket_s = 0;              // 1..86,400
  int64_t keep_s = 0;                // a multiple of bucket_s, at most 1,000 buckets
  std::vector<CounterField> fields;  // parallel to KeyFamily::fields (all f64)
  int64_t cache_ms = 0;              // how old a cached read may be served (0: never cached)

  int64_t buckets() const { return keep_s / bucket_s; }
  std::optional<uint32_t> TypeIndex(std::string_view type) const;
};
std::string_view CounterByName(CountersSpec::By by);  // "item", "user"

// A zset of ids kept newest first, scored by ts_ms (an event type's `marks`, a plan's
// `served_state`): at most `max` members, the key's TTL ttl_s after each write.
struct ZsetMarks {
  std::string family;  // a zset family (checked where it is declared)
  int64_t max = 0;     // 1..kMaxMarks
  int64_t ttl_s = 0;   // 1..kMaxMarksTtl
};

// An event type of `events` (docs/events.md): the id types of its user and item, whether
// it carries a value, and the zset it marks.
struct EventType {
  std::string name;
  ColumnType user = ColumnType::kI64;  // kI64 or kStr
  ColumnType item = ColumnType::kI64;
  bool value = false;
  std::optional<ZsetMarks> marks;
};

struct KeyFamily {
  std::string name;
  FamilyType type = FamilyType::kHash;
  std::string key;                             // the template, e.g. "item:{id}"
  std::string key_prefix;                      // its text before {id}
  std::string key_suffix;                      // and after
  ColumnType id_type = ColumnType::kI64;       // kI64 or kStr: what fills {id}
  ColumnType members_type = ColumnType::kI64;  // list, zset, set: kI64 or kStr
  std::vector<SchemaField> fields;             // hash, json, counters: in declaration order
  std::optional<CountersSpec> counters;        // counters only
  // The same for every family of the same definition (name, type, key, id, members,
  // fields) for the life of the process: the shard cache keys entries by it, so a reload
  // that changes a family's definition leaves its old entries unreachable (and drops them).
  uint32_t cache_id = 0;
  FamilyValueStats* values = nullptr;  // never null in a parsed schema

  bool has_fields() const {
    return type == FamilyType::kHash || type == FamilyType::kJson || type == FamilyType::kCounters;
  }
  bool is_list() const { return type == FamilyType::kList || type == FamilyType::kZset; }
  // Whether the shard cache may hold its values exact by Redis's invalidation (tracking):
  // not a set (asked per request), nor counters (written by every event: tracking them
  // would only churn).
  bool tracked() const { return type != FamilyType::kSet && type != FamilyType::kCounters; }
  // Whether the shard cache may hold its values at all: tracked, or a counters family with
  // a staleness bound (cache_ms > 0), whose entries live that long (docs/cache.md).
  bool cacheable() const { return tracked() || (counters && counters->cache_ms > 0); }
  std::optional<size_t> FieldIndex(std::string_view name) const;
  KeyTemplate key_template() const { return {key_prefix, key_suffix}; }
  // The Redis key of id `id` (without the endpoint's prefix).
  std::string KeyOf(std::string_view id) const { return key_prefix + std::string(id) + key_suffix; }
  // The id text of `key` (without the endpoint's prefix) when the whole template matches
  // it (a non-empty id between its prefix and suffix), else nullopt.
  std::optional<std::string_view> MatchKey(std::string_view key) const {
    return key_template().IdIn(key);
  }
};

// How an index (`indexes` of schema.json, docs/vectors.md) ranks: by inner product, by
// cosine (vectors normalised when built, queries when searched), or by Euclidean distance
// (similarity = minus the distance, so that higher is always nearer).
enum class AnnMetric : uint8_t { kIp, kCosine, kL2 };
std::string_view AnnMetricName(AnnMetric m);  // "ip", "cosine", "l2"

// An index declared in `indexes`: the vec field of a hash or json family that rankd
// builds an approximate nearest-neighbour index over (docs/vectors.md, "Indexes").
struct AnnIndexSpec {
  std::string name;
  std::string family;  // a hash or json family of the schema
  std::string field;   // a vec:D field of it
  uint32_t dim = 0;    // the field's D
  AnnMetric metric = AnnMetric::kIp;
  int64_t refresh_s = 300;      // rebuilt this often, in the background
  int64_t max_items = 1000000;  // more items: the build fails, the old index stays
  // What a built index's content depends on (the family's type, key template and id type,
  // the field, D, the metric), hashed: an index saved under another hash is not loaded,
  // and a reload that changes it builds the index again.
  std::string content_sha256;
};

struct Schema {
  std::vector<KeyFamily> families;    // in declaration order
  std::vector<AnnIndexSpec> indexes;  // `indexes`, in declaration order; empty without
  std::vector<EventType> events;      // `events`, in declaration order; empty without
  std::string event_log_sink;         // `event_log.sink`; "" without
  std::string json;                   // the file's text (or the built-in's): GET /schema
  std::string sha256;                 // of `json`
  bool builtin = false;               // the demo schema, no schema.json in the folder

  const KeyFamily* Find(std::string_view name) const;
  const EventType* FindEvent(std::string_view name) const;
  const AnnIndexSpec* FindIndex(std::string_view name) const;
};
using SchemaPtr = std::shared_ptr<const Schema>;

// Limits of docs/data.md.
inline constexpr size_t kMaxFamilies = 256;
inline constexpr size_t kMaxFields = 1024;
inline constexpr size_t kMaxKeyTemplate = 256;
inline constexpr size_t kMaxStrId = 256;
inline constexpr size_t kMaxEventTypes = 256;
inline constexpr int64_t kMaxBucketS = 86400;
inline constexpr int64_t kMaxBuckets = 1000;
inline constexpr size_t kMaxCountedTypes = 16;  // event types one counters family counts
inline constexpr int64_t kMaxMarks = 100000;
inline constexpr int64_t kMaxMarksTtl = int64_t{10} * 366 * 86400;  // ten years
inline constexpr int64_t kMaxCacheMs = 60000;
inline constexpr size_t kMaxIndexes = 16;
inline constexpr int64_t kMaxIndexItems = 50000000;
inline constexpr int64_t kMaxRefreshS = 7 * 86400;
// |value| of an event that carries one (docs/events.md).
inline constexpr double kMaxEventValue = 1e9;

// The built-in demo schema's text (docs/data.md): equal to plans/schema.json.
extern const std::string_view kDemoSchemaJson;

// Parses and validates a schema file's text. Errors are bad_request naming `file`, the
// family (or event type) and the member ("plans/schema.json: family 'item': fields.likes:
// unknown type 'int'", "...: event type 'click': user: missing").
Result<SchemaPtr> ParseSchema(std::string_view text, std::string_view file);
// The demo schema (built once).
SchemaPtr DemoSchema();

// Whether `id` may fill a str family's {id}: 1..256 bytes without '{' or '}'.
bool ValidStrId(std::string_view id);

// What is wrong with `m` as "<member>: <what>" ("family: ...", "max: ..."), or "" when
// nothing is: its family a zset of `schema` keyed by `user` ids with members of `item` ids,
// max and ttl_s within bounds. An event type's marks and a plan's served_state alike.
std::string ZsetMarksProblem(const Schema& schema, const ZsetMarks& m, ColumnType user,
                             ColumnType item);

}  // namespace rankd
