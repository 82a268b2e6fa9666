// The op catalogue (tasks/catalogue.h) against its copies: plans/ops.json (what the plan
// DSL and the console read) must be exactly `rankd ops --json`, and docs/plan.md must hold
// exactly `rankd ops --markdown` as its task table. On a failure, regenerate them:
//   build/src/server/rankd ops --json > plans/ops.json   (then npm --prefix plans run check)
//   build/src/server/rankd ops --markdown                 (paste into docs/plan.md, "Tasks")
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tasks/catalogue.h"

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
