// schema.h: schema.json parsed with simdjson and checked against docs/data.md.
#include "plan/schema.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_set>

#include "core/sha256.h"

namespace rankd {

const std::string_view kDemoSchemaJson = R"({
  "schema_version": 1,
  "events": {
    "impression": {"user": "i64", "item": "i64", "marks": {"family": "served", "max": 500, "ttl_s": 604800}},
    "click": {"user": "i64", "item": "i64"}
  },
  "families": {
    "user": {"type": "hash", "key": "user:{id}", "fields": {"country": "str", "lang": "str", "age": "i64", "premium": "i64"}},
    "item": {"type": "hash", "key": "item:{id}", "fields": {"author": "i64", "likes": "i64", "age_s": "i64", "category": "str", "country": "str", "quality": "f64", "nsfw": "i64"}},
    "follow": {"type": "list", "key": "follow:{id}"},
    "recs": {"type": "list", "key": "recs:{id}"},
    "media": {"type": "list", "key": "media:{id}"},
    "seen": {"type": "set", "key": "seen:{id}"},
    "served": {"type": "zset", "key": "served:{id}"},
    "user_emb": {"type": "hash", "key": "emb:user:{id}", "fields": {"emb": "vec:32"}},
    "item_emb": {"type": "hash", "key": "emb:item:{id}", "fields": {"emb": "vec:32"}},
    "item_counts": {"type": "counters", "key": "cnt:item:{id}", "by": "item", "count": ["impression", "click"], "bucket_s": 3600, "keep_s": 604800, "fields": {"clicks_1d": {"sum": "click", "window_s": 86400}, "imps_1d": {"sum": "impression", "window_s": 86400}, "ctr_1d": {"rate": ["click", "impression"], "window_s": 86400, "prior": [1, 50]}}},
    "user_counts": {"type": "counters", "key": "cnt:user:{id}", "by": "user", "count": ["impression", "click"], "bucket_s": 3600, "keep_s": 604800, "fields": {"clicks_1d": {"sum": "click", "window_s": 86400}, "imps_1d": {"sum": "impression", "window_s": 86400}}}
  },
  "indexes": {
    "items": {"family": "item_emb", "field": "emb", "metric": "ip", "refresh_s": 300, "max_items": 500000}
  }
}
)";

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// [a-z_][a-z0-9_]{0,63}
bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// The names of each enum, both ways (parsing and messages).
template <class T>
struct Named {
  std::string_view name;
  T value;
};
constexpr Named<FamilyType> kFamilyTypes[] = {
    {"hash", FamilyType::kHash}, {"json", FamilyType::kJson}, {"list", FamilyType::kList},
    {"zset", FamilyType::kZset}, {"set", FamilyType::kSet},   {"counters", FamilyType::kCounters}};
constexpr Named<FieldType> kFieldTypes[] = {{"i64", FieldType::kI64},
                                            {"f64", FieldType::kF64},
                                            {"str", FieldType::kStr},
                                            {"bool", FieldType::kBool},
                                            {"vec", FieldType::kVec}};
constexpr Named<ColumnType> kIdTypes[] = {{"i64", ColumnType::kI64}, {"str", ColumnType::kStr}};
constexpr Named<AnnMetric> kAnnMetrics[] = {
    {"ip", AnnMetric::kIp}, {"cosine", AnnMetric::kCosine}, {"l2", AnnMetric::kL2}};
constexpr Named<CountersSpec::By> kCounterBy[] = {{"item", CountersSpec::By::kItem},
                                                  {"user", CountersSpec::By::kUser}};

template <class T, size_t N>
std::optional<T> ByName(const Named<T> (&table)[N], std::string_view s) {
  for (const auto& e : table)
    if (e.name == s) return e.value;
  return std::nullopt;
}
template <class T, size_t N>
std::string_view NameOf(const Named<T> (&table)[N], T v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}

std::optional<FamilyType> ParseFamilyType(std::string_view s) { return ByName(kFamilyTypes, s); }
std::optional<FieldType> ParseFieldType(std::string_view s) { return ByName(kFieldTypes, s); }
std::optional<ColumnType> ParseIdType(std::string_view s) { return ByName(kIdTypes, s); }

// D of "vec:D": decimal digits without sign or leading zero, 1..kMaxVecDim.
std::optional<uint32_t> ParseVecDim(std::string_view s) {
  if (!s.starts_with("vec:")) return std::nullopt;
  s.remove_prefix(4);
  if (s.empty() || s.size() > 4 || s[0] == '0') return std::nullopt;
  uint32_t d = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    d = d * 10 + static_cast<uint32_t>(c - '0');
  }
  if (d > kMaxVecDim) return std::nullopt;
  return d;
}

// A JSON integer within i64 (no fraction, no exponent).
std::optional<int64_t> Int(element v) {
  if (v.type() == element_type::INT64) return int64_t(v.get_int64());
  return std::nullopt;
}

