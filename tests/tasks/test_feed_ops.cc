// diversify and cap against plain reference implementations written here (a std::map of
// counts, std::pow, std::stable_sort; a scan of the last window - 1 kept rows) over
// random inputs: ties, null keys and scores, one key, all distinct keys, i64 and str
// keys, inputs behind a selection vector, window 1, defer on and off; `{"param"}`
// references resolved per request; cancelled runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "core/cancel.h"
#include "data/column_builder.h"
#include "plan/bind.h"
#include "plan/loader.h"
#include "tasks/task.h"

using namespace rankd;

// A named namespace: the unity build compiles this file with test_cpu_tasks.cc.
namespace feed_ops_test {

// One input row as the references see it.
using Key = std::variant<std::monostate, int64_t, std::string>;  // monostate: null
struct Row {
  int64_t id;
  Key key;
  std::optional<double> score;
};

// An op called directly with literal arguments (defaults for the rest).
struct OpCall {
  const TaskSpec* spec;
  TaskArgs args;
  PlanNode node;
  TaskContext ctx;
  ParamValues params;

  explicit OpCall(std::string_view op, std::initializer_list<std::pair<std::string, Value>> given)
      : spec(TaskRegistry::Default().Find(op)), args(&spec->params) {
    REQUIRE(spec);
    for (size_t i = 0; i < spec->params.size(); ++i) args.at(i) = spec->params[i].default_value;
    for (const auto& [name, v] : given) args.at(args.Index(name)) = v;
    node.id = spec->op + "_node";
    node.op = spec->op;
    ctx.node = &node;
    ctx.args = &args;
    ctx.params = &params;
  }
  RowSet Run(const RowSet& in) {
    auto r = spec->run_cpu(ctx, {in});
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    return std::move(*r);
  }
};

// The rows as a row set: columns id, k (i64 or str), score (f64), each with spare
// physical rows around the given ones, and a selection vector that picks the given rows
// in order from a shuffled physical layout (the ops must follow the selection).
RowSet Build(const std::vector<Row>& rows, bool str_keys, std::mt19937& rng) {
  const size_t n = rows.size(), physical = n + n / 2 + 1;
  std::vector<uint32_t> where(physical);
  for (uint32_t i = 0; i < physical; ++i) where[i] = i;
  std::shuffle(where.begin(), where.end(), rng);
  std::vector<const Row*> at(physical, nullptr);
  for (size_t i = 0; i < n; ++i) at[where[i]] = &rows[i];
  Row spare{-1, Key{}, 1e9};  // outside the selection: never seen
  ColumnBuilder id(ColumnType::kI64, physical),
      key(str_keys ? ColumnType::kStr : ColumnType::kI64, physical),
      score(ColumnType::kF64, physical);
  for (const Row* r : at) {
    if (!r) r = &spare;
    id.AppendI64(r->id);
    if (std::holds_alternative<std::monostate>(r->key))
      key.AppendNulls(1);
    else if (str_keys)
      key.AppendStr(std::get<std::string>(r->key));
    else
      key.AppendI64(std::get<int64_t>(r->key));
    if (r->score)
      score.AppendF64(*r->score);
    else
      score.AppendNulls(1);
  }
  RowSet rs;
  rs.SetColumn("id", Share(std::move(id).Finish()));
  rs.SetColumn("k", Share(std::move(key).Finish()));
  rs.SetColumn("score", Share(std::move(score).Finish()));
  return rs.WithSelection(Selection(where.begin(), where.begin() + ptrdiff_t(n)));
}

std::vector<int64_t> Ids(const RowSet& rs) {
  std::vector<int64_t> out;
  const Column* id = rs.column("id");
  for (size_t i = 0; i < rs.size(); ++i) out.push_back(id->i64[rs.row(i)]);
  return out;
}

std::vector<std::optional<double>> Cells(const RowSet& rs, const std::string& col) {
  std::vector<std::optional<double>> out;
  const Column* c = rs.column(col);
  for (size_t i = 0; i < rs.size(); ++i) {
    uint32_t r = rs.row(i);
    out.push_back(c->valid(r) ? std::optional<double>(c->f64[r]) : std::nullopt);
  }
  return out;
}

// ---- the references ------------------------------------------------------------------

struct RefScored {
  int64_t id;
  std::optional<double> score;
};

std::vector<RefScored> RefDiversify(const std::vector<Row>& rows, double decay, double floor) {
  std::map<Key, int> count;
  std::vector<RefScored> out;
  for (const Row& r : rows) {
    int k = std::holds_alternative<std::monostate>(r.key) ? 0 : count[r.key]++;
    std::optional<double> s;
    if (r.score) s = *r.score * (floor + (1 - floor) * std::pow(decay, k));
    out.push_back({r.id, s});
  }
  std::stable_sort(out.begin(), out.end(), [](const RefScored& a, const RefScored& b) {
    if (!a.score || !b.score) return a.score.has_value() && !b.score.has_value();
    return *a.score > *b.score;
  });
  return out;
}

std::vector<int64_t> RefCap(const std::vector<Row>& rows, int max, int window, bool defer) {
  std::vector<const Row*> kept, deferred;
  for (const Row& r : rows) {
    int same = 0;
    size_t from = kept.size() > size_t(window - 1) ? kept.size() - size_t(window - 1) : 0;
    for (size_t j = from; j < kept.size(); ++j) same += kept[j]->key == r.key;
    if (std::holds_alternative<std::monostate>(r.key) || same < max)
      kept.push_back(&r);
    else
      deferred.push_back(&r);
  }
  std::vector<int64_t> out;
  for (const Row* r : kept) out.push_back(r->id);
  if (defer)
    for (const Row* r : deferred) out.push_back(r->id);
  return out;
}

// ---- random inputs -------------------------------------------------------------------

enum class Keys { kOne, kAllDistinct, kFew, kMany };

std::vector<Row> RandomRows(std::mt19937& rng, size_t n, Keys keys, bool str_keys, double null_keys,
                            double null_scores, bool tied_scores) {
  std::uniform_real_distribution<double> unit(0, 1), score(-2, 5);
  std::uniform_int_distribution<int> small(0, 3), few(0, 4), many(0, 60);
  std::vector<Row> rows;
  for (size_t i = 0; i < n; ++i) {
    Row r{static_cast<int64_t>(i + 1), {}, {}};
    if (unit(rng) >= null_keys) {
      int64_t k = keys == Keys::kOne           ? 7
                  : keys == Keys::kAllDistinct ? static_cast<int64_t>(i) * 1000003 - 500
                  : keys == Keys::kFew         ? few(rng) - 2
                                               : many(rng) * 4096;
      if (str_keys)
        r.key = "author-" + std::to_string(k);
      else
        r.key = k;
    }
    if (unit(rng) >= null_scores)
      r.score = tied_scores ? small(rng) * 0.5 - 0.5 : score(rng);  // ties: -0.5, 0, 0.5, 1
    rows.push_back(std::move(r));
  }
  return rows;
}

struct Case {
  size_t n;
  Keys keys;
  bool str_keys;
  double null_keys, null_scores;
  bool tied;
};

Case RandomCase(std::mt19937& rng, int round) {
  static const size_t sizes[] = {0, 1, 2, 3, 10, 60, 257, 400};
  std::uniform_int_distribution<int> pick(0, 7), four(0, 3);
  static const double nulls[] = {0, 0, 0.1, 0.5};
  return {sizes[pick(rng)],     static_cast<Keys>(round % 4),
          (round / 4) % 2 == 1, nulls[four(rng)],
          nulls[four(rng)],     four(rng) < 2};
}

TEST_SUITE("feed_ops") {
  TEST_CASE("diversify equals the reference over random inputs (exact: dyadic decays)") {
    std::mt19937 rng(33);
    // decay^k is exact in binary for these, both as std::pow and as a running product.
    const double decays[] = {0, 0.25, 0.5, 1}, floors[] = {0, 0.25, 0.5, 1};
    for (int round = 0; round < 400; ++round) {
      Case c = RandomCase(rng, round);
      double decay = decays[round % 4], floor = floors[(round / 8) % 4];
      std::vector<Row> rows =
          RandomRows(rng, c.n, c.keys, c.str_keys, c.null_keys, c.null_scores, c.tied);
      RowSet in = Build(rows, c.str_keys, rng);
      // out_key: the score column replaced (the default), or a new one.
      bool own_column = round % 3 == 0;
      OpCall op("diversify", {{"key", std::string("k")},
                              {"score", std::string("score")},
                              {"out_key", std::string(own_column ? "div" : "")},
                              {"decay", decay},
                              {"floor", floor}});
      RowSet out = op.Run(in);
      std::vector<RefScored> want = RefDiversify(rows, decay, floor);
      std::vector<int64_t> want_ids;
      std::vector<std::optional<double>> want_scores;
      for (const RefScored& s : want) want_ids.push_back(s.id), want_scores.push_back(s.score);
      INFO("round ", round, " n ", c.n, " decay ", decay, " floor ", floor);
      REQUIRE(Ids(out) == want_ids);
      CHECK(Cells(out, own_column ? "div" : "score") == want_scores);
      if (own_column) {  // the score column is kept as it was
        CHECK(out.column("score") == in.column("score"));
        CHECK(out.num_columns() == 4);
      }
    }
  }

  TEST_CASE("diversify: any decay, scores within rounding of the reference, a stable order") {
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
      Case c = RandomCase(rng, round);
      std::uniform_real_distribution<double> unit(0, 1);
      double decay = unit(rng), floor = unit(rng);
      std::vector<Row> rows =
          RandomRows(rng, c.n, c.keys, c.str_keys, c.null_keys, c.null_scores, c.tied);
      RowSet out = OpCall("diversify", {{"key", std::string("k")},
                                        {"score", std::string("score")},
                                        {"decay", decay},
                                        {"floor", floor}})
                       .Run(Build(rows, c.str_keys, rng));
      std::map<int64_t, std::optional<double>> want;
      for (const RefScored& s : RefDiversify(rows, decay, floor)) want[s.id] = s.score;
      std::vector<int64_t> ids = Ids(out);
      std::vector<std::optional<double>> got = Cells(out, "score");
      REQUIRE(ids.size() == rows.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::optional<double>& w = want.at(ids[i]);
        REQUIRE(got[i].has_value() == w.has_value());
        if (w) CHECK(*got[i] == doctest::Approx(*w).epsilon(1e-12));
        if (i == 0) continue;
        // Descending, nulls last, ties in input order (ids are input positions).
        if (got[i] && got[i - 1]) {
          CHECK(*got[i - 1] >= *got[i]);
          if (*got[i - 1] == *got[i]) CHECK(ids[i - 1] < ids[i]);
        } else {
          CHECK((got[i - 1].has_value() || !got[i].has_value()));
          if (!got[i - 1]) CHECK(ids[i - 1] < ids[i]);
        }
      }
    }
  }

