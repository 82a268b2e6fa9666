// Predicates (docs/plan.md, "Predicates"): cmp over numbers and strings, and/or/not, in,
// is_null, regex; Select returns physical rows in logical order.
#include <algorithm>
#include <cmath>
#include <limits>

#include "expr_test_util.h"

namespace rankd::test {
namespace {

using Rows = Selection;

ExprFixture Items() {
  ExprFixture fx;
  fx.rows.SetColumn("id", I64Col({1, 2, 3, 4, 5}));
  fx.rows.SetColumn("likes", I64Col({10, std::nullopt, 0, -5, 3}));
  fx.rows.SetColumn("score", F64Col({0.5, 0.25, std::nullopt, 2.0, 3.0}));
  fx.rows.SetColumn("country", StrCol({"US", "FR", std::nullopt, "DE", "US"}));
  fx.rows.SetColumn("other", StrCol({"US", "AT", "FR", std::nullopt, "ZZ"}));
  fx.rows.SetColumn("nsfw", BoolCol({false, true, std::nullopt, false, true}));
  return fx;
}

std::string Cmp(const char* op, const char* lhs, const char* rhs) {
  return std::string(R"({"op": "cmp", "cmp": ")") + op + R"(", "lhs": )" + lhs + R"(, "rhs": )" +
         rhs + "}";
}

TEST_CASE("pred: numbers compare numerically, nulls are false") {
  ExprFixture fx = Items();
  CHECK(fx.Select(Cmp("==", R"({"key": "likes"})", R"({"const": 0})")) == Rows{2});
  CHECK(fx.Select(Cmp("!=", R"({"key": "likes"})", R"({"const": 0})")) == Rows{0, 3, 4});
  CHECK(fx.Select(Cmp("<", R"({"key": "likes"})", R"({"const": 3})")) == Rows{2, 3});
  CHECK(fx.Select(Cmp("<=", R"({"key": "likes"})", R"({"const": 3})")) == Rows{2, 3, 4});
  CHECK(fx.Select(Cmp(">", R"({"key": "likes"})", R"({"const": 3})")) == Rows{0});
  CHECK(fx.Select(Cmp(">=", R"({"key": "likes"})", R"({"const": 3})")) == Rows{0, 4});
  // i64 against f64, either side.
  CHECK(fx.Select(Cmp(">", R"({"key": "likes"})", R"({"const": 2.5})")) == Rows{0, 4});
  CHECK(fx.Select(Cmp("<", R"({"const": 2.5})", R"({"key": "likes"})")) == Rows{0, 4});
  CHECK(fx.Select(Cmp("<", R"({"key": "likes"})", R"({"key": "score"})")) == Rows{3});
  CHECK(fx.Select(Cmp("==", R"({"key": "likes"})", R"({"const": null})")).empty());
  CHECK(fx.Select(Cmp("!=", R"({"key": "nope"})", R"({"const": 1})")).empty());
  // bool compares as 0/1.
  CHECK(fx.Select(Cmp("==", R"({"key": "nsfw"})", R"({"const": 0})")) == Rows{0, 3});
  CHECK(fx.Select(Cmp("==", R"({"key": "nsfw"})", R"({"const": true})")) == Rows{1, 4});
}

TEST_CASE("pred: i64 against f64 is exact beyond 2^53") {
  ExprFixture fx;
  constexpr int64_t big = (int64_t{1} << 53) + 1;  // rounds to 2^53 as a double
  fx.rows.SetColumn("x", I64Col({big, big - 1, std::numeric_limits<int64_t>::max()}));
  CHECK(fx.Select(Cmp(">", R"({"key": "x"})", R"({"const": 9007199254740992.0})")) == Rows{0, 2});
  CHECK(fx.Select(Cmp("==", R"({"key": "x"})", R"({"const": 9007199254740992.0})")) == Rows{1});
  CHECK(fx.Select(Cmp("<", R"({"key": "x"})", R"({"const": 9223372036854775808.0})")) ==
        Rows{0, 1, 2});
}

TEST_CASE("pred: strings compare bytewise; a string against a number is false") {
  ExprFixture fx = Items();
  CHECK(fx.Select(Cmp("==", R"({"key": "country"})", R"({"const": "US"})")) == Rows{0, 4});
  CHECK(fx.Select(Cmp("!=", R"({"key": "country"})", R"({"const": "US"})")) == Rows{1, 3});
  CHECK(fx.Select(Cmp("==", R"({"key": "country"})", R"({"const": "XX"})")).empty());
  CHECK(fx.Select(Cmp("!=", R"({"key": "country"})", R"({"const": "XX"})")) == Rows{0, 1, 3, 4});
  CHECK(fx.Select(Cmp("<", R"({"key": "country"})", R"({"const": "FR"})")) == Rows{3});
  CHECK(fx.Select(Cmp(">=", R"({"key": "country"})", R"({"const": "FR"})")) == Rows{0, 1, 4});
  CHECK(fx.Select(Cmp(">", R"({"const": "FR"})", R"({"key": "country"})")) == Rows{3});
  CHECK(fx.Select(Cmp("==", R"({"key": "country"})", R"({"key": "other"})")) == Rows{0});
  CHECK(fx.Select(Cmp("<", R"({"key": "country"})", R"({"key": "other"})")) == Rows{4});
  CHECK(fx.Select(Cmp("==", R"({"key": "country"})", R"({"const": 1})")).empty());
  CHECK(fx.Select(Cmp("!=", R"({"key": "country"})", R"({"const": 1})")).empty());
  CHECK(fx.Select(Cmp("<", R"({"const": "a"})", R"({"const": "b"})")) == Rows{0, 1, 2, 3, 4});
  // Bytewise: bytes >= 0x80 sort after ASCII.
  ExprFixture u;
  u.rows.SetColumn("s", StrCol({"\xc3\xa9", "z"}));
  CHECK(u.Select(Cmp(">", R"({"key": "s"})", R"({"const": "z"})")) == Rows{0});
}

TEST_CASE("pred: and, or, not") {
  ExprFixture fx = Items();
  std::string a = Cmp(">=", R"({"key": "likes"})", R"({"const": 0})");       // 0, 2, 4
  std::string b = Cmp("==", R"({"key": "country"})", R"({"const": "US"})");  // 0, 4
  CHECK(fx.Select(R"({"op": "and", "args": [)" + a + "," + b + "]}") == Rows{0, 4});
  CHECK(fx.Select(R"({"op": "or", "args": [)" + a + "," + b + "]}") == Rows{0, 2, 4});
  CHECK(fx.Select(R"({"op": "not", "arg": )" + a + "}") == Rows{1, 3});
  CHECK(fx.Select(R"({"op": "and", "args": [)" + a + "]}") == Rows{0, 2, 4});
}

TEST_CASE("pred: in") {
  ExprFixture fx = Items();
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "likes"}, "values": [0, 3, "x", null, 3.5]})") ==
        Rows{2, 4});
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "likes"}, "values": [{"const": 10}, 3.0]})") ==
        Rows{0, 4});
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "score"}, "values": [2, 0.25]})") == Rows{1, 3});
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "country"}, "values": ["US", "DE", 1]})") ==
        Rows{0, 3, 4});
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "likes"}, "values": []})").empty());
  CHECK(fx.Select(R"({"op": "in", "lhs": {"key": "nope"}, "values": [1]})").empty());
  // A long list takes the binary-search path.
  std::string many = R"({"op": "in", "lhs": {"key": "likes"}, "values": [)";
  for (int i = 100; i < 120; ++i) many += std::to_string(i) + ",";
  many += "-5]}";
  CHECK(fx.Select(many) == Rows{3});
}

