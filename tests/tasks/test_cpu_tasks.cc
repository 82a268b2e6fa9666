// The CPU tasks called directly on hand-built row sets: sort (stable, nulls last in
// both orders), take, concat (column union), dedupe; none of filter/sort/take copies a
// column; vm, filter and sort stop when cancelled.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "data/column_builder.h"
#include "tasks/sort.h"
#include "tasks/task.h"

using namespace rankd;

namespace {

struct Call {
  const TaskSpec* spec;
  TaskArgs args;
  PlanNode node;
  TaskContext ctx;
  ParamValues params;

  explicit Call(std::string_view op,
                std::initializer_list<std::pair<std::string, Value>> given = {})
      : spec(TaskRegistry::Default().Find(op)), args(&spec->params) {
    REQUIRE(spec);
    for (size_t i = 0; i < spec->params.size(); ++i) args.at(i) = spec->params[i].default_value;
    for (const auto& [name, v] : given)
      for (size_t i = 0; i < spec->params.size(); ++i)
        if (spec->params[i].name == name) args.at(i) = v;
    node.id = spec->op + "_node";
    node.op = spec->op;
    ctx.node = &node;
    ctx.args = &args;
    ctx.params = &params;
  }
  RowSet Run(RowSets in) {
    auto r = spec->run_cpu(ctx, std::move(in));
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    return std::move(*r);
  }
};

ColumnPtr F64WithNulls(const std::vector<double>& v, const std::vector<size_t>& nulls) {
  ColumnBuilder b(ColumnType::kF64, v.size());
  for (size_t r = 0; r < v.size(); ++r) {
    if (std::find(nulls.begin(), nulls.end(), r) != nulls.end())
      b.AppendNulls(1);
    else
      b.AppendF64(v[r]);
  }
  return std::make_shared<Column>(std::move(b).Finish());
}

// id = 1..n, score as given (with nulls).
RowSet Scored(std::vector<double> scores, std::vector<size_t> nulls = {}) {
  std::vector<int64_t> ids(scores.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i + 1);
  RowSet rs;
  rs.SetColumn("id", std::make_shared<Column>(Column::I64(std::move(ids))));
  rs.SetColumn("score", F64WithNulls(scores, nulls));
  return rs;
}

std::vector<int64_t> Ids(const RowSet& rs) {
  std::vector<int64_t> out;
  const Column* id = rs.column("id");
  for (size_t i = 0; i < rs.size(); ++i) out.push_back(id->i64[rs.row(i)]);
  return out;
}

}  // namespace

