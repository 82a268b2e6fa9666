// The size limits of compiled expressions (expr_program.h): up to kMaxExprNodes nodes and
// kMaxExprDepth levels compile and run; one more is a load error naming the limit. Once
// a 70,000-argument `+` wrapped the 16-bit register index and crashed the first run.
#include "expr_test_util.h"
#include "plan/expr_program.h"

namespace rankd::test {
namespace {

using expr::kMaxExprDepth;
using expr::kMaxExprNodes;

// {"op": op, "args": [leaf × n]}: n + 1 nodes.
std::string Wide(const std::string& op, const std::string& leaf, size_t n) {
  std::string s = R"({"op": ")" + op + R"(", "args": [)";
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + leaf;
  return s + "]}";
}

// `levels` nested unary nodes around `leaf`: depth levels + 1.
std::string Deep(const std::string& open, const std::string& close, const std::string& leaf,
                 size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += open;
  s += leaf;
  for (size_t i = 0; i < levels; ++i) s += close;
  return s;
}

ExprFixture Likes() {
  ExprFixture fx;
  fx.rows.SetColumn("likes", I64Col({1, 2, std::nullopt}));
  fx.Param("n", ColumnType::kI64, I(3));
  return fx;
}

const std::string kLikes = R"({"key": "likes"})";

TEST_CASE("limits: 65,535 nodes compile and run in a few slots") {
  ExprFixture fx = Likes();
  const size_t args = kMaxExprNodes - 1;
  CHECK(fx.Eval(Wide("+", kLikes, args)) ==
        std::vector<Value>{I(int64_t(args)), I(2 * int64_t(args)), kNull});
  // Distinct registers per argument (params are not shared) plus a cast each: more
  // registers than 16 bits hold, in a handful of slots.
  std::string mixed = Wide("+", R"({"param": "n"})", args - 1);
  mixed.insert(mixed.size() - 2, R"(,{"const": 0.5})");
  CHECK(fx.Eval(mixed) == std::vector<Value>{F(3.0 * double(args - 1) + 0.5),
                                             F(3.0 * double(args - 1) + 0.5),
                                             F(3.0 * double(args - 1) + 0.5)});
  auto p = expr::CompileProgram(fx.Parse(mixed), false, fx.Types(), fx.params, "test");
  REQUIRE(p.has_value());
  CHECK(p->regs.size() > 65536);
  CHECK(p->num_slots <= 8);
}

TEST_CASE("limits: more than 65,535 nodes is a load error naming the limit") {
  ExprFixture fx = Likes();
  for (size_t args : {kMaxExprNodes, size_t{70000}}) {
    std::string m = fx.ExprError(Wide("+", kLikes, args));
    CHECK_MESSAGE(m.find("test: args[65534]: ") == 0, m);
    CHECK_MESSAGE(m.find("more than 65535 nodes (the limit)") != std::string::npos, m);
  }
  // Predicates count too.
  std::string pred = Wide("and", R"({"op": "is_null", "arg": {"key": "likes"}})", 40000);
  CHECK(fx.PredError(pred).find("more than 65535 nodes") != std::string::npos);
}

TEST_CASE("limits: depth 256 runs, 257 is a load error") {
  ExprFixture fx = Likes();
  const std::string open = R"({"op": "neg", "args": [)", close = "]}";
  // 255 negations of likes: depth 256, an odd count negates.
  CHECK(fx.Eval(Deep(open, close, kLikes, kMaxExprDepth - 1)) ==
        std::vector<Value>{I(-1), I(-2), kNull});
  std::string m = fx.ExprError(Deep(open, close, kLikes, kMaxExprDepth));
  CHECK_MESSAGE(m.find("nests deeper than 256 levels (the limit)") != std::string::npos, m);

  const std::string not_open = R"({"op": "not", "arg": )", not_close = "}";
  const std::string is_null = R"({"op": "is_null", "arg": {"key": "likes"}})";
  // 254 nots around is_null(likes): depth 256, even count keeps it.
  CHECK(fx.Select(Deep(not_open, not_close, is_null, kMaxExprDepth - 2)) == Selection{2});
  CHECK(fx.PredError(Deep(not_open, not_close, is_null, kMaxExprDepth - 1))
            .find("nests deeper than 256 levels") != std::string::npos);
}

}  // namespace
}  // namespace rankd::test