TEST_CASE("pred: is_null") {
  ExprFixture fx = Items();
  CHECK(fx.Select(R"({"op": "is_null", "arg": {"key": "likes"}})") == Rows{1});
  CHECK(fx.Select(R"({"op": "is_null", "arg": {"key": "country"}})") == Rows{2});
  CHECK(fx.Select(R"({"op": "is_null", "arg": {"key": "nope"}})") == Rows{0, 1, 2, 3, 4});
  CHECK(fx.Select(
            R"({"op": "is_null", "arg": {"op": "/", "args": [{"const": 1}, {"key": "likes"}]}})") ==
        Rows{1, 2});
}

TEST_CASE("pred: regex matches anywhere, null is false") {
  ExprFixture fx = Items();
  CHECK(fx.Select(R"({"op": "regex", "lhs": {"key": "country"}, "pattern": "S"})") == Rows{0, 4});
  CHECK(fx.Select(R"({"op": "regex", "lhs": {"key": "country"}, "pattern": "^(US|DE)$"})") ==
        Rows{0, 3, 4});
  CHECK(fx.Select(R"({"op": "regex", "lhs": {"key": "country"}, "pattern": ""})") ==
        Rows{0, 1, 3, 4});
  CHECK(fx.Select(R"({"op": "regex", "lhs": {"key": "nope"}, "pattern": "x"})").empty());
}

TEST_CASE("pred: Select returns physical rows in logical order") {
  ExprFixture fx = Items();
  RowSet sel = fx.rows.WithSelection({4, 2, 0, 3});
  CHECK(fx.SelectOn(Cmp(">=", R"({"key": "likes"})", R"({"const": 0})"), sel) == Rows{4, 2, 0});
  CHECK(fx.SelectOn(R"({"op": "regex", "lhs": {"key": "country"}, "pattern": "US"})", sel) ==
        Rows{4, 0});
  CHECK(fx.SelectOn(Cmp("==", R"({"const": 1})", R"({"const": 1})"), sel) == Rows{4, 2, 0, 3});
  CHECK(fx.SelectOn(Cmp("==", R"({"const": 1})", R"({"const": 2})"), sel).empty());
  CHECK(fx.SelectOn(Cmp("==", R"({"key": "likes"})", R"({"const": 10})"), fx.rows.WithSelection({}))
            .empty());
}