// A counters family's definition as text (its part of FamilyCacheId's identity).
std::string CountersDef(const CountersSpec& c) {
  std::string d = std::string(CounterByName(c.by)) + '/' + std::to_string(c.bucket_s) + '/' +
                  std::to_string(c.keep_s) + '/' + std::to_string(c.cache_ms);
  for (const std::string& t : c.count) d += ',' + t;
  for (const CounterField& f : c.fields)
    d += ';' + std::to_string(static_cast<int>(f.kind)) + ':' + std::to_string(f.num) + ':' +
         std::to_string(f.den) + ':' + std::to_string(f.window_s) + ':' +
         std::to_string(f.prior_a) + ':' + std::to_string(f.prior_b);
  return d;
}

// Process-wide: one id per distinct family definition (KeyFamily::cache_id).
uint32_t FamilyCacheId(const KeyFamily& f) {
  std::string def = f.name + '\n' + std::string(FamilyTypeName(f.type)) + '\n' + f.key + '\n' +
                    std::string(ColumnTypeName(f.id_type)) + '\n' +
                    std::string(ColumnTypeName(f.members_type));
  for (const SchemaField& x : f.fields) def += '\n' + x.name + ':' + x.TypeText();
  if (f.counters) def += '\n' + CountersDef(*f.counters);
  static std::mutex mu;
  static std::map<std::string, uint32_t> ids;  // grows by one per definition ever loaded
  std::lock_guard lock(mu);
  auto [it, fresh] = ids.emplace(std::move(def), static_cast<uint32_t>(ids.size() + 1));
  return it->second;
}

std::mutex stats_mu;
std::map<std::string, std::unique_ptr<FamilyValueStats>>& StatsByName() {
  static auto* m = new std::map<std::string, std::unique_ptr<FamilyValueStats>>;  // never freed
  return *m;
}
FamilyValueStats* ValueStatsOf(const std::string& name) {
  std::lock_guard lock(stats_mu);
  auto& slot = StatsByName()[name];
  if (!slot) slot = std::make_unique<FamilyValueStats>();
  return slot.get();
}

class SchemaParser {
 public:
  explicit SchemaParser(std::string_view file) : file_(file) {}

  Result<SchemaPtr> Parse(std::string_view text) {
    simdjson::dom::parser parser;
    element root;
    if (auto err = parser.parse(text.data(), text.size()).get(root))
      return Fail(Err("", "", std::string("invalid JSON: ") + simdjson::error_message(err)));
    object top;
    if (root.get(top)) return Fail(Err("", "", "must be a JSON object"));
    auto schema = std::make_shared<Schema>();
    std::optional<element> version, families, events, event_log, indexes;
    for (auto [k, v] : top) {
      std::optional<element>* slot = k == "schema_version" ? &version
                                     : k == "families"     ? &families
                                     : k == "events"       ? &events
                                     : k == "event_log"    ? &event_log
                                     : k == "indexes"      ? &indexes
                                                           : nullptr;
      if (slot == nullptr)
        return Fail(Err("", std::string(k),
                        "unknown member (expected schema_version, families, events, event_log, "
                        "indexes)"));
      if (slot->has_value()) return Fail(Err("", std::string(k), "given twice"));
      *slot = v;
    }
    if (!version) return Fail(Err("", "schema_version", "missing"));
    if (version->type() != element_type::INT64 || int64_t(version->get_int64()) != 1)
      return Fail(Err("", "schema_version", "must be 1, got " + simdjson::to_string(*version)));
    if (!families) return Fail(Err("", "families", "missing"));
    // Events first: counters families count them; then the families their marks name.
    if (events)
      if (auto ok = ParseEvents(*events, *schema); !ok) return Fail(ok.error());
    if (auto ok = ParseFamilies(*families, *schema); !ok) return Fail(ok.error());
    for (const EventType& e : schema->events) {
      if (!e.marks) continue;
      std::string problem = ZsetMarksProblem(*schema, *e.marks, e.user, e.item);
      if (!problem.empty()) return Fail(EventErr(e.name, "marks." + problem));
    }
    if (event_log)
      if (auto ok = ParseEventLog(*event_log, *schema); !ok) return Fail(ok.error());
    if (indexes)
      if (auto ok = ParseIndexes(*indexes, *schema); !ok) return Fail(ok.error());
    schema->json = std::string(text);
    schema->sha256 = Sha256Hex(text);
    return SchemaPtr(std::move(schema));
  }

 private:
  Error Err(std::string_view family, std::string_view member, std::string_view what) const {
    std::string m = file_;
    if (!family.empty()) m += ": family '" + std::string(family) + "'";
    if (!member.empty()) m += ": " + std::string(member);
    return Error::BadRequest(m + ": " + std::string(what));
  }
  Error IndexErr(std::string_view index, std::string_view what) const {
    return Error::BadRequest(file_ + ": index '" + std::string(index) + "': " + std::string(what));
  }
  Error EventErr(std::string_view type, std::string_view what) const {
    return Error::BadRequest(file_ + ": event type '" + std::string(type) +
                             "': " + std::string(what));
  }

  // `events`: event type name -> {"user", "item", "value", "marks"}.
  Result<void> ParseEvents(element v, Schema& schema) {
    object types;
    if (v.get(types)) return Fail(Err("", "events", "must be an object of event types by name"));
    for (auto [name, def] : types) {
      if (!ValidName(name))
        return Fail(Err("", "events",
                        "'" + std::string(name) + "' is not a valid name ([a-z_][a-z0-9_]{0,63})"));
      if (schema.FindEvent(name)) return Fail(EventErr(name, "declared twice"));
      if (schema.events.size() == kMaxEventTypes)
        return Fail(
            Err("", "events", "more than " + std::to_string(kMaxEventTypes) + " event types"));
      auto e = ParseEventType(name, def);
      if (!e) return Fail(e.error());
      schema.events.push_back(std::move(*e));
    }
    return {};
  }

