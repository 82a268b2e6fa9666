// Expressions (docs/plan.md, "Expressions"): types fixed at load, null propagation,
// i64 overflow and f64 domain errors as null, strings, coalesce, if, selections.
#include <cmath>
#include <cstdio>
#include <limits>

#include "expr_test_util.h"

namespace rankd::test {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

ExprFixture Numbers() {
  ExprFixture fx;
  fx.rows.SetColumn("id", I64Col({1, 2, 3, 4}));
  fx.rows.SetColumn("likes", I64Col({10, std::nullopt, 0, -5}));
  fx.rows.SetColumn("quality", F64Col({0.5, 0.25, std::nullopt, 2.0}));
  fx.rows.SetColumn("country", StrCol({"US", "FR", std::nullopt, "DE"}));
  fx.rows.SetColumn("nsfw", BoolCol({false, true, std::nullopt, false}));
  return fx;
}

TEST_CASE("expr: types are fixed at load") {
  ExprFixture fx = Numbers();
  auto type = [&](const std::string& json) {
    auto e = fx.Compile(json);
    REQUIRE_MESSAGE(e.has_value(), (e ? "" : e.error().message));
    return (*e)->type();
  };
  CHECK(type(R"({"const": 1})") == ColumnType::kI64);
  CHECK(type(R"({"const": 1.0})") == ColumnType::kF64);
  CHECK(type(R"({"const": "x"})") == ColumnType::kStr);
  CHECK(type(R"({"const": true})") == ColumnType::kBool);
  CHECK(type(R"({"const": null})") == ColumnType::kI64);
  CHECK(type(R"({"key": "likes"})") == ColumnType::kI64);
  CHECK(type(R"({"op": "+", "args": [{"key": "likes"}, {"const": 1}]})") == ColumnType::kI64);
  CHECK(type(R"({"op": "+", "args": [{"key": "likes"}, {"const": 0.5}]})") == ColumnType::kF64);
  CHECK(type(R"({"op": "+", "args": [{"key": "likes"}, {"const": null}]})") == ColumnType::kI64);
  CHECK(type(R"({"op": "/", "args": [{"key": "likes"}, {"const": 2}]})") == ColumnType::kF64);
  CHECK(type(R"({"op": "sqrt", "args": [{"key": "likes"}]})") == ColumnType::kF64);
  CHECK(type(R"({"op": "neg", "args": [{"key": "likes"}]})") == ColumnType::kI64);
  CHECK(type(R"({"op": "max", "args": [{"key": "likes"}, {"key": "quality"}]})") ==
        ColumnType::kF64);
  CHECK(type(R"({"op": "coalesce", "args": [{"key": "country"}, {"const": "ZZ"}]})") ==
        ColumnType::kStr);
  CHECK(type(R"({"op": "coalesce", "args": [{"key": "nsfw"}, {"const": false}]})") ==
        ColumnType::kBool);
  CHECK(type(R"({"op": "coalesce", "args": [{"const": null}, {"key": "quality"}]})") ==
        ColumnType::kF64);
}

TEST_CASE("expr: a key and a const read back per row") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"key": "likes"})") == std::vector{I(10), kNull, I(0), I(-5)});
  CHECK(fx.Eval(R"({"key": "country"})") == std::vector{S("US"), S("FR"), kNull, S("DE")});
  CHECK(fx.Eval(R"({"key": "nsfw"})") == std::vector{B(false), B(true), kNull, B(false)});
  CHECK(fx.Eval(R"({"const": 7})") == std::vector{I(7), I(7), I(7), I(7)});
  CHECK(fx.Eval(R"({"const": "a"})") == std::vector{S("a"), S("a"), S("a"), S("a")});
  CHECK(fx.Eval(R"({"const": null})") == std::vector{kNull, kNull, kNull, kNull});
}

TEST_CASE("expr: runs after a large one on the same thread (reused frame) are exact") {
  // The thread's frame keeps its buffers between runs: a small run after a large one,
  // and a run of another shape in between, must see none of the earlier values.
  ExprFixture big;
  Cells<int64_t> many;
  for (int64_t i = 0; i < 100000; ++i) many.push_back(i % 7 == 0 ? std::nullopt : std::optional(i));
  big.rows.SetColumn("likes", I64Col(many));
  auto wide = big.Eval(R"({"op": "*", "args": [{"key": "likes"}, {"const": 2}]})");
  REQUIRE(wide.size() == 100000);
  CHECK(wide[3] == I(6));
  CHECK(wide[7] == kNull);
  ExprFixture fx = Numbers();
  for (int round = 0; round < 3; ++round) {
    CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "likes"}, {"const": 1}]})") ==
          std::vector{I(11), kNull, I(1), I(-4)});
    CHECK(fx.Eval(R"({"key": "country"})") == std::vector{S("US"), S("FR"), kNull, S("DE")});
  }
}

