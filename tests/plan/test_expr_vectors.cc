// Vector fields and the vector functions (docs/vectors.md): "vec:D" in a schema, the
// kernels' fixed summation order (the same bits from the baseline, AVX2 and AVX-512 code),
// dot / cosine / l2 in expressions (columns, a viewer's vector through {"from"}, nulls,
// zero vectors, selections, blocks) and every load error, and a vector cell's JSON.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "data/json_cell.h"
#include "data/vector_math.h"
#include "expr_test_util.h"
#include "plan/schema.h"

using namespace rankd;
using namespace rankd::test;

namespace {

using Vecs = std::vector<std::optional<std::vector<float>>>;

std::vector<float> Random(std::mt19937& rng, size_t d, float scale = 1.0f) {
  std::normal_distribution<float> n(0.0f, scale);
  std::vector<float> v(d);
  for (float& x : v) x = n(rng);
  return v;
}

// The three kernels as one target compiles them: each clone inlines data/vector_math.h's
// loops and vectorises them for its instruction set, as expr_eval.cc's clones do.
struct Sims {
  double dot, cos, l2;
  bool cos_ok;
};
#define RANKD_SIMS_BODY                                  \
  Sims s;                                                \
  s.dot = vec::Dot(a, b, d);                             \
  s.cos_ok = vec::CosineOf(vec::Cosine(a, b, d), s.cos); \
  s.l2 = vec::L2(a, b, d);                               \
  return s;
__attribute__((noinline, flatten)) Sims SimsBaseline(const float* a, const float* b, size_t d) {
  RANKD_SIMS_BODY
}
#if defined(__x86_64__) && !defined(__clang__)
__attribute__((noinline, flatten, target("avx2"))) Sims SimsAvx2(const float* a, const float* b,
                                                                 size_t d) {
  RANKD_SIMS_BODY
}
__attribute__((noinline, flatten, target("arch=x86-64-v4"))) Sims SimsAvx512(
    const float* a, const float* b, size_t d){RANKD_SIMS_BODY}
#endif

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

}  // namespace

TEST_CASE("schema: vec:D fields of hash and json families, and their errors") {
  auto parse = [](std::string_view fields, std::string_view type = "hash") {
    return ParseSchema("{\"schema_version\": 1, \"families\": {\"item_emb\": {\"type\": \"" +
                           std::string(type) +
                           "\", \"key\": \"e:{id}\", \"fields\": " + std::string(fields) + "}}}",
                       "s.json");
  };
  auto s = parse(R"({"emb": "vec:64", "one": "vec:1", "big": "vec:4096", "q": "f64"})");
  REQUIRE(s.has_value());
  const KeyFamily& f = *(*s)->Find("item_emb");
  CHECK(f.fields[0].type == FieldType::kVec);
  CHECK(f.fields[0].dim == 64);
  CHECK(f.fields[0].TypeText() == "vec:64");
  CHECK(ColumnTypeOf(f.fields[0].type) == ColumnType::kVec);
  CHECK(f.fields[1].dim == 1);
  CHECK(f.fields[2].dim == kMaxVecDim);
  CHECK(f.fields[3].dim == 0);
  CHECK(parse(R"({"emb": "vec:3"})", "json").has_value());
  // A family's cache identity includes the dimension.
  auto s32 = parse(R"({"emb": "vec:32", "one": "vec:1", "big": "vec:4096", "q": "f64"})");
  REQUIRE(s32.has_value());
  CHECK((*s32)->Find("item_emb")->cache_id != f.cache_id);

  for (const char* bad : {"vec", "vec:", "vec:0", "vec:4097", "vec:08", "vec:-1", "vec:+4",
                          "vec:abc", "vec:64x", "vec:99999", "vector"}) {
    auto r = parse(std::string("{\"emb\": \"") + bad + "\"}");
    REQUIRE_MESSAGE(!r.has_value(), bad);
    const std::string& m = r.error().message;
    CHECK_MESSAGE(m.find("s.json") != std::string::npos, m);
    CHECK_MESSAGE(m.find("item_emb") != std::string::npos, m);
    CHECK_MESSAGE(m.find("fields.emb") != std::string::npos, m);
    CHECK_MESSAGE(m.find("vec:D") != std::string::npos, m);
  }
  // Other family types have no fields at all; the message says so.
  auto list = parse(R"({"emb": "vec:4"})", "list");
  REQUIRE(!list.has_value());
  CHECK(list.error().message.find("has no fields") != std::string::npos);
}