  TEST_CASE("diversify: the discount by hand, and negative scores rise toward 0") {
    // Keys a a a b, scores 8 8 -8 4: k = 0, 1, 2, 0; discount 1, 0.625, 0.4375, 1.
    std::mt19937 rng(1);
    std::vector<Row> rows = {
        {1, int64_t{1}, 8.0}, {2, int64_t{1}, 8.0}, {3, int64_t{1}, -8.0}, {4, int64_t{2}, 4.0}};
    RowSet out = OpCall("diversify", {{"key", std::string("k")}, {"score", std::string("score")}})
                     .Run(Build(rows, false, rng));
    CHECK(Ids(out) == std::vector<int64_t>{1, 2, 4, 3});
    CHECK(Cells(out, "score") == std::vector<std::optional<double>>{8.0, 5.0, 4.0, -3.5});
  }

  TEST_CASE("diversify with a take after it orders only the rows the take reads") {
    std::mt19937 rng(5);
    std::vector<Row> rows = RandomRows(rng, 300, Keys::kFew, false, 0.2, 0.1, true);
    RowSet in = Build(rows, false, rng);
    std::initializer_list<std::pair<std::string, Value>> args = {
        {"key", std::string("k")}, {"score", std::string("score")}, {"decay", 0.5}};
    std::vector<int64_t> full = Ids(OpCall("diversify", args).Run(in));
    OpCall part("diversify", args);
    part.node.rows_read = 20;
    std::vector<int64_t> first = Ids(part.Run(in));
    REQUIRE(first.size() == full.size());
    CHECK(std::vector<int64_t>(first.begin(), first.begin() + 20) ==
          std::vector<int64_t>(full.begin(), full.begin() + 20));
  }

