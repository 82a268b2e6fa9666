// rankd check-plans [--plans DIR]: loads every plan of DIR as the server would; exits 1
// with the loader's message (file, node, field) if one is bad.
#include <cstdio>

#include "plan/loader.h"
#include "server/commands.h"
#include "tasks/task.h"

namespace rankd {

int CmdCheckPlans(const std::vector<std::string>& argv) {
  std::string dir = "plans";
  const Flag flags[] = {TextFlag("--plans", "DIR", {}, dir)};
  if (!ParseCommandFlags("check-plans", argv, flags)) return 2;
  auto set = LoadPlanDir(dir, TaskRegistry::Default());
  if (!set) {
    std::fprintf(stderr, "%s\n", set.error().message.c_str());
    return 1;
  }
  std::printf("ok: %zu plan(s) in %s\n", set->plans.size(), dir.c_str());
  return 0;
}

}  // namespace rankd