TEST_CASE("kernels: near the exact value, and the same bits at every dispatch level") {
  std::mt19937 rng(7);
  for (size_t d : {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 255, 1000, 4096}) {
    for (int round = 0; round < 20; ++round) {
      const float scale = round % 3 == 0 ? 1e-20f : round % 3 == 1 ? 1.0f : 1e15f;
      std::vector<float> a = Random(rng, d, scale), b = Random(rng, d, scale);
      long double dot = 0, aa = 0, bb = 0, l2 = 0, mag = 0;
      for (size_t i = 0; i < d; ++i) {
        dot += (long double)a[i] * b[i];
        mag += std::fabs((long double)a[i] * b[i]);
        aa += (long double)a[i] * a[i];
        bb += (long double)b[i] * b[i];
        l2 += ((long double)a[i] - b[i]) * ((long double)a[i] - b[i]);
      }
      const Sims s = SimsBaseline(a.data(), b.data(), d);
      CAPTURE(d);
      CHECK(std::fabs(s.dot - (double)dot) <= 1e-12 * (double)mag + 1e-300);
      REQUIRE(s.cos_ok);
      CHECK(std::fabs(s.cos - (double)(dot / std::sqrt(aa * bb))) <= 1e-12);
      CHECK(std::fabs(s.l2 - (double)std::sqrt(l2)) <= 1e-12 * (double)std::sqrt(l2));
#if defined(__x86_64__) && !defined(__clang__)
      // Every clone the machine can run gives the same bits as the baseline code.
      for (int level = 0; level < 2; ++level) {
        if (level == 0 && !__builtin_cpu_supports("avx2")) continue;
        if (level == 1 && !__builtin_cpu_supports("avx512f")) continue;
        const Sims v =
            level == 0 ? SimsAvx2(a.data(), b.data(), d) : SimsAvx512(a.data(), b.data(), d);
        CAPTURE(level);
        CHECK(Bits(v.dot) == Bits(s.dot));
        CHECK(Bits(v.cos) == Bits(s.cos));
        CHECK(Bits(v.l2) == Bits(s.l2));
      }
#endif
    }
  }
  // The lane layout is fixed: element i goes to lane i mod 16, the lanes meet in a tree.
  // 1e16 + 1 - 1e16 in that order is 0 (1 is lost); this layout puts 1e16 and -1e16 in
  // lane 0 and 1 in lane 1, so the sum is exactly 1.
  std::vector<float> x(17, 0.0f), ones(17, 1.0f);
  x[0] = 1e16f, x[1] = 1.0f, x[16] = -1e16f;
  CHECK(vec::Dot(x.data(), ones.data(), 17) == 1.0);
  // Cosine of an all-zero vector has no value.
  std::vector<float> zero(17, 0.0f);
  double c = 42;
  CHECK_FALSE(vec::CosineOf(vec::Cosine(zero.data(), ones.data(), 17), c));
  CHECK_FALSE(vec::CosineOf(vec::Cosine(ones.data(), zero.data(), 17), c));
}

