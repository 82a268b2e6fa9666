// rankd ops --json | --markdown: prints the op catalogue (tasks/catalogue.h), every op
// with its inputs, parameters, family, added columns and doc. --json is what plans/ops.json
// holds (the plan DSL and the console read that copy); --markdown is docs/plan.md's task
// table. Regenerate both after changing an op: `rankd ops --json > plans/ops.json`.
#include <cstdio>

#include "cli/commands.h"
#include "tasks/catalogue.h"

namespace rankd {

int CmdOps(const std::vector<std::string>& args) {
  // The test-only ops are listed too (marked): the DSL has methods for them.
  const TaskRegistry& r = TaskRegistry::WithTestOps();
  if (args.size() == 1 && args[0] == "--json") {
    std::fputs(CatalogueJson(r).c_str(), stdout);
    return 0;
  }
  if (args.size() == 1 && args[0] == "--markdown") {
    std::fputs(CatalogueMarkdown(r).c_str(), stdout);
    return 0;
  }
  std::fprintf(stderr, "usage: rankd ops --json | --markdown\n");
  return 2;
}

const char kOpsSynopsis[] = "--json | --markdown  (the op catalogue)";

}  // namespace rankd
