// What the plan and rank_json harnesses share: one started LoopRuntime (a loop and a
// CPU worker) for the whole fuzzing process (a run per input, no Redis), and row sets
// generated from a node's load-time column types, to run compiled expressions on values
// a plan's IO would have fetched. Harness thread only (the runtime has its own threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/loop_runtime.h"
#include "plan/plan.h"
#include "sched/scheduler.h"

namespace rankd::fuzz {

// Runs `plan` as a /rank request would, with no Redis configured: IO nodes fail with
// unavailable (optional ones degrade and the run goes on with their empty output).
// Plans with sleep or busy_cpu nodes are not run (they only wait, and would slow the
// fuzzer down); nullopt then.
inline std::optional<Result<RunResult>> RunWithoutRedis(const PlanPtr& plan, GivenParams params,
                                                        UserId user_id) {
  for (const PlanNode& n : plan->nodes)
    if (n.op == "sleep" || n.op == "busy_cpu") return std::nullopt;
  // Never stopped: it serves every input till the process exits. Work a run left behind
  // (a CPU job past the deadline) may still use the runtime and env after Run returns.
  static LoopRuntime* runtime = [] {
    auto* rt = new LoopRuntime("fuzz", /*cpu_threads=*/1);
    rt->Start();
    return rt;
  }();
  static const ExecEnv env{.loop = &runtime->loop(), .pool = &runtime->cpu()};
  RunRequest req{.plan = plan,
                 .user_id = user_id,
                 .params = std::move(params),
                 .deadline = Clock::now() + std::chrono::milliseconds(500),
                 .keep_for_log = plan->log.enabled,
                 .cancel = {}};
  return runtime->Run(RunPlan(env, std::move(req)));
}

// Six physical rows of every column in `types`, with nulls and extreme values, under a
// selection that drops and reorders rows (the shapes the expression VM must handle).
inline RowSet GeneratedRows(const ColumnTypes& types) {
  constexpr size_t kRows = 6;
  RowSet rows;
  for (const auto& [name, type, dim] : types.cols) {
    Column c;
    switch (type) {
      case ColumnType::kI64:
        c = Column::I64({0, -1, std::numeric_limits<int64_t>::max(),
                         std::numeric_limits<int64_t>::min(), 7, 42});
        break;
      case ColumnType::kF64:
        c = Column::F64({0.0, -1.5, 1e308, std::numeric_limits<double>::quiet_NaN(),
                         -std::numeric_limits<double>::infinity(), 0.25});
        break;
      case ColumnType::kStr: c = Column::Str({"", "US", std::nullopt, "a", "US", "zz"}); break;
      case ColumnType::kBool: c = Column::Bool({1, 0, 1, 1, 0, 0}); break;
      case ColumnType::kVec: {
        // Rows of a constant each, one of them all zeros (cosine's null).
        std::vector<std::optional<std::vector<float>>> v;
        for (size_t r = 0; r < kRows; ++r)
          v.emplace_back(std::vector<float>(dim, static_cast<float>(r) - 1.0f));
        c = Column::Vec(dim, v);
        break;
      }
    }
    c.validity.SetNull(4, kRows);
    rows.SetColumn(name, std::make_shared<const Column>(std::move(c)));
  }
  if (rows.column("id") == nullptr)
    rows.SetColumn("id", std::make_shared<const Column>(Column::I64({1, 2, 3, 4, 5, 6})));
  return rows.WithSelection({5, 3, 0, 2, 4});
}

}  // namespace rankd::fuzz
