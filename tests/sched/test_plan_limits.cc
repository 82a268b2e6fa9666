// Whatever the loader accepts runs: a vm expression at the node limit loads and runs
// end to end (rankd once segfaulted on the first request of a 70,000-argument `+` that
// `check-plans` accepted); one node more is a load error naming the plan, the node, the
// expression id and the limit.
#include <doctest/doctest.h>

#include "engine_fixture.h"

using namespace rankd;
using rankd::test::Engine;
using rankd::test::PlanDoc;

namespace {

// fixed_source(3) -> vm "s" = `+` over `args` {"key": "score"} -> output.
std::string WidePlan(size_t args) {
  std::string expr = R"({"op": "+", "args": [)";
  for (size_t i = 0; i < args; ++i) expr += (i ? "," : "") + std::string(R"({"key": "score"})");
  expr += "]}";
  return PlanDoc(R"({"node_id": "src", "op": "fixed_source", "params": {"count": 3}},
                    {"node_id": "s", "op": "vm", "inputs": ["src"], "params": {"out_key": "sum", "expr": "e0"}})",
                 "s", "{}", R"("expr_table": {"e0": )" + expr + "}, ");
}

}  // namespace

TEST_SUITE("plan_limits") {
  TEST_CASE("an expression of 65,535 nodes loads and runs") {
    Engine e;
    auto r = e.Run(WidePlan(65534));
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    const Column* sum = r->output.column("sum");
    REQUIRE(sum != nullptr);
    REQUIRE(sum->type == ColumnType::kF64);
    CHECK(sum->f64[2] == 3.0 * 65534);
  }

  TEST_CASE(
      "an expression of 65,536 or 70,000 nodes is a load error naming plan, node, expr, limit") {
    for (size_t args : {size_t{65535}, size_t{70000}}) {
      auto p = LoadPlanText(WidePlan(args), "wide.plan.json", TaskRegistry::WithTestOps());
      REQUIRE_FALSE(p.has_value());
      const std::string& m = p.error().message;
      CHECK_MESSAGE(m.find("wide.plan.json: node 's': ") == 0, m);
      CHECK_MESSAGE(m.find("(expr 'e0')") != std::string::npos, m);
      CHECK_MESSAGE(m.find("65535 nodes (the limit)") != std::string::npos, m);
    }
  }

}  // TEST_SUITE
