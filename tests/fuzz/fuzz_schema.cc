// Fuzz target `schema`: schema.json text (docs/data.md, "Declared schema") -> ParseSchema ->
// every accepted schema then types plans: the input's text after a line "---" is a plan
// loaded against it (LoadPlanText), and a plan that loads runs on the scheduler without
// Redis; every family of the schema is also read by a small fixed plan per op, so that a
// schema check-plans accepts cannot crash the loader or the first request.
// Corpus: tests/fuzz/corpus/schema (the shipped schemas, with and without plans);
// dictionary schema.dict.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_engine.h"
#include "plan/loader.h"
#include "plan/schema.h"
#include "tasks/task.h"

using namespace rankd;

namespace {

// A plan of one IO node of `op` reading `family` (and a viewer in front when it needs an
// input), in the JSON of docs/plan.md.
std::string OpPlan(const KeyFamily& f, std::string_view op) {
  std::string fields;
  if (f.has_fields()) fields = R"(, "fields": [")" + f.fields[0].name + R"("])";
  std::string node = R"({"node_id": "n", "op": ")" + std::string(op) + R"(", "inputs": ["v"],
      "params": {"family": ")" +
                     f.name + "\"" + fields + "}}";
  return R"({"schema_version": 1, "name": "p", "nodes": [
      {"node_id": "v", "op": "viewer", "inputs": [], "params": {}}, )" +
         node + R"(], "output": {"node": "n"}})";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string_view plan_text;
  if (size_t at = text.find("\n---\n"); at != std::string_view::npos) {
    plan_text = text.substr(at + 5);
    text = text.substr(0, at);
  }
  Result<SchemaPtr> schema = ParseSchema(text, "fuzz/schema.json");
  if (!schema) return 0;
  for (const KeyFamily& f : (*schema)->families) {
    if (f.key.find("{id}") == std::string::npos || f.values == nullptr) __builtin_trap();
    for (std::string_view op : {"follow", "features", "seen_filter", "media"})
      (void)LoadPlanText(OpPlan(f, op), "fuzz.plan.json", TaskRegistry::Default(), nullptr,
                         *schema);
  }
  if (plan_text.empty()) return 0;
  Result<PlanPtr> plan =
      LoadPlanText(plan_text, "fuzz.plan.json", TaskRegistry::Default(), nullptr, *schema);
  if (!plan) return 0;
  (void)fuzz::RunWithoutRedis(*plan, {},
                              (*plan)->user_id_type == ColumnType::kStr ? UserId::Str("u7") : 7);
  return 0;
}
