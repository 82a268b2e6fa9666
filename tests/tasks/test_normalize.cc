// normalize against a reference written here (each statistic computed the obvious way:
// std::accumulate, a count of greater values) over random inputs behind a selection
// vector with nulls; the four methods by hand; ties; a constant column; bool and i64
// keys; its load errors (a str key, an unknown method, k out of bounds); `k` as a
// `{"param"}` reference; a cancelled run.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "data/column_builder.h"
#include "plan/bind.h"
#include "plan/loader.h"
#include "tasks/task.h"

using namespace rankd;

// A named namespace: the unity build compiles this file with the other task tests.
namespace normalize_test {

using Cells = std::vector<std::optional<double>>;

// normalize called directly on `in` (column x), out_key "n".
Result<RowSet> Normalize(const RowSet& in, const std::string& method, double k = 60,
                         const CancelToken* cancel = nullptr) {
  const TaskSpec* spec = TaskRegistry::Default().Find("normalize");
  REQUIRE(spec);
  TaskArgs args(&spec->params);
  args.at(args.Index("key")) = std::string("x");
  args.at(args.Index("out_key")) = std::string("n");
  args.at(args.Index("method")) = method;
  args.at(args.Index("k")) = k;
  PlanNode node;
  node.id = "norm";
  node.op = "normalize";
  ParamValues params;
  TaskContext ctx;
  ctx.node = &node;
  ctx.args = &args;
  ctx.params = &params;
  ctx.cancel = cancel;
  return spec->run_cpu(ctx, {in});
}

// Column n of `out` by logical row.
Cells Column_n(const RowSet& out) {
  const Column* c = out.column("n");
  REQUIRE(c);
  REQUIRE(c->type == ColumnType::kF64);
  Cells v;
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t r = out.row(i);
    v.push_back(c->valid(r) ? std::optional<double>(c->f64[r]) : std::nullopt);
  }
  return v;
}

RowSet F64Input(const Cells& xs) {
  ColumnBuilder x(ColumnType::kF64, xs.size());
  for (const auto& v : xs) v ? x.AppendF64(*v) : x.AppendNulls(1);
  RowSet in;
  in.SetColumn("x", Share(std::move(x).Finish()));
  return in;
}

Cells Run(const Cells& xs, const std::string& method, double k = 60) {
  auto out = Normalize(F64Input(xs), method, k);
  REQUIRE_MESSAGE(out.has_value(), out.error().message);
  return Column_n(*out);
}

// The reference: statistics of the non-null values, each the straightforward way.
Cells Reference(const Cells& xs, const std::string& method, double k) {
  std::vector<double> v;
  for (const auto& x : xs)
    if (x) v.push_back(*x);
  Cells out;
  if (v.empty()) return Cells(xs.size());
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / n);
  const double lo = *std::min_element(v.begin(), v.end()),
               hi = *std::max_element(v.begin(), v.end());
  for (const auto& x : xs) {
    if (!x) {
      out.push_back(std::nullopt);
      continue;
    }
    double greater = 0;
    for (double y : v) greater += y > *x;
    if (method == "minmax") out.push_back(hi == lo ? 0 : (*x - lo) / (hi - lo));
    if (method == "zscore") out.push_back(sd == 0 ? 0 : (*x - mean) / sd);
    if (method == "rank") out.push_back(1 + greater);
    if (method == "reciprocal_rank") out.push_back(1 / (k + 1 + greater));
  }
  return out;
}

void CheckNear(const Cells& got, const Cells& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].has_value() == want[i].has_value());
    if (got[i]) CHECK(*got[i] == doctest::Approx(*want[i]).epsilon(1e-12));
  }
}