  Result<EventType> ParseEventType(std::string_view name, element v) {
    object obj;
    if (v.get(obj)) return Fail(EventErr(name, "must be an object"));
    EventType e;
    e.name = std::string(name);
    std::optional<element> user, item, value, marks;
    for (auto [k, val] : obj) {
      std::optional<element>* slot = k == "user"    ? &user
                                     : k == "item"  ? &item
                                     : k == "value" ? &value
                                     : k == "marks" ? &marks
                                                    : nullptr;
      if (slot == nullptr)
        return Fail(EventErr(
            name, std::string(k) + ": unknown member (expected user, item, value, marks)"));
      if (slot->has_value()) return Fail(EventErr(name, std::string(k) + ": given twice"));
      *slot = val;
    }
    for (auto [member, slot, into] :
         {std::tuple{"user", &user, &e.user}, {"item", &item, &e.item}}) {
      std::string_view s;
      if (!*slot) return Fail(EventErr(name, std::string(member) + ": missing (i64 or str)"));
      if ((*slot)->get(s) || !ParseIdType(s))
        return Fail(EventErr(name, std::string(member) + ": must be \"i64\" or \"str\", got " +
                                       simdjson::to_string(**slot)));
      *into = *ParseIdType(s);
    }
    if (value && value->get(e.value))
      return Fail(
          EventErr(name, "value: must be true or false, got " + simdjson::to_string(*value)));
    if (marks) {
      auto m = ParseMarks(*marks);
      if (!m) return Fail(EventErr(name, m.error().message));
      e.marks = std::move(*m);
    }
    return e;
  }

  // {"family", "max", "ttl_s"}: the shape only (ZsetMarksProblem checks the rest once the
  // families are known). Errors: "marks.<member>: <what>", for the caller to place.
  Result<ZsetMarks> ParseMarks(element v) {
    object obj;
    if (v.get(obj))
      return Fail(Error::BadRequest("marks: must be an object {\"family\", \"max\", \"ttl_s\"}"));
    ZsetMarks m;
    bool family = false, max = false, ttl = false;
    for (auto [k, val] : obj) {
      const std::string where = "marks." + std::string(k);
      if (k == "family") {
        std::string_view s;
        if (val.get(s)) return Fail(Error::BadRequest(where + ": must be a family name"));
        m.family = std::string(s);
        family = true;
      } else if (k == "max" || k == "ttl_s") {
        auto n = Int(val);
        if (!n) return Fail(Error::BadRequest(where + ": must be an integer"));
        (k == "max" ? m.max : m.ttl_s) = *n;
        (k == "max" ? max : ttl) = true;
      } else {
        return Fail(Error::BadRequest(where + ": unknown member (expected family, max, ttl_s)"));
      }
    }
    if (!family) return Fail(Error::BadRequest("marks.family: missing"));
    if (!max) return Fail(Error::BadRequest("marks.max: missing"));
    if (!ttl) return Fail(Error::BadRequest("marks.ttl_s: missing"));
    return m;
  }

  // `indexes`: index name -> {"family", "field", "metric", "refresh_s", "max_items"}.
  Result<void> ParseIndexes(element v, Schema& schema) {
    object all;
    if (v.get(all)) return Fail(Err("", "indexes", "must be an object of indexes by name"));
    for (auto [name, def] : all) {
      if (!ValidName(name))
        return Fail(Err("", "indexes",
                        "'" + std::string(name) + "' is not a valid name ([a-z_][a-z0-9_]{0,63})"));
      if (schema.FindIndex(name)) return Fail(IndexErr(name, "declared twice"));
      if (schema.indexes.size() == kMaxIndexes)
        return Fail(Err("", "indexes", "more than " + std::to_string(kMaxIndexes) + " indexes"));
      auto spec = ParseIndex(name, def, schema);
      if (!spec) return Fail(spec.error());
      schema.indexes.push_back(std::move(*spec));
    }
    return {};
  }