  TEST_CASE("cap equals the reference over random inputs, defer on and off, window 1") {
    std::mt19937 rng(11);
    const int maxes[] = {1, 1, 2, 3, 10000}, windows[] = {1, 2, 3, 5, 10, 64, 10000};
    for (int round = 0; round < 600; ++round) {
      Case c = RandomCase(rng, round);
      int max = maxes[round % 5], window = windows[(round / 5) % 7];
      bool defer = (round / 35) % 2 == 1;
      std::vector<Row> rows =
          RandomRows(rng, c.n, c.keys, c.str_keys, c.null_keys, c.null_scores, c.tied);
      RowSet in = Build(rows, c.str_keys, rng);
      RowSet out = OpCall("cap", {{"key", std::string("k")},
                                  {"max", int64_t{max}},
                                  {"window", int64_t{window}},
                                  {"defer", defer}})
                       .Run(in);
      INFO("round ", round, " n ", c.n, " max ", max, " window ", window, " defer ", defer);
      CHECK(Ids(out) == RefCap(rows, max, window, defer));
      CHECK(out.column("k") == in.column("k"));  // only the selection changes
      if (window == 1 || max == 10000) CHECK(Ids(out) == Ids(in));
    }
  }

  TEST_CASE("cap by hand: one key, max 1 of 3, defer") {
    std::mt19937 rng(2);
    // a a b a null a a, at most 1 a in the last 2 kept rows: 2 follows a(1); 4 follows
    // a(1) b(3); 6 follows b(3) null(5) and stays; 7 follows null(5) a(6).
    std::vector<Row> rows = {{1, "a", 1.0},   {2, "a", 1.0}, {3, "b", 1.0}, {4, "a", 1.0},
                             {5, Key{}, 1.0}, {6, "a", 1.0}, {7, "a", 1.0}};
    RowSet in = Build(rows, true, rng);
    auto run = [&](bool defer) {
      return Ids(OpCall("cap", {{"key", std::string("k")},
                                {"max", int64_t{1}},
                                {"window", int64_t{3}},
                                {"defer", defer}})
                     .Run(in));
    };
    CHECK(run(false) == std::vector<int64_t>{1, 3, 5, 6});
    CHECK(run(true) == std::vector<int64_t>{1, 3, 5, 6, 2, 4, 7});
  }

