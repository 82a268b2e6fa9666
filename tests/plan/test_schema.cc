// The schema file (src/plan/schema.h): the built-in demo schema equals plans/schema.json,
// and what a parsed schema holds. Load errors are tested end to end in
// tests/server/test_schema.py.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "plan/schema.h"

using namespace rankd;

TEST_CASE("the built-in demo schema is plans/schema.json") {
  std::ifstream in(std::string(RANKD_SOURCE_ROOT) + "/plans/schema.json", std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == kDemoSchemaJson);
  SchemaPtr demo = DemoSchema();
  CHECK(demo->builtin);
  REQUIRE(demo->families.size() == 11);
  const KeyFamily* item = demo->Find("item");
  REQUIRE(item != nullptr);
  CHECK(item->type == FamilyType::kHash);
  CHECK(item->key_prefix == "item:");
  CHECK(item->key_suffix.empty());
  CHECK(item->fields.size() == 7);
  CHECK(item->FieldIndex("quality") == 5);
  CHECK(ColumnTypeOf(item->fields[5].type) == ColumnType::kF64);
  CHECK(demo->Find("seen")->type == FamilyType::kSet);
  CHECK(demo->Find("nope") == nullptr);
  // Its events: impressions mark the served zset; both count into item and user counters.
  REQUIRE(demo->events.size() == 2);
  const EventType* imp = demo->FindEvent("impression");
  REQUIRE(imp != nullptr);
  REQUIRE(imp->marks.has_value());
  CHECK(imp->marks->family == "served");
  CHECK(demo->FindEvent("click") != nullptr);
  REQUIRE(demo->Find("item_counts")->counters.has_value());
  CHECK(demo->Find("item_counts")->counters->by == CountersSpec::By::kItem);
  CHECK(demo->Find("user_counts")->counters->by == CountersSpec::By::kUser);
}

TEST_CASE("families: templates, id types, cache ids by definition") {
  auto parse = [](std::string_view text) { return ParseSchema(text, "s.json"); };
  auto s = parse(R"({"schema_version": 1, "families": {
      "doc": {"type": "json", "key": "d:{id}:v1", "id": "str", "fields": {"ok": "bool"}},
      "z": {"type": "zset", "key": "z{id}", "members": "str"}}})");
  REQUIRE(s.has_value());
  const KeyFamily& doc = *(*s)->Find("doc");
  CHECK(doc.key_prefix == "d:");
  CHECK(doc.key_suffix == ":v1");
  CHECK(doc.id_type == ColumnType::kStr);
  CHECK(ColumnTypeOf(doc.fields[0].type) == ColumnType::kI64);  // bool -> i64 0/1
  CHECK(doc.MatchKey("d:abc:v1") == std::optional<std::string_view>("abc"));
  CHECK(doc.MatchKey("d::v1") == std::nullopt);
  CHECK(doc.MatchKey("d:abc:v2") == std::nullopt);
  CHECK(doc.KeyOf("x") == "d:x:v1");
  const KeyFamily& z = *(*s)->Find("z");
  CHECK(z.members_type == ColumnType::kStr);
  CHECK(z.id_type == ColumnType::kI64);
  // The same definition keeps its cache id across loads; a changed one gets another.
  auto again = parse(R"({"schema_version": 1, "families": {
      "doc": {"type": "json", "key": "d:{id}:v1", "id": "str", "fields": {"ok": "bool"}},
      "z": {"type": "zset", "key": "z{id}", "members": "i64"}}})");
  REQUIRE(again.has_value());
  CHECK((*again)->Find("doc")->cache_id == doc.cache_id);
  CHECK((*again)->Find("z")->cache_id != z.cache_id);
  CHECK((*again)->Find("doc")->values == doc.values);  // counters by name
}

TEST_CASE("string ids: 1..256 bytes, no braces") {
  CHECK(ValidStrId("a"));
  CHECK(ValidStrId(std::string(256, 'x')));
  CHECK_FALSE(ValidStrId(""));
  CHECK_FALSE(ValidStrId(std::string(257, 'x')));
  CHECK_FALSE(ValidStrId("a{b"));
  CHECK_FALSE(ValidStrId("}"));
}