  Result<AnnIndexSpec> ParseIndex(std::string_view name, element v, const Schema& schema) {
    object obj;
    if (v.get(obj)) return Fail(IndexErr(name, "must be an object"));
    AnnIndexSpec spec;
    spec.name = std::string(name);
    bool family = false, field = false, metric = false;
    for (auto [k, val] : obj) {
      const std::string member(k);
      std::string_view s;
      if (k == "family" || k == "field" || k == "metric") {
        if (val.get(s)) return Fail(IndexErr(name, member + ": must be a string"));
        if (k == "family") spec.family = std::string(s), family = true;
        if (k == "field") spec.field = std::string(s), field = true;
        if (k == "metric") {
          auto m = ByName(kAnnMetrics, s);
          if (!m)
            return Fail(IndexErr(
                name, "metric: unknown metric '" + std::string(s) + "' (expected ip, cosine, l2)"));
          spec.metric = *m;
          metric = true;
        }
      } else if (k == "refresh_s" || k == "max_items") {
        const int64_t hi = k == "refresh_s" ? kMaxRefreshS : kMaxIndexItems;
        auto n = Int(val);
        if (!n || *n < 1 || *n > hi)
          return Fail(IndexErr(name, member + ": must be an integer 1.." + std::to_string(hi) +
                                         ", got " + simdjson::to_string(val)));
        (k == "refresh_s" ? spec.refresh_s : spec.max_items) = *n;
      } else {
        return Fail(IndexErr(
            name,
            member + ": unknown member (expected family, field, metric, refresh_s, max_items)"));
      }
    }
    if (!family) return Fail(IndexErr(name, "family: missing"));
    if (!field) return Fail(IndexErr(name, "field: missing"));
    if (!metric) return Fail(IndexErr(name, "metric: missing (ip, cosine or l2)"));
    const KeyFamily* f = schema.Find(spec.family);
    if (!f) return Fail(IndexErr(name, "family: unknown family '" + spec.family + "'"));
    if (f->type != FamilyType::kHash && f->type != FamilyType::kJson)
      return Fail(IndexErr(name, "family: '" + f->name + "' is a " +
                                     std::string(FamilyTypeName(f->type)) +
                                     " family; an index reads a hash or json family"));
    auto fi = f->FieldIndex(spec.field);
    if (!fi)
      return Fail(
          IndexErr(name, "field: family '" + f->name + "' has no field '" + spec.field + "'"));
    const SchemaField& sf = f->fields[*fi];
    if (sf.type != FieldType::kVec)
      return Fail(IndexErr(name, "field: '" + f->name + "." + sf.name + "' is " + sf.TypeText() +
                                     ", not a vector (vec:D)"));
    spec.dim = sf.dim;
    spec.content_sha256 =
        Sha256Hex(std::string(FamilyTypeName(f->type)) + '\n' + f->key + '\n' +
                  std::string(ColumnTypeName(f->id_type)) + '\n' + sf.name + '\n' + sf.TypeText() +
                  '\n' + std::string(AnnMetricName(spec.metric)));
    return spec;
  }