TEST_SUITE("cpu_tasks") {
  TEST_CASE("sort desc: stable, nulls last") {
    RowSet in = Scored({1, 3, 0, 3, 2, 0, 1}, {2, 5});
    const Column* score = in.column("score");
    RowSet out =
        Call("sort", {{"key", std::string("score")}, {"order", std::string("desc")}}).Run({in});
    CHECK(Ids(out) == std::vector<int64_t>{2, 4, 5, 1, 7, 3, 6});
    CHECK(out.column("score") == score);  // the column is shared, not copied
  }

  TEST_CASE("sort asc: stable, nulls last") {
    RowSet in = Scored({1, 3, 0, 3, 2, 0, 1}, {2, 5});
    RowSet out =
        Call("sort", {{"key", std::string("score")}, {"order", std::string("asc")}}).Run({in});
    CHECK(Ids(out) == std::vector<int64_t>{1, 7, 5, 2, 4, 3, 6});
  }

  TEST_CASE("sort sorts the current selection, not the physical rows") {
    RowSet in = Scored({5, 4, 3, 2, 1}).WithSelection({4, 0, 2});
    RowSet out =
        Call("sort", {{"key", std::string("score")}, {"order", std::string("asc")}}).Run({in});
    CHECK(Ids(out) == std::vector<int64_t>{5, 3, 1});
  }

  TEST_CASE("sort by strings, bytewise") {
    RowSet rs = Scored({0, 0, 0});
    rs.SetColumn("name", std::make_shared<Column>(Column::Str({"b", std::nullopt, "B"})));
    RowSet out =
        Call("sort", {{"key", std::string("name")}, {"order", std::string("asc")}}).Run({rs});
    CHECK(Ids(out) == std::vector<int64_t>{3, 1, 2});
  }

  TEST_CASE("sort with rows_read orders the first rows exactly as a full sort, keeps every row") {
    // Ties, nulls and a NaN; every cut-off from 1 past the row count, both orders.
    std::vector<double> v;
    for (int i = 0; i < 60; ++i) v.push_back(static_cast<double>((i * 37) % 11));
    v[7] = std::nan("");
    RowSet in = Scored(v, {3, 20, 41});
    for (std::string order : {"desc", "asc"}) {
      Call full("sort", {{"key", std::string("score")}, {"order", order}});
      std::vector<int64_t> want = Ids(full.Run({in}));
      for (uint32_t k = 1; k <= 62; ++k) {
        // The cut-off as set at load, or as this request's take count (a plan param
        // whose max is larger, or absent).
        Call part("sort", {{"key", std::string("score")}, {"order", order}});
        if (k % 2) {
          part.node.rows_read = k;
        } else {
          part.node.rows_read = k % 4 ? 0 : 200;
          part.node.rows_read_param = 1;
          part.params = {Value(std::string("x")), Value(int64_t{k})};
        }
        std::vector<int64_t> got = Ids(part.Run({in}));
        REQUIRE(got.size() == want.size());
        size_t n = std::min<size_t>(k, got.size());
        CHECK(std::vector<int64_t>(got.begin(), got.begin() + static_cast<ptrdiff_t>(n)) ==
              std::vector<int64_t>(want.begin(), want.begin() + static_cast<ptrdiff_t>(n)));
        std::sort(got.begin(), got.end());
        std::vector<int64_t> all = want;
        std::sort(all.begin(), all.end());
        CHECK(got == all);
      }
    }
  }

  TEST_CASE("take: the first rows; beyond the row count, all of them") {
    RowSet in = Scored({1, 2, 3});
    CHECK(Ids(Call("take", {{"count", int64_t{2}}}).Run({in})) == std::vector<int64_t>{1, 2});
    RowSet all = Call("take", {{"count", int64_t{10000}}}).Run({in});
    CHECK(Ids(all) == std::vector<int64_t>{1, 2, 3});
    CHECK(all.column("score") == in.column("score"));
  }

  TEST_CASE("concat: rows in input order, column union, missing cells null") {
    RowSet a = Scored({1.5, 2.5}).WithSelection({1});
    RowSet b;
    b.SetColumn("id", std::make_shared<Column>(Column::I64({7, 8})));
    b.SetColumn("author", std::make_shared<Column>(Column::I64({70, 80})));
    RowSet out = Call("concat").Run({a, b});
    REQUIRE(out.size() == 3);
    CHECK(Ids(out) == std::vector<int64_t>{2, 7, 8});
    REQUIRE(out.num_columns() == 3);
    CHECK(out.column_name(0) == "id");
    CHECK(out.column_name(1) == "score");
    CHECK(out.column_name(2) == "author");
    const Column* score = out.column("score");
    CHECK(score->valid(0));
    CHECK(score->f64[0] == 2.5);
    CHECK_FALSE(score->valid(1));
    CHECK_FALSE(score->valid(2));
    const Column* author = out.column("author");
    CHECK_FALSE(author->valid(0));
    CHECK(author->i64[2] == 80);
  }

  TEST_CASE("concat: a type conflict at run time is an error") {
    RowSet a = Scored({1});
    RowSet b;
    b.SetColumn("id", std::make_shared<Column>(Column::I64({2})));
    b.SetColumn("score", std::make_shared<Column>(Column::Str({"x"})));
    Call c("concat");
    auto r = c.spec->run_cpu(c.ctx, {a, b});
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find("'score'") != std::string::npos);
  }

  TEST_CASE("dedupe: the first row of each key, nulls as one key") {
    RowSet rs;
    rs.SetColumn("id", std::make_shared<Column>(Column::I64({1, 2, 3, 4, 5, 6})));
    rs.SetColumn("k", std::make_shared<Column>(
                          Column::Str({"a", "b", "a", std::nullopt, "b", std::nullopt})));
    RowSet by_k = Call("dedupe", {{"key", std::string("k")}}).Run({rs});
    CHECK(Ids(by_k) == std::vector<int64_t>{1, 2, 4});
    RowSet dup_ids;
    dup_ids.SetColumn("id", std::make_shared<Column>(Column::I64({9, 3, 9, 3, 1})));
    CHECK(Ids(Call("dedupe").Run({dup_ids})) == std::vector<int64_t>{9, 3, 1});
  }

  TEST_CASE("dedupe: many i64 and f64 keys (the flat set probes and wraps)") {
    // ids 0..2999, each key k = id % 1000 (and negative): the first 1000 rows stay.
    std::vector<int64_t> ids, keys;
    std::vector<double> fkeys;
    for (int64_t i = 0; i < 3000; ++i) {
      ids.push_back(i);
      keys.push_back((i % 1000) * (i % 2 ? -1 : 1) << 20);
      fkeys.push_back(i % 1000 == 0 ? (i % 2000 ? -0.0 : 0.0) : static_cast<double>(i % 1000));
    }
    RowSet rs;
    rs.SetColumn("id", std::make_shared<Column>(Column::I64(ids)));
    rs.SetColumn("k", std::make_shared<Column>(Column::I64(keys)));
    rs.SetColumn("f", std::make_shared<Column>(Column::F64(fkeys)));
    std::vector<int64_t> first(ids.begin(), ids.begin() + 1000);
    CHECK(Ids(Call("dedupe", {{"key", std::string("k")}}).Run({rs})) == first);
    CHECK(Ids(Call("dedupe", {{"key", std::string("f")}}).Run({rs})) == first);  // -0.0 == 0.0
  }

  TEST_CASE("fixed_source: ids 1..count and score = id") {
    RowSet out = Call("fixed_source", {{"count", int64_t{4}}}).Run({});
    CHECK(Ids(out) == std::vector<int64_t>{1, 2, 3, 4});
    CHECK(out.column("score")->f64[3] == 4.0);
  }

}  // TEST_SUITE