TEST_SUITE("normalize") {
  TEST_CASE("the four methods by hand, ties sharing the smallest rank, nulls left null") {
    const Cells xs = {3, std::nullopt, 1, 5, 3};
    CHECK(Run(xs, "minmax") == Cells{0.5, std::nullopt, 0, 1, 0.5});
    CHECK(Run(xs, "rank") == Cells{2, std::nullopt, 4, 1, 2});
    CHECK(Run(xs, "reciprocal_rank", 0) == Cells{0.5, std::nullopt, 0.25, 1, 0.5});
    CheckNear(Run(xs, "reciprocal_rank"),
              Cells{1 / 62.0, std::nullopt, 1 / 64.0, 1 / 61.0, 1 / 62.0});
    // mean 3, population variance (0 + 4 + 4 + 0) / 4 = 2.
    CheckNear(Run(xs, "zscore"),
              Cells{0, std::nullopt, -2 / std::sqrt(2.0), 2 / std::sqrt(2.0), 0});
  }

  TEST_CASE("a constant column gives 0 for minmax and zscore; all nulls stay null") {
    CHECK(Run({7, 7, std::nullopt}, "minmax") == Cells{0, 0, std::nullopt});
    CHECK(Run({7, 7, std::nullopt}, "zscore") == Cells{0, 0, std::nullopt});
    CHECK(Run({7, 7}, "rank") == Cells{1, 1});
    CHECK(Run({std::nullopt, std::nullopt}, "zscore") == Cells{std::nullopt, std::nullopt});
    CHECK(Run({}, "minmax").empty());
  }

  TEST_CASE("equals the reference over random inputs behind a selection") {
    std::mt19937 rng(11);
    for (int round = 0; round < 40; ++round) {
      const size_t n = 1 + rng() % 300;
      Cells physical(n);
      for (auto& x : physical)
        if (rng() % 5) x = static_cast<double>(static_cast<int>(rng() % 21) - 10) / 4;  // ties
      // Every other physical row, backwards: the op must see only these, in this order.
      Selection sel;
      for (size_t r = n; r-- > 0;)
        if (r % 2 == 0) sel.push_back(static_cast<uint32_t>(r));
      Cells logical;
      for (uint32_t r : sel) logical.push_back(physical[r]);
      RowSet in = F64Input(physical).WithSelection(sel);
      for (const char* m : {"minmax", "zscore", "rank", "reciprocal_rank"}) {
        auto out = Normalize(in, m, 10);
        REQUIRE(out.has_value());
        CheckNear(Column_n(*out), Reference(logical, m, 10));
        const Column* c = out->column("n");  // rows outside the selection are null
        for (size_t r = 1; r < n; r += 2) CHECK_FALSE(c->valid(r));
      }
    }
  }

  TEST_CASE("i64 and bool keys") {
    RowSet in;
    in.SetColumn("x", Share(Column::I64(std::vector<int64_t>{10, 20, 30})));
    auto out = Normalize(in, "minmax");
    REQUIRE(out.has_value());
    CHECK(Column_n(*out) == Cells{0, 0.5, 1});
    RowSet b;
    b.SetColumn("x", Share(Column::Bool(std::vector<uint8_t>{1, 0, 1})));
    auto rb = Normalize(b, "rank");
    REQUIRE(rb.has_value());
    CHECK(Column_n(*rb) == Cells{1, 3, 1});
  }

  TEST_CASE("a cancelled run returns the cancelled error") {
    CancelToken cancel;
    cancel.Cancel();
    auto r = Normalize(F64Input({1, 2}), "rank", 60, &cancel);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kUnavailable);
  }

  std::string Plan(const std::string& key, const std::string& extra) {
    return R"({"schema_version": 1, "name": "p",
        "params": {"kk": {"type": "f64", "default": 5}},
        "nodes": [{"node_id": "src", "op": "fixed_source", "params": {"count": 3}},
                  {"node_id": "s", "op": "vm", "inputs": ["src"], "params": {"out_key": "s", "expr": "s"}},
                  {"node_id": "n", "op": "normalize", "inputs": ["s"],
                   "params": {"key": ")" +
           key + R"(", "out_key": "score")" + extra + R"(}}],
        "expr_table": {"s": {"const": "x"}},
        "output": {"node": "n"}})";
  }

  TEST_CASE("at load: the output column, a str key, the method, k and its {\"param\"}") {
    auto ok = LoadPlanText(Plan("score", R"(, "method": "reciprocal_rank", "k": {"param": "kk"})"),
                           "p.plan.json", TaskRegistry::WithTestOps());
    REQUIRE_MESSAGE(ok.has_value(), ok.error().message);
    const PlanNode& n = (*ok)->nodes[2];
    CHECK(n.out_types.find("score") == ColumnType::kF64);
    auto values = BindParams(**ok, {{"kk", 2.0}});
    REQUIRE(values.has_value());
    auto args = ResolveArgs(**ok, n, *values);
    REQUIRE(args.has_value());
    CHECK(args->F64("k") == 2.0);
    auto str = LoadPlanText(Plan("s", R"(, "method": "rank")"), "p.plan.json",
                            TaskRegistry::WithTestOps());
    REQUIRE_FALSE(str.has_value());
    CHECK(str.error().message.find("params.key: column 's' is str") != std::string::npos);
    auto method = LoadPlanText(Plan("score", R"(, "method": "max")"), "p.plan.json",
                               TaskRegistry::WithTestOps());
    REQUIRE_FALSE(method.has_value());
    CHECK(method.error().message.find("params.method") != std::string::npos);
    auto none = LoadPlanText(Plan("score", ""), "p.plan.json", TaskRegistry::WithTestOps());
    REQUIRE_FALSE(none.has_value());
    auto k = LoadPlanText(Plan("score", R"(, "method": "rank", "k": -1)"), "p.plan.json",
                          TaskRegistry::WithTestOps());
    REQUIRE_FALSE(k.has_value());
    CHECK(k.error().message.find("params.k") != std::string::npos);
  }
}

}  // namespace normalize_test