TEST_CASE("pred: params compare per request") {
  ExprFixture fx = Items();
  fx.Param("country", ColumnType::kStr, S("US"));
  fx.Param("min", ColumnType::kF64, F(1.0));
  std::string p = R"({"op": "and", "args": [)" +
                  Cmp("==", R"({"key": "country"})", R"({"param": "country"})") + "," +
                  Cmp(">=", R"({"key": "score"})", R"({"param": "min"})") + "]}";
  CHECK(fx.Select(p) == Rows{4});
  fx.values[0] = S("DE");
  CHECK(fx.Select(p) == Rows{3});
}

// The vector kernels against scalar C++ on many rows (several blocks, tails, nulls at
// every offset): i64 compares (computed in integer arithmetic) at the extremes and across
// overflow of a - b, f64 compares with NaN, infinities and signed zeros, each against a
// column and a constant.
TEST_CASE("pred: numeric compares on many rows agree with C++") {
  const int64_t ints[] = {0,
                          1,
                          -1,
                          2,
                          std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max() - 1,
                          std::numeric_limits<int64_t>::min() + 1,
                          int64_t{1} << 62,
                          -(int64_t{1} << 62)};
  const double inf = std::numeric_limits<double>::infinity();
  const double doubles[] = {0.0, -0.0, 1.0, -1.0, inf, -inf, std::nan(""), 0.5, 1e300, -1e-300};
  const size_t n = 9001;
  Cells<int64_t> a, b;
  Cells<double> x, y;
  uint64_t r = 99;
  auto next = [&] { return r = r * 6364136223846793005ull + 1442695040888963407ull, r >> 33; };
  for (size_t i = 0; i < n; ++i) {
    a.push_back(next() % 11 == 0 ? std::nullopt : std::optional<int64_t>(ints[next() % 10]));
    b.push_back(next() % 13 == 0 ? std::nullopt : std::optional<int64_t>(ints[next() % 10]));
    x.push_back(next() % 7 == 0 ? std::nullopt : std::optional<double>(doubles[next() % 10]));
    y.push_back(next() % 5 == 0 ? std::nullopt : std::optional<double>(doubles[next() % 10]));
  }
  ExprFixture fx;
  fx.rows.SetColumn("a", I64Col(a));
  fx.rows.SetColumn("b", I64Col(b));
  fx.rows.SetColumn("x", F64Col(x));
  fx.rows.SetColumn("y", F64Col(y));
  auto holds = [](const std::string& op, auto l, auto r) {
    if (op == "==") return l == r;
    if (op == "!=") return l != r;
    if (op == "<") return l < r;
    if (op == "<=") return l <= r;
    if (op == ">") return l > r;
    return l >= r;
  };
  for (std::string op : {"==", "!=", "<", "<=", ">", ">="}) {
    CAPTURE(op);
    Rows want_ab, want_a1, want_xy, want_x0;
    for (uint32_t i = 0; i < n; ++i) {
      if (a[i] && b[i] && holds(op, *a[i], *b[i])) want_ab.push_back(i);
      if (a[i] && holds(op, *a[i], int64_t{-1})) want_a1.push_back(i);
      if (x[i] && y[i] && holds(op, *x[i], *y[i])) want_xy.push_back(i);
      if (x[i] && holds(op, *x[i], 0.0)) want_x0.push_back(i);
    }
    CHECK(fx.Select(Cmp(op.c_str(), R"({"key": "a"})", R"({"key": "b"})")) == want_ab);
    CHECK(fx.Select(Cmp(op.c_str(), R"({"key": "a"})", R"({"const": -1})")) == want_a1);
    CHECK(fx.Select(Cmp(op.c_str(), R"({"key": "x"})", R"({"key": "y"})")) == want_xy);
    CHECK(fx.Select(Cmp(op.c_str(), R"({"key": "x"})", R"({"const": -0.0})")) == want_x0);
    // Through a selection (rows in reverse, some left out): the kept rows in its order.
    Rows sel, want_sel;
    for (uint32_t i = n; i-- > 0;)
      if (i % 3 != 1) sel.push_back(i);
    for (uint32_t i : sel)
      if (std::binary_search(want_ab.begin(), want_ab.end(), i)) want_sel.push_back(i);
    CHECK(fx.SelectOn(Cmp(op.c_str(), R"({"key": "a"})", R"({"key": "b"})"),
                      fx.rows.WithSelection(sel)) == want_sel);
  }
}

}  // namespace
}  // namespace rankd::test
