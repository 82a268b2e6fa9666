// Test helpers for the engine: plans from inline JSON, and a started ShardRuntime (loop +
// CPU pool) on which to run them synchronously.
//
// Threads: the test's own thread.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "plan/loader.h"
#include "sched/scheduler.h"
#include "sched/shard_runtime.h"
#include "tasks/task.h"

namespace rankd::test {

// A whole plan document around `nodes` (a JSON array body) with output node `out`.
inline std::string PlanDoc(const std::string& nodes, const std::string& out,
                           const std::string& params = "{}", const std::string& tables = "") {
  return R"({"schema_version": 1, "name": "t", "params": )" + params + R"(, "nodes": [)" + nodes +
         "], " + tables + R"("output": {"node": ")" + out + R"("}})";
}

inline PlanPtr MustLoad(const std::string& json) {
  auto p = LoadPlanText(json, "test.plan.json", TaskRegistry::WithTestOps());
  if (!p) FAIL("plan did not load: " << p.error().message);
  return *p;
}

struct Engine {
  ShardRuntime runtime{"test", /*cpu_threads=*/2};
  EventLoop& loop = runtime.loop();
  ThreadPool& pool = runtime.cpu();
  ExecEnv& env = runtime.env();
  Engine() { runtime.Start(); }
  Result<RunResult> Run(const PlanPtr& plan, int64_t deadline_ms = 0, GivenParams params = {}) {
    RunRequest req{.plan = plan,
                   .user_id = 1,
                   .params = std::move(params),
                   .deadline = std::nullopt,
                   .keep_for_log = false,
                   .cancel = {}};
    if (deadline_ms > 0) req.deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
    if (deadline_ms < 0) req.deadline = Clock::now() - std::chrono::milliseconds(-deadline_ms);
    return runtime.Run(RunPlan(env, std::move(req)));
  }
  Result<RunResult> Run(const std::string& json, int64_t deadline_ms = 0) {
    return Run(MustLoad(json), deadline_ms);
  }
};

}  // namespace rankd::test