TEST_SUITE("column_builder") {
  TEST_CASE("gathers rows, nulls and strings into a new column") {
    Column s = Column::Str({"x", std::nullopt, "y"});
    ColumnBuilder b(ColumnType::kStr, 4);
    b.Append(s, Selection{2, 1, 0});
    b.AppendNulls(1);
    Column out = std::move(b).Finish();
    REQUIRE(out.size() == 4);
    CHECK(out.str(0) == "y");
    CHECK_FALSE(out.valid(1));
    CHECK(out.str(2) == "x");
    CHECK_FALSE(out.valid(3));
  }

}  // TEST_SUITE

// A sort of more than one block (4096 rows) sorts block by block and merges, polling its
// cancel token in between: same order as a stable sort, and a cancelled run stops.
TEST_CASE("sort of many blocks: stable order; cancelled: stops with an error") {
  std::vector<double> scores(20000);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<double>((i * 7919) % 101);
  std::vector<int64_t> want(scores.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int64_t>(i + 1);
  std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
    return scores[static_cast<size_t>(a - 1)] > scores[static_cast<size_t>(b - 1)];
  });
  Call sort("sort", {{"key", std::string("score")}});
  CHECK(Ids(sort.Run({Scored(scores)})) == want);

  CancelToken cancel;
  cancel.Cancel();
  sort.ctx.cancel = &cancel;
  auto r = sort.spec->run_cpu(sort.ctx, {Scored(scores)});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
}

