// Block-wise evaluation (expr_eval.cc runs kBlockRows logical rows at a time): random
// programs over random rows (nulls, selection vectors, strings with small and large
// dictionaries) give the same values whole as evaluated in pieces that cut the rows at
// other places; and a cancel check that says yes stops the run at its first poll.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "expr_test_util.h"
#include "plan/expr_program.h"

using namespace rankd;
using namespace rankd::test;

namespace {

// Random expression text of each kind. Depth-limited; every leaf kind and op appears.
struct Gen {
  std::mt19937_64 rng;
  size_t Pick(size_t n) { return rng() % n; }

  std::string Num(int depth) {
    static const char* leaves[] = {R"({"key": "a"})",    R"({"key": "x"})",   R"({"const": 3})",
                                   R"({"const": -1.5})", R"({"param": "w"})", R"({"key": "gone"})"};
    if (depth == 0 || Pick(4) == 0) return leaves[Pick(6)];
    static const char* bin[] = {"+", "-", "*", "/", "min", "max", "pow", "coalesce"};
    static const char* un[] = {"neg", "abs", "log1p", "sqrt", "exp"};
    switch (Pick(3)) {
      case 0:
        return std::string(R"({"op": ")") + bin[Pick(8)] + R"(", "args": [)" + Num(depth - 1) +
               ", " + Num(depth - 1) + "]}";
      case 1:
        return std::string(R"({"op": ")") + un[Pick(5)] + R"(", "args": [)" + Num(depth - 1) + "]}";
      default:
        return R"({"op": "if", "args": [)" + Pred(depth - 1) + ", " + Num(depth - 1) + ", " +
               Num(depth - 1) + "]}";
    }
  }
  std::string Str(int depth) {
    static const char* leaves[] = {R"({"key": "s"})", R"({"key": "u"})", R"({"const": "m7"})",
                                   R"({"param": "p"})"};
    if (depth == 0 || Pick(3) == 0) return leaves[Pick(4)];
    static const char* bin[] = {"min", "max", "coalesce"};
    if (Pick(3) == 0)
      return R"({"op": "if", "args": [)" + Pred(depth - 1) + ", " + Str(depth - 1) + ", " +
             Str(depth - 1) + "]}";
    return std::string(R"({"op": ")") + bin[Pick(3)] + R"(", "args": [)" + Str(depth - 1) + ", " +
           Str(depth - 1) + "]}";
  }
  std::string Pred(int depth) {
    static const char* cmps[] = {"==", "!=", "<", "<=", ">", ">="};
    std::string cmp = cmps[Pick(6)];
    switch (depth == 0 ? Pick(2) : Pick(8)) {
      case 0:
        return R"({"op": "cmp", "cmp": ")" + cmp + R"(", "lhs": )" + Num(depth) + R"(, "rhs": )" +
               Num(depth) + "}";
      case 1:
        return R"({"op": "cmp", "cmp": ")" + cmp + R"(", "lhs": )" + Str(depth) + R"(, "rhs": )" +
               Str(depth) + "}";
      case 2: return R"({"op": "in", "lhs": {"key": "s"}, "values": ["m1", "m2", "u5"]})";
      case 3: return R"({"op": "in", "lhs": )" + Num(depth - 1) + R"(, "values": [1, 2, 3.5, 7]})";
      case 4: return R"({"op": "regex", "lhs": )" + Str(depth - 1) + R"(, "pattern": "[13]$"})";
      case 5: return R"({"op": "is_null", "arg": )" + Num(depth - 1) + "}";
      case 6: return R"({"op": "not", "arg": )" + Pred(depth - 1) + "}";
      default:
        return std::string(R"({"op": ")") + (Pick(2) ? "and" : "or") + R"(", "args": [)" +
               Pred(depth - 1) + ", " + Pred(depth - 1) + "]}";
    }
  }
};

// n physical rows: a (i64), x (f64), s (str, 10 values), u (str, a value per row: its
// dictionary outgrows any block), all with nulls; with `shuffled`, a selection of about
// 90% of the rows in random order.
RowSet RandomRows(size_t n, bool shuffled, std::mt19937_64& rng) {
  Cells<int64_t> a(n);
  Cells<double> x(n);
  Cells<std::string> s(n), u(n);
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 7) a[i] = static_cast<int64_t>(rng() % 21) - 10;
    if (rng() % 5) x[i] = static_cast<double>(rng() % 1000) / 100.0 - 2.0;
    if (rng() % 6) s[i] = "m" + std::to_string(rng() % 10);
    if (rng() % 4) u[i] = "u" + std::to_string(i);
  }
  RowSet rs;
  rs.SetColumn("a", I64Col(a));
  rs.SetColumn("x", F64Col(x));
  rs.SetColumn("s", StrCol(s));
  rs.SetColumn("u", StrCol(u));
  if (!shuffled) return rs;
  Selection sel(n);
  std::iota(sel.begin(), sel.end(), 0u);
  std::shuffle(sel.begin(), sel.end(), rng);
  sel.resize(n - n / 10);
  return rs.WithSelection(std::move(sel));
}

// `rs` with the logical rows [begin, end) only.
RowSet Slice(const RowSet& rs, size_t begin, size_t end) {
  Selection sel;
  for (size_t i = begin; i < end; ++i) sel.push_back(rs.row(i));
  return rs.WithSelection(std::move(sel));
}

ExprFixture Fixture(RowSet rows) {
  ExprFixture fx;
  fx.rows = std::move(rows);
  fx.extra.cols.emplace_back("gone", ColumnType::kI64);  // typed at load, absent at run
  fx.Param("w", ColumnType::kF64, F(0.5));
  fx.Param("p", ColumnType::kStr, S("m3"));
  return fx;
}

}  // namespace

TEST_CASE("blocks: random programs give the same values whole and in pieces cut elsewhere") {
  std::mt19937_64 rng(20240611);
  Gen gen{std::mt19937_64(99)};
  const size_t b = expr::kBlockRows;
  size_t compiled = 0;
  for (size_t n : {size_t{0}, size_t{1}, b - 1, b, b + 1, 2 * b + 3}) {
    for (bool shuffled : {false, true}) {
      ExprFixture fx = Fixture(RandomRows(n, shuffled, rng));
      const RowSet& rs = fx.rows;
      // Pieces of 1,000 logical rows: each is one block, cut away from the 4096s.
      const size_t piece = 1000;
      for (int round = 0; round < 12; ++round) {
        int kind = round % 3;
        std::string json = kind == 0 ? gen.Num(4) : kind == 1 ? gen.Str(3) : gen.Pred(3);
        CAPTURE(json);
        CAPTURE(n);
        CAPTURE(shuffled);
        if (kind < 2) {
          auto e = fx.Compile(json);
          if (!e) continue;  // a random mix of types may not type-check
          ++compiled;
          Column whole = *(*e)->Evaluate(rs, fx.values);
          REQUIRE(whole.size() == rs.physical_rows());
          std::vector<bool> selected(rs.physical_rows());
          for (size_t i = 0; i < rs.size(); ++i) selected[rs.row(i)] = true;
          for (size_t r = 0; r < rs.physical_rows(); ++r)
            if (!selected[r]) CHECK(whole.Get(r) == kNull);
          for (size_t lo = 0; lo < rs.size(); lo += piece) {
            size_t hi = std::min(rs.size(), lo + piece);
            Column part = *(*e)->Evaluate(Slice(rs, lo, hi), fx.values);
            for (size_t i = lo; i < hi; ++i) {
              uint32_t r = rs.row(i);
              INFO("logical row " << i);
              REQUIRE(whole.Get(r) == part.Get(r));
            }
          }
        } else {
          auto p = fx.CompileP(json);
          REQUIRE_MESSAGE(p.has_value(), p.error().message);
          ++compiled;
          Selection whole = *(*p)->Select(rs, fx.values), parts;
          for (size_t lo = 0; lo < rs.size(); lo += piece) {
            Selection part =
                *(*p)->Select(Slice(rs, lo, std::min(rs.size(), lo + piece)), fx.values);
            parts.insert(parts.end(), part.begin(), part.end());
          }
          REQUIRE(whole == parts);
        }
      }
    }
  }
  CHECK(compiled > 100);
}

// A cancel check that says yes at its first poll: the run stops there (the runs below
// poll dozens of times when let finish).
TEST_CASE("blocks: a cancelled evaluation or selection stops at its first poll") {
  std::mt19937_64 rng(5);
  ExprFixture fx = Fixture(RandomRows(200'000, true, rng));
  int polls = 0;
  CancelCheck count = [&] { return ++polls, false; };
  CancelCheck cancel_first = [&] { return ++polls >= 1; };

  auto e = fx.Compile(R"({"op": "+", "args": [{"op": "log1p", "args": [{"key": "x"}]},
      {"op": "coalesce", "args": [{"key": "a"}, {"const": 0}]}]})");
  REQUIRE(e);
  REQUIRE((*e)->Evaluate(fx.rows, fx.values, count));
  CHECK(polls > 20);
  polls = 0;
  CHECK_FALSE((*e)->Evaluate(fx.rows, fx.values, cancel_first));
  CHECK(polls == 1);

  auto p = fx.CompileP(R"({"op": "cmp", "cmp": ">", "lhs": {"key": "x"}, "rhs": {"const": 1}})");
  REQUIRE(p);
  polls = 0;
  REQUIRE((*p)->Select(fx.rows, fx.values, count));
  CHECK(polls > 10);
  polls = 0;
  CHECK_FALSE((*p)->Select(fx.rows, fx.values, cancel_first));
  CHECK(polls == 1);

  // A regex over a value per row: RE2 runs per new dictionary entry, and counts more.
  auto re = fx.CompileP(R"({"op": "regex", "lhs": {"key": "u"}, "pattern": "7$"})");
  REQUIRE(re);
  polls = 0;
  CHECK_FALSE((*re)->Select(fx.rows, fx.values, cancel_first));
  CHECK(polls == 1);
}