TEST_CASE("dot, cosine, l2 of two vector columns: values, nulls, zero vectors, selections") {
  ExprFixture fx;
  RowSet rs;
  rs.SetColumn("id", I64Col({1, 2, 3, 4, 5}));
  rs.SetColumn("a",
               std::make_shared<Column>(Column::Vec(
                   3, Vecs{std::vector<float>{1, 2, 3}, std::vector<float>{0, 0, 0}, std::nullopt,
                           std::vector<float>{-1, 0.5f, 2}, std::vector<float>{3, 4, 0}})));
  rs.SetColumn(
      "b", std::make_shared<Column>(Column::Vec(
               3, Vecs{std::vector<float>{4, 5, 6}, std::vector<float>{1, 1, 1},
                       std::vector<float>{1, 1, 1}, std::nullopt, std::vector<float>{0, 0, 0}})));
  fx.rows = rs;
  CHECK(fx.Eval(R"({"op": "dot", "args": [{"key": "a"}, {"key": "b"}]})") ==
        std::vector<Value>{F(32), F(0), kNull, kNull, F(0)});
  CHECK(fx.Eval(R"({"op": "l2", "args": [{"key": "a"}, {"key": "b"}]})") ==
        std::vector<Value>{F(std::sqrt(27.0)), F(std::sqrt(3.0)), kNull, kNull, F(5)});
  auto cos = fx.Eval(R"({"op": "cosine", "args": [{"key": "a"}, {"key": "b"}]})");
  CHECK(std::get<double>(cos[0]) == doctest::Approx(32 / std::sqrt(14.0 * 77.0)));
  CHECK(IsNull(cos[1]));  // a is all zeros
  CHECK(IsNull(cos[2]));
  CHECK(IsNull(cos[3]));
  CHECK(IsNull(cos[4]));  // b is all zeros
  // A vector with itself; a result used in arithmetic; is_null of a vector.
  CHECK(fx.Eval(R"({"op": "+", "args": [{"const": 1},
                   {"op": "dot", "args": [{"key": "a"}, {"key": "a"}]}]})") ==
        std::vector<Value>{F(15), F(1), kNull, F(6.25), F(26)});
  CHECK(fx.Select(R"({"op": "is_null", "arg": {"key": "a"}})") == Selection{2});
  // Through a selection that drops and reorders rows: rows are read in place.
  RowSet sel = rs.WithSelection({4, 0, 3});
  CHECK(fx.EvalOn(R"({"op": "dot", "args": [{"key": "a"}, {"key": "b"}]})", sel) ==
        std::vector<Value>{F(32), kNull, kNull, kNull, F(0)});
}

TEST_CASE("a viewer's vector through {\"from\"}, against a column, over several blocks") {
  std::mt19937 rng(11);
  const size_t rows = 3 * 4096 + 5;  // three blocks of the VM (kBlockRows) and a few rows
  const uint32_t d = 24;
  Vecs items;
  for (size_t r = 0; r < rows; ++r) {
    if (r % 97 == 3)
      items.push_back(std::nullopt);
    else
      items.push_back(Random(rng, d));
  }
  const std::vector<float> viewer = Random(rng, d);
  RowSet rs;
  rs.SetColumn("emb", std::make_shared<Column>(Column::Vec(d, items)));
  simdjson::dom::parser parser;
  ColumnTypes types;
  types.cols.push_back({"emb", ColumnType::kVec, d});
  ParamDecls decls;
  ParamValues values{Value(viewer)};
  FromResolver from = [](std::string_view node, std::string_view column) -> Result<FromSlot> {
    if (node == "v" && column == "emb") return FromSlot{0, ColumnType::kVec, 24};
    if (node == "v" && column == "small") return FromSlot{0, ColumnType::kVec, 8};
    if (node == "v" && column == "age") return FromSlot{0, ColumnType::kI64, 0};
    return Fail(Error::BadRequest("node 'v' has no column '" + std::string(column) + "'"));
  };
  auto compile = [&](const std::string& json) {
    return CompileExpr(parser.parse(json).value(), types, decls, "plan p: node 's'", from);
  };
  for (const char* op : {"dot", "cosine", "l2"}) {
    auto e = compile(std::string(R"({"op": ")") + op +
                     R"(", "args": [{"from": "v", "key": "emb"}, {"key": "emb"}]})");
    REQUIRE_MESSAGE(e.has_value(), e.error().message);
    CHECK((*e)->type() == ColumnType::kF64);
    std::optional<Column> c = (*e)->Evaluate(rs, values);
    REQUIRE(c.has_value());
    for (size_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      if (!items[r]) {
        CHECK_FALSE(c->valid(r));
        continue;
      }
      REQUIRE(c->valid(r));
      const float* x = items[r]->data();
      double want = std::string_view(op) == "dot"  ? vec::Dot(viewer.data(), x, d)
                    : std::string_view(op) == "l2" ? vec::L2(viewer.data(), x, d)
                                                   : 0;
      if (std::string_view(op) == "cosine") vec::CosineOf(vec::Cosine(viewer.data(), x, d), want);
      CHECK(Bits(c->f64[r]) == Bits(want));
    }
  }
  // The viewer's vector null (no user), or of another length at run time: every row null.
  auto e = compile(R"({"op": "dot", "args": [{"key": "emb"}, {"from": "v", "key": "emb"}]})");
  REQUIRE(e.has_value());
  for (Value v : {Value(std::monostate{}), Value(std::vector<float>(3, 1.0f))}) {
    ParamValues other{v};
    std::optional<Column> c = (*e)->Evaluate(rs, other);
    REQUIRE(c.has_value());
    for (size_t r = 0; r < rows; ++r) CHECK_FALSE(c->valid(r));
  }
  // Load errors name the node, the args and their types.
  auto error = [&](const std::string& json) {
    auto r = compile(json);
    REQUIRE_MESSAGE(!r.has_value(), json);
    return r.error().message;
  };
  std::string m =
      error(R"({"op": "dot", "args": [{"from": "v", "key": "small"}, {"key": "emb"}]})");
  CHECK_MESSAGE(m.find("node 's'") != std::string::npos, m);
  CHECK_MESSAGE(m.find("from 'v' key 'small') is vec:8") != std::string::npos, m);
  CHECK_MESSAGE(m.find("column 'emb') is vec:24") != std::string::npos, m);
  m = error(R"({"op": "cosine", "args": [{"from": "v", "key": "age"}, {"key": "emb"}]})");
  CHECK_MESSAGE(m.find("op 'cosine' needs two vectors but args[0] (from 'v' key 'age') is i64") !=
                    std::string::npos,
                m);
}

