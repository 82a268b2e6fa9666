// Load errors of expressions and predicates: each names `where` and the path inside
// the expression.
#include "expr_test_util.h"

namespace rankd::test {
namespace {

ExprFixture Typed() {
  ExprFixture fx;
  fx.rows.SetColumn("likes", I64Col({1}));
  fx.rows.SetColumn("country", StrCol({"US"}));
  fx.Param("w", ColumnType::kF64, F(1.0));
  return fx;
}

TEST_CASE("errors: unknown ops and arity") {
  ExprFixture fx = Typed();
  CHECK(fx.ExprError(R"({"op": "+", "args": [{"const": 1}, {"op": "foo", "args": []}]})") ==
        "test: args[1]: unknown op 'foo'");
  CHECK(
      fx.ExprError(
          R"({"op": "*", "args": [{"const": 1}, {"op": "+", "args": [{"op": "bar", "args": []}, {"const": 1}]}]})") ==
      "test: args[1].args[0]: unknown op 'bar'");
  CHECK(fx.ExprError(R"({"op": "+", "args": [{"const": 1}]})") ==
        "test: op '+' takes at least 2 args, got 1");
  CHECK(fx.ExprError(R"({"op": "pow", "args": [{"const": 1}]})") ==
        "test: op 'pow' takes 2 args, got 1");
  CHECK(fx.ExprError(R"({"op": "log", "args": [{"const": 1}, {"const": 2}]})") ==
        "test: op 'log' takes 1 args, got 2");
  CHECK(fx.ExprError(R"({"op": "coalesce", "args": []})") ==
        "test: op 'coalesce' takes at least 1 args, got 0");
  CHECK(fx.ExprError(
            R"({"op": "if", "args": [{"op": "is_null", "arg": {"const": 1}}, {"const": 1}]})") ==
        "test: op 'if' takes 3 args, got 2");
  CHECK(fx.ExprError(R"({"op": "neg"})") == "test: op 'neg' needs an \"args\" array");
  CHECK(fx.PredError(R"({"op": "xor", "args": []})") == "test: unknown predicate op 'xor'");
  CHECK(fx.PredError(R"({"op": "cmp", "cmp": "=~", "lhs": {"const": 1}, "rhs": {"const": 1}})") ==
        "test: unknown cmp '=~' (== != < <= > >=)");
  CHECK(fx.PredError(R"({"op": "cmp", "cmp": "==", "lhs": {"const": 1}})") ==
        "test: op 'cmp' needs \"lhs\" and \"rhs\"");
  CHECK(fx.PredError(R"({"op": "and", "args": []})") ==
        "test: op 'and' needs a non-empty \"args\" array");
  CHECK(fx.PredError(R"({"op": "not"})") == "test: op 'not' needs an \"arg\"");
  CHECK(fx.PredError(R"({"op": "in", "lhs": {"key": "likes"}})") ==
        "test: op 'in' needs a \"values\" array");
  CHECK(fx.PredError(R"({"op": "in", "lhs": {"key": "likes"}, "values": [1, [2]]})") ==
        "test: values[1]: expected a constant");
}

TEST_CASE("errors: malformed nodes") {
  ExprFixture fx = Typed();
  CHECK(fx.ExprError(R"(42)") ==
        "test: expected an expression object ({\"const\"|\"key\"|\"param\"|\"from\"|\"op\": ...})");
  CHECK(fx.ExprError(R"({"column": "likes"})") ==
        "test: expected one of \"const\", \"key\", \"param\", \"from\", \"op\"");
  CHECK(fx.ExprError(R"({"const": [1]})") == "test: const must be a number, string, bool or null");
  CHECK(fx.ExprError(R"({"key": 3})") == "test: key must be a string");
  CHECK(fx.ExprError(R"({"op": 3, "args": []})") == "test: \"op\" must be a string");
  CHECK(fx.PredError(R"({"cmp": "=="})") ==
        "test: expected a predicate object with a string \"op\"");
  // An expression where a predicate belongs, and the reverse.
  CHECK(fx.ExprError(R"({"op": "if", "args": [{"const": true}, {"const": 1}, {"const": 2}]})") ==
        "test: args[0]: expected a predicate object with a string \"op\"");
  CHECK(
      fx.PredError(R"({"op": "not", "arg": {"op": "+", "args": [{"const": 1}, {"const": 1}]}})") ==
      "test: arg: unknown predicate op '+'");
}

TEST_CASE("errors: undeclared param") {
  ExprFixture fx = Typed();
  CHECK(fx.ExprError(R"({"op": "*", "args": [{"key": "likes"}, {"param": "weight"}]})") ==
        "test: args[1]: undeclared param 'weight'");
  CHECK(fx.PredError(
            R"({"op": "cmp", "cmp": "<", "lhs": {"key": "likes"}, "rhs": {"param": "cap"}})") ==
        "test: rhs: undeclared param 'cap'");
}

TEST_CASE("errors: arithmetic on a known string") {
  ExprFixture fx = Typed();
  CHECK(fx.ExprError(R"({"op": "+", "args": [{"key": "likes"}, {"key": "country"}]})") ==
        "test: op '+' needs numbers but args[1] is str");
  CHECK(fx.ExprError(R"({"op": "log1p", "args": [{"const": "x"}]})") ==
        "test: op 'log1p' needs numbers but args[0] is str");
  CHECK(fx.ExprError(R"({"op": "neg", "args": [{"key": "country"}]})") ==
        "test: op 'neg' needs numbers but args[0] is str");
  CHECK(fx.ExprError(R"({"op": "coalesce", "args": [{"key": "country"}, {"const": 0}]})") ==
        "test: op 'coalesce' cannot mix str and i64 (args[1])");
  CHECK(
      fx.ExprError(
          R"({"op": "if", "args": [{"op": "is_null", "arg": {"key": "likes"}}, {"key": "country"}, {"param": "w"}]})") ==
      "test: op 'if' cannot mix str and f64 (args[2])");
  CHECK(fx.ExprError(R"({"op": "max", "args": [{"const": true}, {"const": "a"}]})") ==
        "test: op 'max' cannot mix str and bool (args[0])");
  // Unknown at load: null, not an error.
  CHECK(fx.Compile(R"({"op": "+", "args": [{"key": "nope"}, {"const": 1}]})").has_value());
}

TEST_CASE("errors: regex") {
  ExprFixture fx = Typed();
  std::string m = fx.PredError(R"({"op": "regex", "lhs": {"key": "country"}, "pattern": "(ab"})");
  CHECK(m.rfind("test: bad regex pattern '(ab': ", 0) == 0);
  CHECK(fx.PredError(R"({"op": "regex", "lhs": {"key": "likes"}, "pattern": "1"})") ==
        "test: op 'regex' needs a str lhs, got i64");
  CHECK(fx.PredError(R"({"op": "regex", "lhs": {"key": "country"}})") ==
        "test: op 'regex' needs a string \"pattern\"");
  CHECK(
      fx.PredError(
            R"({"op": "or", "args": [{"op": "is_null", "arg": {"key": "likes"}}, {"op": "regex", "lhs": {"key": "country"}, "pattern": "[z-a]"}]})")
          .rfind("test: args[1]: bad regex pattern '[z-a]': ", 0) == 0);
}

TEST_CASE("errors: the location names where") {
  ExprFixture fx = Typed();
  auto e = CompileExpr(fx.Parse(R"({"op": "nope", "args": []})"), fx.Types(), fx.params,
                       "plans/feed.plan.json: node 's': param 'expr' (expr 'e0')");
  REQUIRE(!e.has_value());
  CHECK(e.error().message ==
        "plans/feed.plan.json: node 's': param 'expr' (expr 'e0'): unknown op 'nope'");
}

}  // namespace
}  // namespace rankd::test
