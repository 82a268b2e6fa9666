// rankd check-plans [--plans DIR] [--max-model-bytes N]: loads every plan and model of
// DIR as the server would; exits 1 with the loader's message (file, node, field) if one
// is bad.
#include <cstdio>

#include "plan/loader.h"
#include "server/commands.h"
#include "tasks/task.h"

namespace rankd {

int CmdCheckPlans(const std::vector<std::string>& argv) {
  std::string dir = "plans";
  ModelLimits limits;
  const Flag flags[] = {
      TextFlag("--plans", "DIR", {}, dir),
      IntFlag("--max-model-bytes", "N", {}, limits.max_bytes, 1, int64_t{1} << 40),
  };
  if (!ParseCommandFlags("check-plans", argv, flags)) return 2;
  auto set = LoadPlanDir(dir, TaskRegistry::Default(), limits);
  if (!set) {
    std::fprintf(stderr, "%s\n", set.error().message.c_str());
    return 1;
  }
  std::printf("ok: %zu plan(s), %zu model(s) in %s\n", set->plans.size(), set->models.size(),
              dir.c_str());
  return 0;
}

}  // namespace rankd
