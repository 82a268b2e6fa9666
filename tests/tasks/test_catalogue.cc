// The op catalogue (tasks/catalogue.h) against its copies: plans/ops.json (what the plan
// DSL and the console read) must be exactly `rankd ops --json`, and docs/plan.md must hold
// exactly `rankd ops --markdown` as its task table. On a failure, regenerate them:
//   build/src/cli/rankd ops --json > plans/ops.json   (then npm --prefix plans run check)
//   build/src/cli/rankd ops --markdown                 (paste into docs/plan.md, "Tasks")
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tasks/catalogue.h"
#include "tasks/schemas.h"

namespace catalogue_test {

std::string ReadSource(const std::string& path) {
  const char* env = std::getenv("RANKD_SOURCE_ROOT");
  REQUIRE_MESSAGE(env, "RANKD_SOURCE_ROOT is not set (meson test sets it)");
  std::ifstream in(std::string(env) + "/" + path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << env << "/" << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("plans/ops.json is the binary's catalogue") {
  const std::string want = rankd::CatalogueJson(rankd::TaskRegistry::WithTestOps());
  CHECK_MESSAGE(ReadSource("plans/ops.json") == want,
                "plans/ops.json differs from `rankd ops --json`; regenerate it");
}

TEST_CASE("docs/plan.md's task table is the catalogue's") {
  const std::string table = rankd::CatalogueMarkdown(rankd::TaskRegistry::WithTestOps());
  CHECK_MESSAGE(ReadSource("docs/plan.md").find(table) != std::string::npos,
                "docs/plan.md's task table differs from `rankd ops --markdown`:\n"
                    << table);
}

TEST_CASE("every op has a doc line and every added column names a declared param") {
  const rankd::TaskRegistry& r = rankd::TaskRegistry::WithTestOps();
  for (const std::string& op : r.ops()) {
    const rankd::TaskSpec& s = *r.Find(op);
    CHECK_MESSAGE(!s.doc.empty(), op);
    for (const rankd::AddedColumn& c : s.adds) {
      if (!c.name_param) continue;
      bool declared = false;
      for (const auto& p : s.params) declared |= p.name == c.name;
      CHECK_MESSAGE(declared, op << ": " << c.name);
    }
  }
}

}  // namespace catalogue_test

namespace catalogue_test {

// A literal of `p` that its op accepts: a column of `input` of a type it reads, "out" for
// a column it writes, the lower bound of a number, the first allowed string.
rankd::Value SampleArg(const rankd::TaskParamSpec& p, const rankd::ColumnTypes& input) {
  using rankd::ParamKind;
  if (p.column == rankd::TaskParamSpec::Column::kWrites) return std::string("out");
  if (p.column == rankd::TaskParamSpec::Column::kReads) {
    for (const auto& [name, type, dim] : input.cols)
      if (p.column_types.empty() || std::ranges::find(p.column_types, type) != p.column_types.end())
        return name;
  }
  switch (p.kind) {
    case ParamKind::kI64: return p.min.value_or(1);
    case ParamKind::kF64: return p.min_f64.value_or(1.0);
    case ParamKind::kBool: return false;
    case ParamKind::kStr: return p.allowed.empty() ? std::string() : p.allowed[0];
    default: return p.default_value;
  }
}

TEST_CASE("the columns an op's entry states are those its output function gives") {
  // Ops whose params are plain values and columns (no family, expression, predicate or
  // model to bind): their hand-written output functions against SchemaAsDeclared.
  const rankd::TaskRegistry& r = rankd::TaskRegistry::WithTestOps();
  rankd::ColumnTypes input;
  input.cols = {{"id", rankd::ColumnType::kI64},
                {"k", rankd::ColumnType::kI64},
                {"score", rankd::ColumnType::kF64},
                {"s", rankd::ColumnType::kStr},
                {"b", rankd::ColumnType::kBool}};
  int checked = 0;
  for (const std::string& op : r.ops()) {
    const rankd::TaskSpec& s = *r.Find(op);
    bool plain = s.family_types.empty() && s.max_inputs <= 1;
    for (const auto& p : s.params)
      plain &= p.kind != rankd::ParamKind::kExprId && p.kind != rankd::ParamKind::kPredId &&
               p.kind != rankd::ParamKind::kModel;
    if (!plain) continue;
    rankd::TaskArgs args(&s.params);
    for (size_t i = 0; i < s.params.size(); ++i) args.at(i) = SampleArg(s.params[i], input);
    for (uint32_t n : {0u, 1u}) {  // with no input and with one, where the op takes them
      if (n < s.min_inputs || n > s.max_inputs) continue;
      std::vector<rankd::ColumnTypes> inputs(n, input);
      std::vector<std::string_view> ids(n, "in");
      rankd::SchemaArgs a{inputs, ids, args, nullptr, nullptr, &s};
      auto given = s.output(a);
      auto declared = rankd::SchemaAsDeclared(a);
      REQUIRE_MESSAGE(given.has_value(), op << ": " << given.error().message);
      REQUIRE_MESSAGE(declared.has_value(), op << ": " << declared.error().message);
      CHECK_MESSAGE(given->cols == declared->cols, op << " with " << n << " input(s)");
      ++checked;
    }
  }
  CHECK(checked >= 10);  // sort, take, dedupe, diversify, cap, fixed_source, sleep, busy_cpu, ...
}

}  // namespace catalogue_test