TEST_CASE("expr: a null operand gives null") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "likes"}, {"const": 1}]})") ==
        std::vector{I(11), kNull, I(1), I(-4)});
  CHECK(fx.Eval(R"({"op": "*", "args": [{"key": "likes"}, {"key": "quality"}]})") ==
        std::vector{F(5.0), kNull, kNull, F(-10.0)});
  CHECK(fx.Eval(R"({"op": "min", "args": [{"key": "likes"}, {"const": 3}]})") ==
        std::vector{I(3), kNull, I(0), I(-5)});
  CHECK(fx.Eval(R"({"op": "-", "args": [{"const": 1}, {"const": null}]})") ==
        std::vector{kNull, kNull, kNull, kNull});
}

TEST_CASE("expr: an unknown column is null") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"key": "nope"})") == std::vector{kNull, kNull, kNull, kNull});
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "nope"}, {"const": 1}]})") ==
        std::vector{kNull, kNull, kNull, kNull});
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "nope"}, {"const": 1}]})") ==
        std::vector{I(1), I(1), I(1), I(1)});
}

TEST_CASE("expr: a column typed at load but absent at run time is null") {
  ExprFixture fx = Numbers();
  fx.extra.cols.emplace_back("score", ColumnType::kF64);
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "score"}, {"const": 1}]})") ==
        std::vector{kNull, kNull, kNull, kNull});
}

TEST_CASE("expr: i64 arithmetic is left to right and overflow gives null") {
  ExprFixture fx;
  fx.rows.SetColumn("x", I64Col({kMax, kMin, 3, -2}));
  CHECK(fx.Eval(R"({"op": "-", "args": [{"const": 10}, {"const": 3}, {"const": 2}]})") ==
        std::vector{I(5), I(5), I(5), I(5)});
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "x"}, {"const": 1}]})") ==
        std::vector{kNull, I(kMin + 1), I(4), I(-1)});
  CHECK(fx.Eval(R"({"op": "-", "args": [{"key": "x"}, {"const": 1}]})") ==
        std::vector{I(kMax - 1), kNull, I(2), I(-3)});
  CHECK(fx.Eval(R"({"op": "*", "args": [{"key": "x"}, {"const": 2}]})") ==
        std::vector{kNull, kNull, I(6), I(-4)});
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "x"}, {"key": "x"}]})") ==
        std::vector{kNull, kNull, I(6), I(-4)});
  CHECK(fx.Eval(R"({"op": "-", "args": [{"const": -2}, {"key": "x"}]})") ==
        std::vector{kNull, I(kMax - 1), I(-5), I(0)});
  CHECK(fx.Eval(R"({"op": "-", "args": [{"const": -1}, {"key": "x"}]})") ==
        std::vector{I(kMin), I(kMax), I(-4), I(1)});
  CHECK(fx.Eval(R"({"op": "neg", "args": [{"key": "x"}]})") ==
        std::vector{I(-kMax), kNull, I(-3), I(2)});
  CHECK(fx.Eval(R"({"op": "abs", "args": [{"key": "x"}]})") ==
        std::vector{I(kMax), kNull, I(3), I(2)});
  // With an f64 operand every operand is converted first: no i64 overflow.
  auto v = fx.Eval(R"({"op": "+", "args": [{"key": "x"}, {"const": 1}, {"const": 0.5}]})");
  CHECK(v[0] == F(double(kMax) + 1.5));
  CHECK(v[2] == F(4.5));
}