// A full sort of many rows (a radix sort of order-preserving key images): the order of
// std::stable_sort for every key type and both orders, through a selection. Keys with
// negatives, extremes, infinities, subnormals, -0.0 tied with 0.0, NaN (last, like nulls)
// and many ties.
TEST_CASE("sort of many rows: the stable order for every key type") {
  const size_t n = 3000;
  std::vector<int64_t> ids(n), ints(n);
  std::vector<double> doubles(n);
  std::vector<uint8_t> bools(n);
  std::vector<std::optional<std::string>> strs(n);
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::denorm_min(),
                             -std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::lowest(),
                             std::nan("")};
  const int64_t int_specials[] = {0, -1, 1, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1};
  uint64_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids[i] = static_cast<int64_t>(i + 1);
    ints[i] = i % 5 == 0 ? int_specials[(x >> 33) % 7]
                         : static_cast<int64_t>(x >> 40) - (int64_t{1} << 23);
    doubles[i] = i % 4 == 0 ? specials[(x >> 33) % 9]
                            : static_cast<double>(static_cast<int64_t>(x >> 44) - 500000) / 64.0;
    bools[i] = (x >> 35) & 1;
    strs[i] = std::string(1 + (x >> 50) % 3, static_cast<char>('a' + (x >> 40) % 5));
  }
  std::vector<size_t> nulls;
  for (size_t i = 0; i < n; i += 17) nulls.push_back(i);
  auto with_nulls = [&](Column c) {
    for (size_t r : nulls) c.validity.SetNull(r, n);
    return std::make_shared<Column>(std::move(c));
  };
  RowSet rs;
  rs.SetColumn("id", std::make_shared<Column>(Column::I64(ids)));
  rs.SetColumn("i", with_nulls(Column::I64(ints)));
  rs.SetColumn("f", with_nulls(Column::F64(doubles)));
  rs.SetColumn("b", with_nulls(Column::Bool(bools)));
  rs.SetColumn("s", with_nulls(Column::Str(strs)));
  Selection sel;
  for (uint32_t r = 0; r < n; ++r)
    if (r % 7 != 3) sel.push_back(n - 1 - r);  // reversed, some rows left out
  for (const RowSet& in : {rs, rs.WithSelection(sel)}) {
    for (const char* name : {"i", "f", "b", "s"}) {
      for (bool desc : {true, false}) {
        CAPTURE(name);
        CAPTURE(desc);
        const Column& col = *in.column(name);
        auto has = [&](uint32_t r) {
          return col.valid(r) && !(col.type == ColumnType::kF64 && std::isnan(col.f64[r]));
        };
        auto less = [&](uint32_t a, uint32_t b) {
          switch (col.type) {
            case ColumnType::kI64: return col.i64[a] < col.i64[b];
            case ColumnType::kF64: return col.f64[a] < col.f64[b];
            case ColumnType::kBool: return col.b[a] < col.b[b];
            case ColumnType::kStr: return col.str(a) < col.str(b);
            case ColumnType::kVec: return false;  // no sort key
          }
          return false;
        };
        Selection want = in.LogicalRows();
        auto mid = std::stable_partition(want.begin(), want.end(), has);
        std::stable_sort(want.begin(), mid,
                         [&](uint32_t a, uint32_t b) { return desc ? less(b, a) : less(a, b); });
        int polls = 0;
        auto got = SortRows(in, col, desc, 0, [&] { return ++polls, false; });
        REQUIRE(got);
        CHECK(*got == want);
        CHECK(polls > 0);
      }
    }
  }
}

