// Fuzz target `plan`: plan JSON -> loader (LoadPlanText: validation, typing, the
// expression compiler) -> whatever loads must run. Each accepted plan then runs
//  1. every compiled expression and predicate on generated rows of its node's input
//     types (fuzz_engine.h), values the plan's IO nodes could have fetched, and
//  2. the whole plan on the scheduler without Redis (IO nodes fail or degrade), and
//     for a plan with a `log` block the served-log record of its answer,
// so that "check-plans accepts it, the first request crashes" is found. A plan loads
// with the test-only ops enabled; without them it must load exactly when it uses none.
// Corpus: tests/fuzz/corpus/plan (the shipped plans and more); dictionary plan.dict.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_engine.h"
#include "plan/bind.h"
#include "plan/loader.h"
#include "served/record.h"
#include "tasks/task.h"

using namespace rankd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Loaded with the test-only ops (the corpus's fixed_source plans run all the way
  // without Redis); the production registry must then load the same plan exactly when
  // it uses none of them.
  Result<PlanPtr> plan = LoadPlanText(text, "fuzz.plan.json", TaskRegistry::WithTestOps());
  if (!plan) return 0;
  const Plan& p = **plan;
  bool test_ops = false;
  for (const PlanNode& node : p.nodes) test_ops |= node.schema->test_only;
  if (LoadPlanText(text, "fuzz.plan.json", TaskRegistry::Default()).has_value() == test_ops)
    __builtin_trap();

  Result<ParamValues> defaults = BindParams(p, {});
  if (!defaults) return 0;  // a declared default outside its own bounds is a load error
  for (const PlanNode& node : p.nodes) {
    if (!node.expr && !node.pred) continue;
    const ColumnTypes& in = node.inputs.empty() ? ColumnTypes{} : p.nodes[node.inputs[0]].out_types;
    RowSet rows = fuzz::GeneratedRows(in);
    if (node.expr) {
      Column c = *node.expr->Evaluate(rows, *defaults);
      if (c.size() != rows.physical_rows() || c.type != node.expr->type()) __builtin_trap();
    }
    if (node.pred) {
      Selection kept = *node.pred->Select(rows, *defaults);
      for (uint32_t r : kept)
        if (r >= rows.physical_rows()) __builtin_trap();
    }
  }

  auto run = fuzz::RunWithoutRedis(*plan, {}, 7);
  if (run && *run && p.log.enabled) {
    std::string record;
    RecordHeader h;
    h.served_id = "0123456789abcdef0123456789abcdef";
    h.ts_ms = 1;
    h.request_id = "fuzz";
    AppendServedRecord(**run, h, record);
    if (record.empty() || record.front() != '{' || record.back() != '}') __builtin_trap();
  }
  return 0;
}
