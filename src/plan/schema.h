// Schema: the declared Redis layout of a plans folder (`schema.json`, docs/data.md):
// families of keys, each with a key template, an id type, and its fields (hash, json) or
// member type (list, zset, set). Without a schema.json a folder uses the built-in demo
// schema (kDemoSchemaJson, also shipped as plans/schema.json). Parsed and validated once
// at load, immutable after, installed with the plans and models as one snapshot.
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

enum class FamilyType : uint8_t { kHash, kJson, kList, kZset, kSet };
std::string_view FamilyTypeName(FamilyType t);

// A field's declared type. kBool is stored as 0/1/true/false (a JSON boolean in a json
// family) and becomes an i64 column holding 0 or 1.
enum class FieldType : uint8_t { kI64, kF64, kStr, kBool };
std::string_view FieldTypeName(FieldType t);
ColumnType ColumnTypeOf(FieldType t);

// Values of a family read from Redis that became null or were dropped, by kind
// (rankd_redis_bad_values_total{family, kind}). One per family name for the life of the
// process (a reload keeps counting into it). Relaxed atomics: any thread.
struct FamilyValueStats {
  std::atomic<uint64_t> missing_field{0};     // a declared field absent (or the whole key)
  std::atomic<uint64_t> unparsable_field{0};  // a value not of its declared type
  std::atomic<uint64_t> bad_id{0};            // a member or id that is no valid id (dropped)
  std::atomic<uint64_t> bad_json{0};  // a json value that is no object, invalid, or too large
};
// Calls fn(family name, stats) for every family ever loaded, in name order.
void ForEachFamilyValueStats(
    const std::function<void(const std::string&, const FamilyValueStats&)>& fn);

struct SchemaField {
  std::string name;
  FieldType type = FieldType::kI64;
};

struct KeyFamily {
  std::string name;
  FamilyType type = FamilyType::kHash;
  std::string key;                             // the template, e.g. "item:{id}"
  std::string key_prefix;                      // its text before {id}
  std::string key_suffix;                      // and after
  ColumnType id_type = ColumnType::kI64;       // kI64 or kStr: what fills {id}
  ColumnType members_type = ColumnType::kI64;  // list, zset, set: kI64 or kStr
  std::vector<SchemaField> fields;             // hash, json: in declaration order
  // The same for every family of the same definition (name, type, key, id, members,
  // fields) for the life of the process: the shard cache keys entries by it, so a reload
  // that changes a family's definition leaves its old entries unreachable (and drops them).
  uint32_t cache_id = 0;
  FamilyValueStats* values = nullptr;  // never null in a parsed schema

  bool has_fields() const { return type == FamilyType::kHash || type == FamilyType::kJson; }
  bool is_list() const { return type == FamilyType::kList || type == FamilyType::kZset; }
  // Whether its values may be kept in the shard cache (a set is asked per request).
  bool cacheable() const { return type != FamilyType::kSet; }
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

struct Schema {
  std::vector<KeyFamily> families;  // in declaration order
  std::string json;                 // the file's text (or the built-in's): GET /schema
  std::string sha256;               // of `json`
  bool builtin = false;             // the demo schema, no schema.json in the folder

  const KeyFamily* Find(std::string_view name) const;
};
using SchemaPtr = std::shared_ptr<const Schema>;

// Limits of docs/data.md.
inline constexpr size_t kMaxFamilies = 256;
inline constexpr size_t kMaxFields = 1024;
inline constexpr size_t kMaxKeyTemplate = 256;
inline constexpr size_t kMaxStrId = 256;

// The built-in demo schema's text (docs/data.md): equal to plans/schema.json.
extern const std::string_view kDemoSchemaJson;

// Parses and validates a schema file's text. Errors are bad_request naming `file`, the
// family and the member ("plans/schema.json: family 'item': fields.likes: unknown type
// 'int'").
Result<SchemaPtr> ParseSchema(std::string_view text, std::string_view file);
// The demo schema (built once).
SchemaPtr DemoSchema();

// Whether `id` may fill a str family's {id}: 1..256 bytes without '{' or '}'.
bool ValidStrId(std::string_view id);

}  // namespace rankd