TEST_CASE("vectors only go into dot, cosine and l2: load errors") {
  ExprFixture fx;
  RowSet rs;
  rs.SetColumn("id", I64Col({1}));
  rs.SetColumn("x", F64Col({1.0}));
  rs.SetColumn("a", std::make_shared<Column>(Column::Vec(2, Vecs{std::vector<float>{1, 2}})));
  rs.SetColumn("b", std::make_shared<Column>(Column::Vec(3, Vecs{std::vector<float>{1, 2, 3}})));
  fx.rows = rs;
  auto has = [](const std::string& m, const std::string& part) {
    CHECK_MESSAGE(m.find(part) != std::string::npos, m);
  };
  has(fx.ExprError(R"({"op": "dot", "args": [{"key": "a"}, {"key": "b"}]})"),
      "op 'dot' needs vectors of one dimension but args[0] (column 'a') is vec:2 and args[1] "
      "(column 'b') is vec:3");
  has(fx.ExprError(R"({"op": "l2", "args": [{"key": "a"}, {"key": "x"}]})"),
      "op 'l2' needs two vectors but args[1] (column 'x') is f64");
  has(fx.ExprError(R"({"op": "dot", "args": [{"key": "a"}, {"key": "gone"}]})"),
      "args[1] (column 'gone') is null");
  has(fx.ExprError(R"({"op": "dot", "args": [{"key": "a"}]})"), "op 'dot' takes 2 args, got 1");
  has(fx.ExprError(R"({"op": "+", "args": [{"key": "a"}, {"const": 1}]})"),
      "op '+' needs numbers but args[0] is vec");
  has(fx.ExprError(R"({"op": "sqrt", "args": [{"key": "a"}]})"), "needs numbers");
  has(fx.ExprError(R"({"op": "coalesce", "args": [{"key": "a"}, {"key": "a"}]})"),
      "op 'coalesce' cannot take a vector (args[0] is vec:2)");
  has(fx.ExprError(R"({"op": "max", "args": [{"key": "x"}, {"key": "a"}]})"),
      "op 'max' cannot take a vector (args[1] is vec:2)");
  has(fx.ExprError(R"({"key": "a"})"), "the result is a vector (vec:2)");
  has(fx.PredError(R"({"op": "cmp", "cmp": "==", "lhs": {"key": "a"}, "rhs": {"key": "a"}})"),
      "op 'cmp' cannot take a vector (lhs is vec:2)");
  has(fx.PredError(R"({"op": "in", "lhs": {"key": "b"}, "values": [1]})"),
      "op 'in' cannot take a vector (lhs is vec:3)");
  has(fx.PredError(R"({"op": "regex", "lhs": {"key": "a"}, "pattern": "x"})"), "got vec");
}

TEST_CASE("a vector cell's JSON: an array of the shortest float32 texts, or null") {
  Column c = Column::Vec(3, Vecs{std::vector<float>{0.1f, -2.0f, 1e-8f}, std::nullopt});
  std::string out;
  AppendJsonCell(c, 0, out);
  CHECK(out == "[0.1,-2,1e-08]");
  out.clear();
  AppendJsonCell(c, 1, out);
  CHECK(out == "null");
  CHECK(c.size() == 2);
  CHECK(std::get<std::vector<float>>(c.Get(0)) == std::vector<float>{0.1f, -2.0f, 1e-8f});
}