  // `event_log`: {"sink": NAME}, a --served-log sink's name (that it is configured is the
  // server's to check).
  Result<void> ParseEventLog(element v, Schema& schema) {
    object obj;
    if (v.get(obj)) return Fail(Err("", "event_log", "must be an object {\"sink\": NAME}"));
    for (auto [k, val] : obj) {
      if (k != "sink")
        return Fail(Err("", "event_log." + std::string(k), "unknown member (expected sink)"));
      std::string_view s;
      auto sink_char = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.';
      };
      if (val.get(s) || s.empty() || s.size() > 64 || !std::all_of(s.begin(), s.end(), sink_char))
        return Fail(
            Err("", "event_log.sink", "must be a sink name (1 to 64 of A-Z a-z 0-9 _ - .)"));
      schema.event_log_sink = std::string(s);
    }
    if (schema.event_log_sink.empty()) return Fail(Err("", "event_log.sink", "missing"));
    if (schema.events.empty())
      return Fail(Err("", "event_log", "the schema declares no events: no record would reach it"));
    return {};
  }

  Result<void> ParseFamilies(element v, Schema& schema) {
    object fams;
    if (v.get(fams)) return Fail(Err("", "families", "must be an object of families by name"));
    std::unordered_set<std::string> names;
    for (auto [name, def] : fams) {
      if (!ValidName(name))
        return Fail(Err("", "families",
                        "'" + std::string(name) + "' is not a valid name ([a-z_][a-z0-9_]{0,63})"));
      if (!names.insert(std::string(name)).second) return Fail(Err(name, "", "declared twice"));
      if (names.size() > kMaxFamilies)
        return Fail(Err("", "families", "more than " + std::to_string(kMaxFamilies) + " families"));
      auto f = ParseFamily(name, def, schema);
      if (!f) return Fail(f.error());
      schema.families.push_back(std::move(*f));
    }
    return CheckReach(schema);
  }

  // A str id is any text of 1..256 bytes without braces, and a client chooses one (its
  // user_id). A family whose keys such an id can steer onto rankd's own keys, or onto
  // another family's keys under another id, would let a client read (or a rankd write
  // land on) keys it should not. O(families^2): at most 65,536 pairs, at load only.
  Result<void> CheckReach(const Schema& schema) const {
    for (const KeyFamily& a : schema.families) {
      if (a.id_type != ColumnType::kStr) continue;
      if (std::string_view("rankd:").starts_with(a.key_prefix))
        return Fail(Err(a.name, "key",
                        "its text before {id} ('" + a.key_prefix +
                            "') is a prefix of 'rankd:': a str id could name rankd's own keys "
                            "(rankd:...)"));
      for (const KeyFamily& b : schema.families)
        if (&a != &b && Reaches(a, b))
          return Fail(Err(a.name, "key",
                          "a str id can make the key '" + a.key + "' equal a key of family '" +
                              b.name + "' ('" + b.key +
                              "') under another id: give the families texts before {id} "
                              "that are not prefixes of each other"));
    }
    return {};
  }

  // Whether some str id x makes a's key a key of b under another id y (of b's id type):
  // a.prefix x a.suffix == b.prefix y b.suffix. The prefixes must nest, and so must the
  // suffixes; the literal text one template has beyond the other is then matched by x
  // (any text) or by y, which for an i64 family only digits and '-' can be (a little
  // stricter than exact when both extras must fit one y: refusing is the safe side).
  // Identical templates reach nothing new: an id names the same key in both.
  static bool Reaches(const KeyFamily& a, const KeyFamily& b) {
    const std::string &pa = a.key_prefix, &pb = b.key_prefix;
    const std::string &sa = a.key_suffix, &sb = b.key_suffix;
    if (pa == pb && sa == sb) return false;
    auto fits_b_id = [&](std::string_view extra) {
      return b.id_type == ColumnType::kStr ||
             extra.find_first_not_of("-0123456789") == std::string_view::npos;
    };
    bool prefixes = pb.starts_with(pa) ||
                    (pa.starts_with(pb) && fits_b_id(std::string_view(pa).substr(pb.size())));
    bool suffixes =
        sb.ends_with(sa) ||
        (sa.ends_with(sb) && fits_b_id(std::string_view(sa).substr(0, sa.size() - sb.size())));
    return prefixes && suffixes;
  }

  Result<KeyFamily> ParseFamily(std::string_view name, element v, const Schema& schema) {
    object obj;
    if (v.get(obj)) return Fail(Err(name, "", "must be an object"));
    KeyFamily f;
    f.name = std::string(name);
    std::optional<element> type, key, id, fields, members;
    std::optional<element> by, count, bucket_s, keep_s, cache_ms;  // counters only
    for (auto [k, val] : obj) {
      std::optional<element>* slot = k == "type"       ? &type
                                     : k == "key"      ? &key
                                     : k == "id"       ? &id
                                     : k == "fields"   ? &fields
                                     : k == "members"  ? &members
                                     : k == "by"       ? &by
                                     : k == "count"    ? &count
                                     : k == "bucket_s" ? &bucket_s
                                     : k == "keep_s"   ? &keep_s
                                     : k == "cache_ms" ? &cache_ms
                                                       : nullptr;
      if (slot == nullptr)
        return Fail(Err(name, k,
                        "unknown member (expected type, key, id, fields, members; counters: by, "
                        "count, bucket_s, keep_s, cache_ms)"));
      if (slot->has_value()) return Fail(Err(name, k, "given twice"));
      *slot = val;
    }
    if (!type) return Fail(Err(name, "type", "missing"));
    std::string_view s;
    if (type->get(s)) return Fail(Err(name, "type", "must be a string"));
    auto t = ParseFamilyType(s);
    if (!t)
      return Fail(Err(name, "type",
                      "unknown type '" + std::string(s) +
                          "' (expected hash, json, list, zset, set, counters)"));
    f.type = *t;
    if (!key) return Fail(Err(name, "key", "missing"));
    if (key->get(s)) return Fail(Err(name, "key", "must be a string"));
    if (auto ok = ParseKey(name, s, f); !ok) return Fail(ok.error());
    if (id) {
      if (id->get(s) || !ParseIdType(s))
        return Fail(Err(name, "id", "must be \"i64\" or \"str\", got " + simdjson::to_string(*id)));
      f.id_type = *ParseIdType(s);
    }
    if (members) {
      if (f.has_fields())
        return Fail(Err(name, "members", "only list, zset and set families have members"));
      if (members->get(s) || !ParseIdType(s))
        return Fail(Err(name, "members",
                        "must be \"i64\" or \"str\", got " + simdjson::to_string(*members)));
      f.members_type = *ParseIdType(s);
    }
    if (fields && !f.has_fields())
      return Fail(Err(name, "fields",
                      "a " + std::string(FamilyTypeName(f.type)) +
                          " family has no fields (only hash, json and counters families do)"));
    if (f.type == FamilyType::kCounters) {
      CounterMembers c{by, count, bucket_s, keep_s, cache_ms, fields};
      if (auto ok = ParseCounters(name, c, schema, f); !ok) return Fail(ok.error());
    } else {
      for (auto [member, given] : {std::pair{"by", &by},
                                   {"count", &count},
                                   {"bucket_s", &bucket_s},
                                   {"keep_s", &keep_s},
                                   {"cache_ms", &cache_ms}})
        if (given->has_value()) return Fail(Err(name, member, "only counters families have it"));
      if (f.has_fields()) {
        if (!fields)
          return Fail(Err(name, "fields", "missing (a hash or json family needs fields)"));
        if (auto ok = ParseFields(name, *fields, f); !ok) return Fail(ok.error());
      }
    }
    f.cache_id = FamilyCacheId(f);
    f.values = ValueStatsOf(f.name);
    return f;
  }

  // A counters family's own members, as given.
  struct CounterMembers {
    std::optional<element> by, count, bucket_s, keep_s, cache_ms, fields;
  };

  // by, count, bucket_s, keep_s, fields (sums and rates), cache_ms: docs/events.md.
  Result<void> ParseCounters(std::string_view name, const CounterMembers& m, const Schema& schema,
                             KeyFamily& f) {
    CountersSpec c;
    std::string_view s;
    if (!m.by) return Fail(Err(name, "by", "missing (item or user)"));
    if (m.by->get(s) || !ByName(kCounterBy, s))
      return Fail(
          Err(name, "by", "must be \"item\" or \"user\", got " + simdjson::to_string(*m.by)));
    c.by = *ByName(kCounterBy, s);
    if (auto ok = ParseCount(name, m.count, schema, f.id_type, c); !ok) return Fail(ok.error());
    auto seconds = [&](const std::optional<element>& v, std::string_view member, int64_t lo,
                       int64_t hi) -> Result<int64_t> {
      if (!v) return Fail(Err(name, member, "missing"));
      auto n = Int(*v);
      if (!n || *n < lo || *n > hi)
        return Fail(Err(name, member,
                        "must be an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
                            ", got " + simdjson::to_string(*v)));
      return *n;
    };
    auto bucket = seconds(m.bucket_s, "bucket_s", 1, kMaxBucketS);
    if (!bucket) return Fail(bucket.error());
    c.bucket_s = *bucket;
    auto keep = seconds(m.keep_s, "keep_s", c.bucket_s, c.bucket_s * kMaxBuckets);
    if (!keep) return Fail(keep.error());
    c.keep_s = *keep;
    if (c.keep_s % c.bucket_s != 0)
      return Fail(Err(name, "keep_s",
                      std::to_string(c.keep_s) + " is not a multiple of bucket_s (" +
                          std::to_string(c.bucket_s) + ")"));
    if (m.cache_ms) {
      auto ms = Int(*m.cache_ms);
      if (!ms || *ms < 0 || *ms > kMaxCacheMs)
        return Fail(Err(name, "cache_ms",
                        "must be an integer 0.." + std::to_string(kMaxCacheMs) + ", got " +
                            simdjson::to_string(*m.cache_ms)));
      c.cache_ms = *ms;
    }
    if (!m.fields) return Fail(Err(name, "fields", "missing (a counters family needs fields)"));
    if (auto ok = ParseCounterFields(name, *m.fields, c, f); !ok) return Fail(ok.error());
    f.counters = std::move(c);
    return {};
  }

  // `count`: declared event types, each once, whose `by` id is of the family's id type.
  Result<void> ParseCount(std::string_view name, const std::optional<element>& v,
                          const Schema& schema, ColumnType id_type, CountersSpec& c) {
    if (!v) return Fail(Err(name, "count", "missing (the event types it counts)"));
    simdjson::dom::array types;
    if (v->get(types) || types.size() == 0)
      return Fail(Err(name, "count", "must be a non-empty array of event type names"));
    if (types.size() > kMaxCountedTypes)  // a bucket's slot holds a sum of each
      return Fail(Err(name, "count",
                      "at most " + std::to_string(kMaxCountedTypes) + " event types, got " +
                          std::to_string(types.size())));
    for (element t : types) {
      std::string_view s;
      if (t.get(s))
        return Fail(Err(name, "count", "must be a non-empty array of event type names"));
      const EventType* e = schema.FindEvent(s);
      if (e == nullptr) {
        std::string declared;
        for (const EventType& d : schema.events)
          declared += (declared.empty() ? "" : ", ") + d.name;
        return Fail(
            Err(name, "count",
                "'" + std::string(s) + "' is not a declared event type (" +
                    (declared.empty() ? "the schema declares no events" : "declared: " + declared) +
                    ")"));
      }
      if (c.TypeIndex(s))
        return Fail(Err(name, "count", "'" + std::string(s) + "' is listed twice"));
      const ColumnType by = c.by == CountersSpec::By::kItem ? e->item : e->user;
      if (by != id_type)
        return Fail(Err(name, "by",
                        "the family is keyed by " + std::string(ColumnTypeName(id_type)) +
                            " ids (its id) but event type '" + e->name + "' has " +
                            std::string(ColumnTypeName(by)) + " " +
                            std::string(CounterByName(c.by)) + " ids"));
      c.count.emplace_back(s);
      c.valued.push_back(e->value ? 1 : 0);
    }
    return {};
  }

  // One name of a family's `fields` (at `where`): a valid name, not declared twice, and
  // not past kMaxFields.
  Result<void> CheckFieldName(std::string_view name, std::string_view field,
                              const std::string& where,
                              std::unordered_set<std::string_view>& seen) {
    if (!ValidName(field))
      return Fail(Err(name, "fields",
                      "'" + std::string(field) + "' is not a valid name ([a-z_][a-z0-9_]{0,63})"));
    if (!seen.insert(field).second) return Fail(Err(name, where, "declared twice"));
    if (seen.size() > kMaxFields)
      return Fail(Err(name, "fields", "more than " + std::to_string(kMaxFields) + " fields"));
    return {};
  }

  // `fields`: name -> {"sum": TYPE, "window_s": W} or {"rate": [NUM, DEN], "window_s": W,
  // "prior": [a, b]}; every one an f64 column.
  Result<void> ParseCounterFields(std::string_view name, element v, CountersSpec& c, KeyFamily& f) {
    object obj;
    if (v.get(obj))
      return Fail(Err(name, "fields", "must be an object: field name -> sum or rate"));
    std::unordered_set<std::string_view> seen;
    for (auto [field, def] : obj) {
      const std::string where = "fields." + std::string(field);
      if (auto ok = CheckFieldName(name, field, where, seen); !ok) return Fail(ok.error());
      auto cf = ParseCounterField(name, where, def, c);
      if (!cf) return Fail(cf.error());
      c.fields.push_back(*cf);
      f.fields.push_back({std::string(field), FieldType::kF64});
    }
    if (f.fields.empty()) return Fail(Err(name, "fields", "must declare at least one field"));
    return {};
  }

  Result<CounterField> ParseCounterField(std::string_view name, const std::string& where, element v,
                                         const CountersSpec& c) {
    object obj;
    if (v.get(obj))
      return Fail(Err(name, where,
                      "must be {\"sum\": TYPE, \"window_s\": W} or {\"rate\": [NUM, DEN], "
                      "\"window_s\": W, \"prior\": [a, b]}"));
    std::optional<element> sum, rate, window, prior;
    for (auto [k, val] : obj) {
      std::optional<element>* slot = k == "sum"        ? &sum
                                     : k == "rate"     ? &rate
                                     : k == "window_s" ? &window
                                     : k == "prior"    ? &prior
                                                       : nullptr;
      if (slot == nullptr)
        return Fail(Err(name, where + "." + std::string(k),
                        "unknown member (expected sum or rate, window_s, prior)"));
      if (slot->has_value()) return Fail(Err(name, where + "." + std::string(k), "given twice"));
      *slot = val;
    }
    if (sum.has_value() == rate.has_value())
      return Fail(Err(name, where, "must have exactly one of sum and rate"));
    // A counted type's index, by its name in `v`.
    auto counted = [&](element t, const std::string& member) -> Result<uint32_t> {
      std::string_view s;
      if (t.get(s)) return Fail(Err(name, member, "must be an event type name"));
      auto i = c.TypeIndex(s);
      if (!i) {
        std::string list;
        for (const std::string& x : c.count) list += (list.empty() ? "" : ", ") + x;
        return Fail(
            Err(name, member,
                "'" + std::string(s) + "' is not counted by this family (count: " + list + ")"));
      }
      return *i;
    };
    CounterField cf;
    if (sum) {
      auto i = counted(*sum, where + ".sum");
      if (!i) return Fail(i.error());
      cf.num = *i;
      if (prior) return Fail(Err(name, where + ".prior", "only a rate has a prior"));
    } else {
      cf.kind = CounterField::Kind::kRate;
      simdjson::dom::array pair;
      if (rate->get(pair) || pair.size() != 2)
        return Fail(Err(name, where + ".rate", "must be [NUMERATOR, DENOMINATOR] event types"));
      auto num = counted(pair.at(0).value_unsafe(), where + ".rate[0]");
      if (!num) return Fail(num.error());
      auto den = counted(pair.at(1).value_unsafe(), where + ".rate[1]");
      if (!den) return Fail(den.error());
      cf.num = *num;
      cf.den = *den;
      if (prior) {
        simdjson::dom::array ab;
        double a = 0, b = 0;
        if (prior->get(ab) || ab.size() != 2 || ab.at(0).get(a) || ab.at(1).get(b) ||
            !std::isfinite(a) || !std::isfinite(b) || a < 0 || b < 0)
          return Fail(
              Err(name, where + ".prior",
                  "must be [a, b], two finite numbers >= 0, got " + simdjson::to_string(*prior)));
        cf.prior_a = a;
        cf.prior_b = b;
      }
    }
    if (!window) return Fail(Err(name, where + ".window_s", "missing"));
    auto w = Int(*window);
    if (!w || *w <= 0 || *w % c.bucket_s != 0 || *w > c.keep_s)
      return Fail(Err(name, where + ".window_s",
                      "must be a multiple of bucket_s (" + std::to_string(c.bucket_s) + ") from " +
                          std::to_string(c.bucket_s) + " to keep_s (" + std::to_string(c.keep_s) +
                          "), got " + simdjson::to_string(*window)));
    cf.window_s = *w;
    return cf;
  }

  Result<void> ParseKey(std::string_view name, std::string_view key, KeyFamily& f) {
    if (key.size() > kMaxKeyTemplate)
      return Fail(Err(name, "key",
                      "longer than " + std::to_string(kMaxKeyTemplate) + " bytes (" +
                          std::to_string(key.size()) + ")"));
    const size_t at = key.find("{id}");
    if (at == std::string_view::npos) return Fail(Err(name, "key", "has no {id}"));
    if (key.find("{id}", at + 4) != std::string_view::npos)
      return Fail(Err(name, "key", "has a second {id}"));
    f.key = std::string(key);
    f.key_prefix = std::string(key.substr(0, at));
    f.key_suffix = std::string(key.substr(at + 4));
    if (f.key_prefix.find_first_of("{}") != std::string::npos ||
        f.key_suffix.find_first_of("{}") != std::string::npos)
      return Fail(Err(name, "key", "has '{' or '}' outside {id}"));
    if (key.starts_with("rankd:"))
      return Fail(Err(name, "key", "must not start with 'rankd:' (rankd's own keys)"));
    return {};
  }

  Result<void> ParseFields(std::string_view name, element v, KeyFamily& f) {
    object obj;
    if (v.get(obj)) return Fail(Err(name, "fields", "must be an object: field name -> type"));
    std::unordered_set<std::string_view> seen;
    for (auto [field, type] : obj) {
      const std::string where = "fields." + std::string(field);
      if (auto ok = CheckFieldName(name, field, where, seen); !ok) return Fail(ok.error());
      std::string_view s;
      if (type.get(s)) return Fail(Err(name, where, "must be a type name string"));
      if (s.starts_with("vec")) {
        auto dim = ParseVecDim(s);
        if (!dim)
          return Fail(Err(name, where,
                          "'" + std::string(s) + "' is no vector type: expected vec:D with D " +
                              "an integer from 1 to " + std::to_string(kMaxVecDim)));
        f.fields.push_back({std::string(field), FieldType::kVec, *dim});
        continue;
      }
      auto t = ParseFieldType(s);
      if (!t)
        return Fail(
            Err(name, where,
                "unknown type '" + std::string(s) + "' (expected i64, f64, str, bool, vec:D)"));
      f.fields.push_back({std::string(field), *t});
    }
    if (f.fields.empty()) return Fail(Err(name, "fields", "must declare at least one field"));
    return {};
  }

  std::string file_;
};

}  // namespace

