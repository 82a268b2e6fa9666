// Fuzz target `rank_json`: a /rank request body -> ParseRankRequest -> the plan it
// names among the shipped plans and the test fixtures (plans/ and tests/plans/, loaded
// once) -> params bound, task parameters resolved -> the plan run without Redis
// (fuzz_engine.h) -> the response or error JSON.
// Everything /rank does with a body except HTTP and Redis.
// Corpus: tests/fuzz/corpus/rank_json; dictionary rank_json.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/rank_request.h"
#include "api/rank_response.h"
#include "fuzz_engine.h"
#include "plan/bind.h"
#include "plan/loader.h"
#include "tasks/task.h"

using namespace rankd;

namespace {

// The shipped plans (plans/) and the test fixtures (tests/plans/, which use the test-only
// ops: fixed_rank is the corpus's plan that runs all the way without Redis).
const PlanSet& ShippedPlans() {
  static const PlanSet* plans = [] {
    auto load = [](const char* dir) {
      Result<PlanSet> set = LoadPlanDir(dir, TaskRegistry::WithTestOps());
      if (!set) {
        std::fprintf(stderr, "fuzz_rank_json: %s\n", set.error().message.c_str());
        std::abort();
      }
      return std::move(*set);
    };
    auto* set = new PlanSet(load(RANKD_SOURCE_ROOT "/plans"));
    for (auto& [name, plan] : load(RANKD_SOURCE_ROOT "/tests/plans").plans)
      set->plans.emplace(name, plan);
    return set;
  }();
  return *plans;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const PlanSet& plans = ShippedPlans();
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::string out;
  Result<RankRequest> req = ParseRankRequest(body, /*require_plan=*/true);
  if (!req) {
    AppendJsonString(req.error().message, out);  // what the error body escapes
    return 0;
  }
  PlanPtr plan = plans.Find(req->plan);
  if (!plan) return 0;
  // What the scheduler does per node, done here too so that binding errors are reached
  // even for plans that are not run.
  Result<ParamValues> values = BindParams(*plan, req->params);
  if (!values) {
    AppendJsonString(values.error().message, out);
    return 0;
  }
  for (const PlanNode& node : plan->nodes)
    if (!node.refs.empty()) (void)ResolveArgs(*plan, node, *values);

  auto run = fuzz::RunWithoutRedis(plan, std::move(req->params), req->user_id);
  if (!run) return 0;
  if (*run)
    AppendRankResponse(**run, req->explain, out);
  else
    AppendJsonString(run->error().message, out);
  return 0;
}