// A full sort buckets rows by the high bits of their key images from the highest bit in
// which keys differ, then orders each bucket (sort.cc BucketSort; RadixSort above
// kSortBlock rows): keys that differ only below those bits, in short runs (insertion)
// and in one large cluster under an outlier (std::sort), keep std::stable_sort's order,
// ties in input order, at both sizes.
TEST_CASE("sort of many rows: keys that tie in their high bits") {
  for (size_t n : {size_t{2000}, size_t{6000}}) {
    uint64_t x = 99;
    auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
    std::vector<std::pair<const char*, std::vector<double>>> shapes;
    auto shape = [&](const char* name, auto f) {
      std::vector<double> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = f(i);
      shapes.emplace_back(name, std::move(v));
    };
    // 1e300 sets the highest differing bit at the exponent's top; the others then tie in
    // their top 32 bits in groups of a few (levels) or all together (one cluster).
    shape("short runs", [&](size_t i) {
      if (i == 7) return 1e300;
      const double level = 1.0 + static_cast<double>(next() >> 55) / 512.0;
      return level + static_cast<double>((next() >> 60) % 8) * 0x1p-40;
    });
    shape("one cluster", [&](size_t i) {
      if (i == 7) return -1e300;
      return 1.0 + static_cast<double>(next() >> 44) * 0x1p-50;
    });
    shape("all tied", [](size_t) { return 3.5; });
    for (const auto& [name, scores] : shapes) {
      RowSet rs = Scored(scores);
      for (bool desc : {true, false}) {
        CAPTURE(n);
        CAPTURE(name);
        CAPTURE(desc);
        Selection want = rs.LogicalRows();
        std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) {
          return desc ? scores[a] > scores[b] : scores[a] < scores[b];
        });
        auto got = SortRows(rs, *rs.column("score"), desc, 0, {});
        REQUIRE(got);
        CHECK(*got == want);
      }
    }
  }
}