void ForEachFamilyValueStats(
    const std::function<void(const std::string&, const FamilyValueStats&)>& fn) {
  std::lock_guard lock(stats_mu);
  for (const auto& [name, stats] : StatsByName()) fn(name, *stats);
}

std::string_view FamilyTypeName(FamilyType t) { return NameOf(kFamilyTypes, t); }
std::string_view FieldTypeName(FieldType t) { return NameOf(kFieldTypes, t); }

std::string SchemaField::TypeText() const {
  if (type == FieldType::kVec) return "vec:" + std::to_string(dim);
  return std::string(FieldTypeName(type));
}

ColumnType ColumnTypeOf(FieldType t) {
  switch (t) {
    case FieldType::kF64: return ColumnType::kF64;
    case FieldType::kStr: return ColumnType::kStr;
    case FieldType::kVec: return ColumnType::kVec;
    case FieldType::kI64:
    case FieldType::kBool: return ColumnType::kI64;
  }
  return ColumnType::kI64;
}

std::optional<size_t> KeyFamily::FieldIndex(std::string_view field) const {
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].name == field) return i;
  return std::nullopt;
}

std::string_view CounterByName(CountersSpec::By by) { return NameOf(kCounterBy, by); }
std::string_view AnnMetricName(AnnMetric m) { return NameOf(kAnnMetrics, m); }

