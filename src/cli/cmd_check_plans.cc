// rankd check-plans [--plans DIR] [--max-model-bytes N] [--served-log NAME=URL]...
// [--enable-test-ops]: loads every plan and model of DIR as the server would (given the
// same flags); exits 1 with the loader's message (file, node, field) if one is bad.
// Given --served-log (the server's sinks), a plan whose log names another sink is bad
// too; without it, sink names are not checked (a server counts such records as
// dropped_no_sink).
#include <cstdio>

#include "cli/commands.h"
#include "plan/loader.h"
#include "served/sink_config.h"
#include "tasks/task.h"

namespace rankd {

int CmdCheckPlans(const std::vector<std::string>& argv) {
  PlanDirFlags plan_dir;
  std::vector<std::string> sink_flags;
  std::vector<Flag> flags;
  plan_dir.AddRows(flags);
  flags.push_back(RepeatedFlag("--served-log", "NAME=URL", {}, sink_flags));
  if (!ParseCommandFlags("check-plans", argv, flags)) return 2;
  std::vector<SinkConfig> sinks;
  for (const auto& v : sink_flags) {
    auto c = ParseSinkFlag(v);
    if (!c) {
      std::fprintf(stderr, "rankd: %s\n", c.error().message.c_str());
      return 2;
    }
    sinks.push_back(std::move(*c));
  }
  auto set = plan_dir.Load();
  if (!set) {
    std::fprintf(stderr, "%s\n", set.error().message.c_str());
    return 1;
  }
  if (!sinks.empty()) {
    for (const auto& [name, plan] : set->plans) {
      if (!plan->log.enabled) continue;
      bool known = false;
      std::string names;
      for (const SinkConfig& c : sinks) {
        known |= c.name == plan->log.sink;
        names += (names.empty() ? "" : ", ") + c.name;
      }
      if (!known) {
        std::fprintf(stderr, "%s: log.sink: '%s' is not one of the --served-log sinks (%s)\n",
                     plan->file.c_str(), plan->log.sink.c_str(), names.c_str());
        return 1;
      }
    }
  }
  std::printf("ok: %zu plan(s), %zu model(s) in %s\n", set->plans.size(), set->models.size(),
              plan_dir.dir.c_str());
  return 0;
}

const char kCheckPlansSynopsis[] = "[--plans DIR] [--served-log NAME=URL]... [--enable-test-ops]";

}  // namespace rankd