  TEST_CASE("{\"param\"} references: resolved per request, checked against the bounds") {
    auto plan = LoadPlanText(
        R"({"schema_version": 1, "name": "p",
            "params": {"d": {"type": "f64", "default": 0.5}, "f": {"type": "f64", "default": 0},
                       "m": {"type": "i64", "default": 1}, "w": {"type": "i64", "default": 2}},
            "nodes": [{"node_id": "src", "op": "fixed_source", "params": {"count": 4}},
                      {"node_id": "k", "op": "vm", "inputs": ["src"], "params": {"out_key": "k", "expr": "one"}},
                      {"node_id": "div", "op": "diversify", "inputs": ["k"],
                       "params": {"key": "k", "score": "score", "decay": {"param": "d"}, "floor": {"param": "f"}}},
                      {"node_id": "cap", "op": "cap", "inputs": ["div"],
                       "params": {"key": "k", "max": {"param": "m"}, "window": {"param": "w"}}}],
            "expr_table": {"one": {"const": 1}},
            "output": {"node": "cap"}})",
        "p.plan.json", TaskRegistry::WithTestOps());
    REQUIRE_MESSAGE(plan.has_value(), plan.error().message);
    const PlanNode& div = (*plan)->nodes[2];
    const PlanNode& cap = (*plan)->nodes[3];
    CHECK(div.refs.size() == 2);
    CHECK(cap.refs.size() == 2);
    // scores 1 2 3 4 of one key; decay 0.25, floor 0: 1, 0.5, 0.1875, 0.0625.
    auto values = BindParams(**plan, {{"d", 0.25}, {"m", int64_t{1}}, {"w", int64_t{1}}});
    REQUIRE(values.has_value());
    auto div_args = ResolveArgs(**plan, div, *values);
    REQUIRE(div_args.has_value());
    CHECK(div_args->F64("decay") == 0.25);
    RowSet in;
    in.SetColumn("id", Share(Column::I64(std::vector<int64_t>{1, 2, 3, 4})));
    in.SetColumn("score", Share(Column::F64(std::vector<double>{1, 2, 3, 4})));
    in.SetColumn("k", Share(Column::I64(std::vector<int64_t>{1, 1, 1, 1})));
    TaskContext ctx;
    ctx.node = &div;
    ctx.args = &*div_args;
    ctx.params = &*values;
    auto out = SpecOf(div).run_cpu(ctx, {in});
    REQUIRE(out.has_value());
    CHECK(Ids(*out) == std::vector<int64_t>{1, 2, 3, 4});
    CHECK(Cells(*out, "score") == std::vector<std::optional<double>>{1, 0.5, 0.1875, 0.0625});
    // window 1 keeps everything; window 2 with max 1 keeps no two neighbours of one key.
    for (int64_t w : {1, 2}) {
      auto v = BindParams(**plan, {{"m", int64_t{1}}, {"w", w}});
      REQUIRE(v.has_value());
      auto cap_args = ResolveArgs(**plan, cap, *v);
      REQUIRE(cap_args.has_value());
      ctx.node = &cap;
      ctx.args = &*cap_args;
      auto capped = SpecOf(cap).run_cpu(ctx, {in});
      REQUIRE(capped.has_value());
      CHECK(Ids(*capped) == (w == 1 ? std::vector<int64_t>{1, 2, 3, 4} : std::vector<int64_t>{1}));
    }
    // Out of the op's bounds at request time: invalid_param naming the node and param.
    auto big = BindParams(**plan, {{"d", 1.5}});
    REQUIRE(big.has_value());
    auto bad = ResolveArgs(**plan, div, *big);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().code == ErrorCode::kInvalidParam);
    CHECK(bad.error().message.find("1.5 is out of bounds 0..1 for node 'div' param 'decay'") !=
          std::string::npos);
    auto zero = BindParams(**plan, {{"w", int64_t{0}}});
    REQUIRE(zero.has_value());
    auto bad_w = ResolveArgs(**plan, cap, *zero);
    REQUIRE_FALSE(bad_w.has_value());
    CHECK(bad_w.error().message.find("0 is out of bounds 1..10000 for node 'cap' param 'window'") !=
          std::string::npos);
  }

  TEST_CASE("cancelled runs return the cancelled error") {
    std::mt19937 rng(3);
    RowSet in = Build(RandomRows(rng, 50, Keys::kFew, false, 0, 0, false), false, rng);
    CancelToken cancel;
    cancel.Cancel();
    OpCall diversify("diversify", {{"key", std::string("k")}, {"score", std::string("score")}});
    OpCall cap("cap", {{"key", std::string("k")}, {"max", int64_t{1}}, {"window", int64_t{2}}});
    for (OpCall* call : {&diversify, &cap}) {
      call->ctx.cancel = &cancel;
      auto r = call->spec->run_cpu(call->ctx, {in});
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().code == ErrorCode::kUnavailable);
    }
  }
}

}  // namespace feed_ops_test