const AnnIndexSpec* Schema::FindIndex(std::string_view name) const {
  for (const AnnIndexSpec& i : indexes)
    if (i.name == name) return &i;
  return nullptr;
}

std::optional<uint32_t> CountersSpec::TypeIndex(std::string_view type) const {
  for (size_t i = 0; i < count.size(); ++i)
    if (count[i] == type) return static_cast<uint32_t>(i);
  return std::nullopt;
}

const EventType* Schema::FindEvent(std::string_view name) const {
  for (const EventType& e : events)
    if (e.name == name) return &e;
  return nullptr;
}

std::string ZsetMarksProblem(const Schema& schema, const ZsetMarks& m, ColumnType user,
                             ColumnType item) {
  const KeyFamily* f = schema.Find(m.family);
  if (f == nullptr) return "family: unknown family '" + m.family + "'";
  if (f->type != FamilyType::kZset)
    return "family: family '" + f->name + "' is a " + std::string(FamilyTypeName(f->type)) +
           ", not a zset";
  if (f->id_type != user)
    return "family: zset '" + f->name + "' is keyed by " + std::string(ColumnTypeName(f->id_type)) +
           " ids but the user ids are " + std::string(ColumnTypeName(user));
  if (f->members_type != item)
    return "family: zset '" + f->name + "' holds " + std::string(ColumnTypeName(f->members_type)) +
           " members but the item ids are " + std::string(ColumnTypeName(item));
  if (m.max < 1 || m.max > kMaxMarks)
    return "max: must be 1.." + std::to_string(kMaxMarks) + ", got " + std::to_string(m.max);
  if (m.ttl_s < 1 || m.ttl_s > kMaxMarksTtl)
    return "ttl_s: must be 1.." + std::to_string(kMaxMarksTtl) + ", got " + std::to_string(m.ttl_s);
  return "";
}

const KeyFamily* Schema::Find(std::string_view name) const {
  for (const KeyFamily& f : families)
    if (f.name == name) return &f;
  return nullptr;
}

Result<SchemaPtr> ParseSchema(std::string_view text, std::string_view file) {
  return SchemaParser(file).Parse(text);
}

SchemaPtr DemoSchema() {
  static const SchemaPtr demo = [] {
    auto s = ParseSchema(kDemoSchemaJson, "built-in demo schema");
    auto copy = std::make_shared<Schema>(**s);  // a bug if it fails: it is a constant
    copy->builtin = true;
    return SchemaPtr(std::move(copy));
  }();
  return demo;
}

bool ValidStrId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxStrId && id.find_first_of("{}") == std::string_view::npos;
}

}  // namespace rankd