// Top-N (a sort read only by a take): the first rows are selected block by block, so a
// cancel check that says yes stops the sort at its first poll; let finish, the first
// rows are those of a stable sort.
TEST_CASE("sort top-N: stable first rows; cancelled: stops at the first poll") {
  std::vector<double> scores(100'000);
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<double>((i * 7919) % 1009);
  RowSet rs = Scored(scores, {3, 500, 70'000});
  Selection want = rs.LogicalRows();
  std::erase_if(want, [](uint32_t r) { return r == 3 || r == 500 || r == 70'000; });
  std::stable_sort(want.begin(), want.end(),
                   [&](uint32_t a, uint32_t b) { return scores[a] > scores[b]; });
  for (size_t first : {size_t{1}, size_t{20}, size_t{5000}, size_t{10'000}}) {
    CAPTURE(first);
    int polls = 0;
    auto all = SortRows(rs, *rs.column("score"), true, first, [&] { return ++polls, false; });
    REQUIRE(all);
    CHECK(polls > 5);
    CHECK(all->size() == scores.size());  // every row kept
    CHECK(Selection(all->begin(), all->begin() + static_cast<ptrdiff_t>(first)) ==
          Selection(want.begin(), want.begin() + static_cast<ptrdiff_t>(first)));
    Selection every = *all;
    std::sort(every.begin(), every.end());
    CHECK(every == rs.LogicalRows());
    polls = 0;
    CHECK_FALSE(SortRows(rs, *rs.column("score"), true, first, [&] { return ++polls >= 1; }));
    CHECK(polls == 1);
  }
}

// Strings are dictionary-encoded in order of first appearance: one code per distinct
// string, whatever its length (the short ones are hashed as one word), with embedded
// NUL bytes and the empty string distinct, across the dictionary's growth.
TEST_CASE("column builder: one code per distinct string, in order of first appearance") {
  std::vector<std::string> distinct = {"",
                                       std::string("a\0", 2),
                                       "a",
                                       "abcdefgh",
                                       "abcdefghi",
                                       std::string(8, '\0'),
                                       std::string(9, '\0')};
  // Differing only in a middle byte, at each length of a packed key.
  for (const char* s : {"ab", "abc", "axc", "abcd", "axcd", "abcde", "abxde", "abcdefg", "abcxefg",
                        "abcdefgh0", "abcdxfgh0"})
    distinct.push_back(s);
  for (int i = 0; i < 200; ++i) distinct.push_back("s" + std::to_string(i * 7919));
  ColumnBuilder b(ColumnType::kStr, 0);
  for (int pass = 0; pass < 3; ++pass)
    for (const std::string& s : distinct) b.AppendStr(s);
  Column col = std::move(b).Finish();
  REQUIRE(col.dict->values == distinct);
  for (size_t row = 0; row < col.str_code.size(); ++row) {
    CAPTURE(row);
    CHECK(col.str_code[row] == row % distinct.size());
    CHECK(col.str(static_cast<uint32_t>(row)) == distinct[row % distinct.size()]);
  }
}

// Top-N over the input shapes that slow a quickselect or break a careless partition
// (sorted, reversed, all equal, few distinct values, organ pipe, sawtooth, random): the
// first rows are always those of a stable sort, and every row is kept.
TEST_CASE("sort top-N: the first rows of a stable sort, whatever the input's shape") {
  const size_t n = 1500;
  std::vector<std::pair<const char*, std::vector<double>>> shapes;
  auto shape = [&](const char* name, auto f) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = f(i);
    shapes.emplace_back(name, std::move(v));
  };
  shape("sorted", [](size_t i) { return static_cast<double>(i); });
  shape("reversed", [](size_t i) { return static_cast<double>(n - i); });
  shape("all equal", [](size_t) { return 1.0; });
  shape("few distinct", [](size_t i) { return static_cast<double>((i * 7) % 3); });
  shape("organ pipe", [](size_t i) { return static_cast<double>(std::min(i, n - i)); });
  shape("sawtooth", [](size_t i) { return static_cast<double>(i % 37); });
  shape("random", [](size_t i) { return static_cast<double>((i * 2654435761u) % 1000003); });
  for (const auto& [name, scores] : shapes) {
    RowSet rs = Scored(scores);
    for (bool desc : {true, false}) {
      Selection want = rs.LogicalRows();
      std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) {
        return desc ? scores[a] > scores[b] : scores[a] < scores[b];
      });
      for (size_t first : {size_t{1}, size_t{2}, size_t{17}, size_t{30}, n / 2, n - 1}) {
        CAPTURE(name);
        CAPTURE(desc);
        CAPTURE(first);
        auto got = SortRows(rs, *rs.column("score"), desc, first, {});
        REQUIRE(got);
        CHECK(Selection(got->begin(), got->begin() + static_cast<ptrdiff_t>(first)) ==
              Selection(want.begin(), want.begin() + static_cast<ptrdiff_t>(first)));
        Selection every = *got;
        std::sort(every.begin(), every.end());
        CHECK(every == rs.LogicalRows());
      }
    }
  }
}

// vm and filter hand the task's token to the expression VM: cancelled, they return the
// cancelled error instead of a result.
TEST_CASE("vm and filter: cancelled runs return the cancelled error") {
  simdjson::dom::parser parser;
  ColumnTypes types{{{"id", ColumnType::kI64}, {"score", ColumnType::kF64}}};
  std::vector<double> scores(50'000, 1.0);
  CancelToken cancel;
  cancel.Cancel();

  Call vm("vm", {{"out_key", std::string("s2")}});
  auto e = CompileExpr(
      parser.parse(std::string(R"({"op": "*", "args": [{"key": "score"}, {"const": 2}]})")).value(),
      types, {}, "test");
  REQUIRE(e);
  vm.node.expr = *e;
  CHECK(vm.Run({Scored(scores)}).column("s2")->f64[7] == 2.0);
  vm.ctx.cancel = &cancel;
  auto r = vm.spec->run_cpu(vm.ctx, {Scored(scores)});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);

  Call filter("filter");
  auto p = CompilePred(
      parser
          .parse(std::string(
              R"({"op": "cmp", "cmp": ">", "lhs": {"key": "score"}, "rhs": {"const": 0}})"))
          .value(),
      types, {}, "test");
  REQUIRE(p);
  filter.node.pred = *p;
  CHECK(filter.Run({Scored(scores)}).size() == scores.size());
  filter.ctx.cancel = &cancel;
  r = filter.spec->run_cpu(filter.ctx, {Scored(scores)});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
}