TEST_CASE("expr: division and math functions give null outside their domain") {
  ExprFixture fx;
  fx.rows.SetColumn("x", I64Col({4, 0, -1, 1}));
  CHECK(fx.Eval(R"({"op": "/", "args": [{"const": 2}, {"key": "x"}]})") ==
        std::vector{F(0.5), kNull, F(-2.0), F(2.0)});
  CHECK(fx.Eval(R"({"op": "/", "args": [{"key": "x"}, {"const": 0}]})") ==
        std::vector{kNull, kNull, kNull, kNull});
  CHECK(fx.Eval(R"({"op": "log", "args": [{"key": "x"}]})") ==
        std::vector{F(std::log(4.0)), kNull, kNull, F(0.0)});
  CHECK(fx.Eval(R"({"op": "log1p", "args": [{"key": "x"}]})") ==
        std::vector{F(std::log1p(4.0)), F(0.0), kNull, F(std::log1p(1.0))});
  CHECK(fx.Eval(R"({"op": "sqrt", "args": [{"key": "x"}]})") ==
        std::vector{F(2.0), F(0.0), kNull, F(1.0)});
  CHECK(
      fx.Eval(R"({"op": "exp", "args": [{"op": "*", "args": [{"key": "x"}, {"const": 1000}]}]})") ==
      std::vector{kNull, F(1.0), F(0.0), kNull});
  CHECK(fx.Eval(R"({"op": "pow", "args": [{"key": "x"}, {"const": 0.5}]})") ==
        std::vector{F(2.0), F(0.0), kNull, F(1.0)});
  CHECK(fx.Eval(R"({"op": "pow", "args": [{"key": "x"}, {"const": -1}]})") ==
        std::vector{F(0.25), kNull, F(-1.0), F(1.0)});
}

TEST_CASE("expr: i64 and f64 mix as f64") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "likes"}, {"key": "quality"}]})") ==
        std::vector{F(10.5), kNull, kNull, F(-3.0)});
  CHECK(fx.Eval(R"({"op": "max", "args": [{"key": "likes"}, {"const": 1.5}]})") ==
        std::vector{F(10.0), kNull, F(1.5), F(1.5)});
  // bool is 0/1 in arithmetic.
  CHECK(fx.Eval(R"({"op": "+", "args": [{"key": "nsfw"}, {"const": 1}]})") ==
        std::vector{I(1), I(2), kNull, I(1)});
}

TEST_CASE("expr: coalesce takes the first non-null argument") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "quality"}, {"const": 0}]})") ==
        std::vector{F(0.5), F(0.25), F(0.0), F(2.0)});
  CHECK(
      fx.Eval(
          R"({"op": "coalesce", "args": [{"key": "likes"}, {"key": "quality"}, {"const": 7}]})") ==
      std::vector{F(10.0), F(0.25), F(0.0), F(-5.0)});
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "likes"}, {"const": null}]})") ==
        std::vector{I(10), kNull, I(0), I(-5)});
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "country"}, {"const": "ZZ"}]})") ==
        std::vector{S("US"), S("FR"), S("ZZ"), S("DE")});
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "country"}, {"const": "US"}]})") ==
        std::vector{S("US"), S("FR"), S("US"), S("DE")});
}

TEST_CASE("expr: coalesce of two string columns merges their dictionaries") {
  ExprFixture fx;
  fx.rows.SetColumn("a", StrCol({"x", std::nullopt, std::nullopt, "y"}));
  fx.rows.SetColumn("b", StrCol({"q", "y", std::nullopt, "z"}));
  CHECK(fx.Eval(R"({"op": "coalesce", "args": [{"key": "a"}, {"key": "b"}]})") ==
        std::vector{S("x"), S("y"), kNull, S("y")});
  CHECK(fx.Eval(R"({"op": "max", "args": [{"key": "a"}, {"key": "b"}]})") ==
        std::vector{S("x"), kNull, kNull, S("z")});
}

TEST_CASE("expr: if picks then or else by its predicate") {
  ExprFixture fx = Numbers();
  const char* json = R"({"op": "if", "args": [
      {"op": "cmp", "cmp": ">", "lhs": {"key": "likes"}, "rhs": {"const": 0}},
      {"key": "likes"}, {"const": 0.5}]})";
  // A null operand makes the predicate false: else.
  CHECK(fx.Eval(json) == std::vector{F(10.0), F(0.5), F(0.5), F(0.5)});
  CHECK(fx.Eval(R"({"op": "if", "args": [{"op": "is_null", "arg": {"key": "country"}},
      {"const": "none"}, {"key": "country"}]})") ==
        std::vector{S("US"), S("FR"), S("none"), S("DE")});
  CHECK(fx.Eval(R"({"op": "if", "args": [{"op": "is_null", "arg": {"key": "likes"}},
      {"const": null}, {"const": 1}]})") == std::vector{I(1), kNull, I(1), I(1)});
}

