// The async DAG scheduler: runs one request's plan on the shard's
// loop. Push-based: a node's completion decrements its successors' pending-input
// counters (by node index) and starts those that reach zero in the same loop turn, so
// the cost per node does not grow with the plan. Deadlines and node timeouts race the
// work (core/timeout.h, first wins, late completions counted); a required node's
// failure answers the request at once (fail-fast) while what is still in flight keeps
// the request's state alive until it ends; an optional node fails open.
//
// Threads: RunPlan is awaited on the loop thread of env.loop only (checked in debug and
// sanitizer builds); the request's nodes run there too, CPU jobs on env.pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/cancel.h"
#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "core/metric_value.h"
#include "core/thread_pool.h"
#include "data/row_set.h"
#include "plan/bind.h"
#include "plan/plan.h"
#include "tasks/task.h"

namespace rankd {

class RedisPools;
class AnnIndexes;  // src/ann/ann_set.h

// Where CPU tasks ran, for metrics. Written on the loop thread; any thread reads them.
struct CpuOffloadCounts {
  MetricValue<uint64_t> inline_runs;    // small inputs: on the loop
  MetricValue<uint64_t> pool_runs;      // large inputs and kCpuPool tasks: on a CPU worker
  MetricValue<uint64_t> queue_rejects;  // refused: the CPU queue was full (ThreadPool::TrySubmit)
};

// What a shard gives every request it runs.
struct ExecEnv {
  EventLoop* loop = nullptr;
  ThreadPool* pool = nullptr;
  RedisPools* redis = nullptr;
  ShardCache* cache = nullptr;      // the shard's; nullptr when the process has no cache
  const AnnIndexes* ann = nullptr;  // the process's indexes; nullptr: none (a search fails)
  uint64_t node_timeout_ms = 0;     // default per-node timeout (--node-timeout-ms); 0 = none
  size_t inline_cpu_rows =
      kInlineCpuRows;                    // kCpu tasks with at most this many input rows run inline
  CpuOffloadCounts* offloads = nullptr;  // optional
  // Optional: CPU jobs that did not start, or stopped early, because they were cancelled.
  // Incremented by CPU workers (hence atomic); owned by the shard.
  std::atomic<uint64_t>* cpu_cancelled = nullptr;
};

struct RunRequest {
  PlanPtr plan;
  UserId user_id;  // of the plan's user_id type (Plan::user_id_type)
  GivenParams params;
  Deadline deadline;  // absolute; none = no request deadline
  // The request's time, Unix ms (when it was read): the `now` of counters' windows
  // (TaskContext::now_ms). 0: the wall clock when the run starts.
  int64_t ts_ms = 0;
  // The request is recorded (served log): RunResult keeps the outputs of
  // plan->log.kept and the effective parameters.
  bool keep_for_log = false;
  // Optional: cancelling it cancels the run's work as the answer does (a shadow run
  // shed under overload). Kept alive by the run.
  std::shared_ptr<const CancelToken> cancel;
  // The plan's quality factor for this run (plan/plan.h, PlanQuality): below 1, the
  // quality block's params are scaled by it. Ignored by plans without the block.
  double quality = 1.0;
};

enum class NodeStatus : uint8_t { kSkipped, kOk, kFailed, kTimeout };
std::string_view NodeStatusName(NodeStatus s);  // "ok", "failed", "timeout", "skipped"

struct NodeStat {
  NodeStatus status = NodeStatus::kSkipped;
  size_t rows = 0;
  int64_t start_us = 0;  // from the request's start
  int64_t took_us = 0;
  CacheLookups cache;  // nodes that read through the cache
  // `model` nodes: rows left without a score (a missing input without fill, a bad table
  // index: docs/models.md).
  uint64_t null_rows = 0;
};

struct RunResult {
  PlanPtr plan;
  UserId user_id;
  RowSet output;                       // the output node's rows
  std::vector<uint32_t> degraded;      // optional nodes that failed or timed out, by index
  std::vector<Error> degraded_errors;  // why, in the same order (for the log)
  PoolVector<NodeStat> nodes;          // by node index
  int64_t took_us = 0;
  double quality = -1;  // the run's quality factor; < 0: the plan has no quality block
  // keep_for_log only: the outputs of plan->log.kept (same order; an unrun node's is
  // empty) and the request's parameter values, defaults filled in.
  std::vector<RowSet> kept;
  ParamValues params;
};

// Runs req.plan. Errors: invalid_param (params, task bounds), deadline_exceeded (the
// deadline or a required node's timeout), or the failing required node's own error,
// its message prefixed with "node '<id>' (<op>): ".
// `live` is kept alive until every piece of the request's work has ended, including CPU
// jobs still queued or running after the answer (so its destructor may run on a CPU
// worker): the shard counts requests for admission with it.
Coro<Result<RunResult>> RunPlan(const ExecEnv& env, RunRequest req,
                                std::shared_ptr<void> live = {});

}  // namespace rankd
