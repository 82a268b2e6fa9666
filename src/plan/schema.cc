// schema.h: schema.json parsed with simdjson and checked against docs/data.md.
#include "plan/schema.h"

#include <simdjson.h>

#include <map>
#include <mutex>
#include <unordered_set>

#include "core/sha256.h"

namespace rankd {

const std::string_view kDemoSchemaJson = R"({
  "schema_version": 1,
  "families": {
    "user": {"type": "hash", "key": "user:{id}", "fields": {"country": "str", "lang": "str", "age": "i64", "premium": "i64"}},
    "item": {"type": "hash", "key": "item:{id}", "fields": {"author": "i64", "likes": "i64", "age_s": "i64", "category": "str", "country": "str", "quality": "f64", "nsfw": "i64"}},
    "follow": {"type": "list", "key": "follow:{id}"},
    "recs": {"type": "list", "key": "recs:{id}"},
    "media": {"type": "list", "key": "media:{id}"},
    "seen": {"type": "set", "key": "seen:{id}"}
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
constexpr Named<FamilyType> kFamilyTypes[] = {{"hash", FamilyType::kHash},
                                              {"json", FamilyType::kJson},
                                              {"list", FamilyType::kList},
                                              {"zset", FamilyType::kZset},
                                              {"set", FamilyType::kSet}};
constexpr Named<FieldType> kFieldTypes[] = {{"i64", FieldType::kI64},
                                            {"f64", FieldType::kF64},
                                            {"str", FieldType::kStr},
                                            {"bool", FieldType::kBool}};
constexpr Named<ColumnType> kIdTypes[] = {{"i64", ColumnType::kI64}, {"str", ColumnType::kStr}};

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

// Process-wide: one id per distinct family definition (KeyFamily::cache_id).
uint32_t FamilyCacheId(const KeyFamily& f) {
  std::string def = f.name + '\n' + std::string(FamilyTypeName(f.type)) + '\n' + f.key + '\n' +
                    std::string(ColumnTypeName(f.id_type)) + '\n' +
                    std::string(ColumnTypeName(f.members_type));
  for (const SchemaField& x : f.fields)
    def += '\n' + x.name + ':' + std::string(FieldTypeName(x.type));
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
    bool version = false, families = false;
    for (auto [k, v] : top) {
      if (k == "schema_version") {
        if (version) return Fail(Err("", "schema_version", "given twice"));
        version = true;
        if (v.type() != element_type::INT64 || int64_t(v.get_int64()) != 1)
          return Fail(Err("", "schema_version", "must be 1, got " + simdjson::to_string(v)));
      } else if (k == "families") {
        if (families) return Fail(Err("", "families", "given twice"));
        families = true;
        if (auto ok = ParseFamilies(v, *schema); !ok) return Fail(ok.error());
      } else {
        return Fail(Err("", std::string(k), "unknown member (expected schema_version, families)"));
      }
    }
    if (!version) return Fail(Err("", "schema_version", "missing"));
    if (!families) return Fail(Err("", "families", "missing"));
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
      auto f = ParseFamily(name, def);
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

  Result<KeyFamily> ParseFamily(std::string_view name, element v) {
    object obj;
    if (v.get(obj)) return Fail(Err(name, "", "must be an object"));
    KeyFamily f;
    f.name = std::string(name);
    std::optional<element> type, key, id, fields, members;
    for (auto [k, val] : obj) {
      std::optional<element>* slot = k == "type"      ? &type
                                     : k == "key"     ? &key
                                     : k == "id"      ? &id
                                     : k == "fields"  ? &fields
                                     : k == "members" ? &members
                                                      : nullptr;
      if (slot == nullptr)
        return Fail(Err(name, k, "unknown member (expected type, key, id, fields, members)"));
      if (slot->has_value()) return Fail(Err(name, k, "given twice"));
      *slot = val;
    }
    if (!type) return Fail(Err(name, "type", "missing"));
    std::string_view s;
    if (type->get(s)) return Fail(Err(name, "type", "must be a string"));
    auto t = ParseFamilyType(s);
    if (!t)
      return Fail(
          Err(name, "type",
              "unknown type '" + std::string(s) + "' (expected hash, json, list, zset, set)"));
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
                          " family has no fields (only hash and json families do)"));
    if (f.has_fields()) {
      if (!fields) return Fail(Err(name, "fields", "missing (a hash or json family needs fields)"));
      if (auto ok = ParseFields(name, *fields, f); !ok) return Fail(ok.error());
    }
    f.cache_id = FamilyCacheId(f);
    f.values = ValueStatsOf(f.name);
    return f;
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
      if (!ValidName(field))
        return Fail(
            Err(name, "fields",
                "'" + std::string(field) + "' is not a valid name ([a-z_][a-z0-9_]{0,63})"));
      if (!seen.insert(field).second) return Fail(Err(name, where, "declared twice"));
      if (seen.size() > kMaxFields)
        return Fail(Err(name, "fields", "more than " + std::to_string(kMaxFields) + " fields"));
      std::string_view s;
      if (type.get(s)) return Fail(Err(name, where, "must be a type name string"));
      auto t = ParseFieldType(s);
      if (!t)
        return Fail(Err(name, where,
                        "unknown type '" + std::string(s) + "' (expected i64, f64, str, bool)"));
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

ColumnType ColumnTypeOf(FieldType t) {
  switch (t) {
    case FieldType::kF64: return ColumnType::kF64;
    case FieldType::kStr: return ColumnType::kStr;
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