TEST_CASE("expr: string min and max are bytewise") {
  ExprFixture fx = Numbers();
  CHECK(fx.Eval(R"({"op": "min", "args": [{"key": "country"}, {"const": "E"}]})") ==
        std::vector{S("E"), S("E"), kNull, S("DE")});
  CHECK(fx.Eval(R"({"op": "max", "args": [{"key": "country"}, {"const": "E"}]})") ==
        std::vector{S("US"), S("FR"), kNull, S("E")});
}

TEST_CASE("expr: params are read per request") {
  ExprFixture fx = Numbers();
  fx.Param("w", ColumnType::kF64, F(2.0));
  fx.Param("bump", ColumnType::kI64, I(1));
  const char* json = R"({"op": "+", "args": [
      {"op": "*", "args": [{"key": "likes"}, {"param": "w"}]}, {"param": "bump"}]})";
  CHECK(fx.Eval(json) == std::vector{F(21.0), kNull, F(1.0), F(-9.0)});
  fx.values[0] = F(0.5);
  CHECK(fx.Eval(json) == std::vector{F(6.0), kNull, F(1.0), F(-1.5)});
  fx.values[1] = kNull;
  CHECK(fx.Eval(json) == std::vector{kNull, kNull, kNull, kNull});
}

TEST_CASE("expr: rows outside the selection are null") {
  ExprFixture fx = Numbers();
  RowSet sel = fx.rows.WithSelection({3, 0});
  CHECK(fx.EvalOn(R"({"op": "+", "args": [{"key": "likes"}, {"const": 1}]})", sel) ==
        std::vector{I(11), kNull, kNull, I(-4)});
  CHECK(fx.EvalOn(R"({"const": 2.5})", sel) == std::vector{F(2.5), kNull, kNull, F(2.5)});
  CHECK(fx.EvalOn(R"({"key": "country"})", sel) == std::vector{S("US"), kNull, kNull, S("DE")});
  RowSet none = fx.rows.WithSelection({});
  CHECK(fx.EvalOn(R"({"key": "likes"})", none) == std::vector{kNull, kNull, kNull, kNull});
}

TEST_CASE("expr: many rows take the vector paths") {
  // Enough rows for the vectorised loops' main bodies and tails.
  ExprFixture fx;
  Cells<int64_t> likes;
  Cells<double> q;
  for (int i = 0; i < 1003; ++i) {
    likes.push_back(i % 7 == 0 ? std::nullopt : std::optional<int64_t>(i));
    q.push_back(i % 5 == 0 ? std::nullopt : std::optional<double>(i * 0.5));
  }
  fx.rows.SetColumn("likes", I64Col(likes));
  fx.rows.SetColumn("q", F64Col(q));
  auto v = fx.Eval(R"({"op": "-", "args": [
      {"op": "*", "args": [{"op": "log1p", "args": [{"key": "likes"}]}, {"const": 2}]},
      {"op": "coalesce", "args": [{"key": "q"}, {"const": 0}]}]})");
  for (int i = 0; i < 1003; ++i) {
    Value want = kNull;
    if (likes[i]) want = F(std::log1p(double(*likes[i])) * 2 - (q[i] ? *q[i] : 0.0));
    CHECK(v[i] == want);
  }
}

// i64 -> f64 (computed without the scalar conversion, expr_kernels.h I64ToF64) rounds as
// static_cast does, at the extremes, around 2^53 and on random 64-bit values, across
// blocks and with nulls.
TEST_CASE("expr: i64 to f64 on many rows rounds as C++ does") {
  std::vector<int64_t> special = {0,
                                  1,
                                  -1,
                                  kMax,
                                  kMin,
                                  kMax - 1,
                                  kMin + 1,
                                  (int64_t{1} << 53) + 1,
                                  (int64_t{1} << 53) + 3,
                                  -(int64_t{1} << 53) - 1,
                                  (int64_t{1} << 54) + 2,
                                  (int64_t{1} << 54) + 6,
                                  kMax - 1024,
                                  kMax - 512,
                                  (int64_t{1} << 32) - 1,
                                  -(int64_t{1} << 32)};
  Cells<int64_t> v;
  uint64_t r = 7;
  for (size_t i = 0; i < 9001; ++i) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    if (i % 9 == 4)
      v.push_back(std::nullopt);
    else if (i % 3 == 0)
      v.push_back(special[(r >> 40) % special.size()]);
    else
      v.push_back(static_cast<int64_t>(r >> ((r >> 58) % 40)) * (r & 1 ? 1 : -1));
  }
  ExprFixture fx;
  fx.rows.SetColumn("v", I64Col(v));
  auto got = fx.Eval(R"({"op": "*", "args": [{"key": "v"}, {"const": 1.0}]})");
  for (size_t i = 0; i < v.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == (v[i] ? F(static_cast<double>(*v[i])) : kNull));
  }
}

// Intermediate f64 results read only by + - * neg abs skip their own finiteness test
// (Instr::unchecked); the values and nulls are those of testing every step: a step's
// inf or NaN is null whatever reads it, through chains and into min, coalesce and cmp.
TEST_CASE("expr: non-finite intermediate results are null wherever they are read") {
  using O = std::optional<double>;
  const std::vector<O> xs = {1.0, 0.0, -1.0, std::nullopt, 1e308, 2.0, -0.0, 0.5};
  ExprFixture fx;
  Cells<double> cells(xs.begin(), xs.end());
  fx.rows.SetColumn("x", F64Col(cells));
  // The reference: every step nulls a non-finite result.
  auto fin = [](O v) { return v && std::isfinite(*v) ? v : O{}; };
  auto un = [&](O a, double (*f)(double)) { return a ? fin(f(*a)) : O{}; };
  auto bin = [&](O a, O b, auto f) { return a && b ? fin(f(*a, *b)) : O{}; };
  auto add = [](double a, double b) { return a + b; };
  auto mul = [](double a, double b) { return a * b; };
  auto sub = [](double a, double b) { return a - b; };
  auto dv = [](double a, double b) { return a / b; };
  auto mn = [](double a, double b) { return a < b ? a : b; };
  auto neg = [](double a) { return -a; };
  auto check = [&](const std::string& json, auto ref) {
    CAPTURE(json);
    auto got = fx.Eval(json);
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(i);
      O want = ref(xs[i]);
      CHECK(got[i] == (want ? F(*want) : kNull));
    }
  };
  const std::string x = R"({"key": "x"})";
  auto op = [](const std::string& name, std::vector<std::string> args) {
    std::string j = R"({"op": ")" + name + R"(", "args": [)";
    for (size_t i = 0; i < args.size(); ++i) j += (i ? ", " : "") + args[i];
    return j + "]}";
  };
  auto c = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, R"({"const": %.17g})", v);
    return std::string(buf);
  };
  // log -> * -> + -> -: only the last step tests.
  check(op("-", {op("+", {op("*", {op("log", {x}), c(2)}), c(1)}), c(3)}), [&](O v) {
    return bin(bin(bin(un(v, [](double d) { return std::log(d); }), 2.0, mul), 1.0, add), 3.0, sub);
  });
  // x / 0 + 1 is null, so coalesce takes 7.
  check(op("coalesce", {op("+", {op("/", {x, c(0)}), c(1)}), c(7)}), [&](O v) {
    O r = bin(bin(v, 0.0, dv), 1.0, add);
    return r ? r : O{7.0};
  });
  // inf * 0 is NaN: null, not 0; an overflowing product read by min is null, not 5.
  check(op("*", {op("*", {x, c(1e308)}), c(0)}),
        [&](O v) { return bin(bin(v, 1e308, mul), 0.0, mul); });
  check(op("min", {op("*", {x, c(1e308)}), c(5)}),
        [&](O v) { return bin(bin(v, 1e308, mul), 5.0, mn); });
  // -(exp(x * 1000)) and |log(x)| + 1 through unary steps.
  check(op("neg", {op("exp", {op("*", {x, c(1000)})})}), [&](O v) {
    return un(un(bin(v, 1000.0, mul), [](double d) { return std::exp(d); }), +neg);
  });
  check(op("+", {op("abs", {op("log", {x})}), c(1)}), [&](O v) {
    return bin(
        un(un(v, [](double d) { return std::log(d); }), [](double d) { return std::fabs(d); }), 1.0,
        add);
  });
  // A compare reads a checked value: x / 0 * 1 > 0 holds for no row.
  CHECK(fx.Select(R"({"op": "cmp", "cmp": ">", "lhs": )" + op("*", {op("/", {x, c(0)}), c(1)}) +
                  R"(, "rhs": {"const": 0}})")
            .empty());
}

}  // namespace
}  // namespace rankd::test
