// The task interface: a TaskSpec per op (its load-time OpSchema plus how it runs), the
// per-node TaskContext a run sees, and the TaskRegistry that maps op names to specs.
//
// Threads: a registry is built once at start-up and then only read (any thread).
// Async runs execute on the request's loop thread; CPU runs on the loop (small inputs)
// or on a CPU worker (large ones), never both at once.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/cancel.h"
#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "core/thread_pool.h"
#include "data/row_set.h"
#include "plan/op_schema.h"
#include "plan/plan.h"

namespace rankd {

class RedisPools;  // src/redis/shard_clients.h
class ShardCache;  // src/cache/shard_cache.h
struct AnnSet;     // src/ann/ann_set.h

// What a node that reads through the shard's cache reports (explain's cache_hits and
// cache_misses): keys served from the cache, keys asked of Redis.
struct CacheLookups {
  bool used = false;  // the node has cache: true and the process has a cache
  uint64_t hits = 0;
  uint64_t misses = 0;
};

// What one node run sees. Lives in the request's state and stays valid until the run
// finishes, even when the scheduler gave up on it (timeout, fail-fast): a run may use
// it freely across suspensions.
struct TaskContext {
  EventLoop* loop = nullptr;
  ThreadPool* pool = nullptr;
  RedisPools* redis = nullptr;            // nullptr when the process has no Redis (tests, `run`)
  ShardCache* cache = nullptr;            // the shard's cache; nullptr when the process has none
  CacheLookups* cache_lookups = nullptr;  // where this run reports them; may be null
  // Where a `model` run reports the rows it left without a score; may be null. Written
  // once, as the run returns its result (atomic: a run the request gave up on may still be
  // writing it when the loop reads it).
  std::atomic<uint64_t>* null_rows = nullptr;
  IdRef user_id;                   // its str view points into the request's state
  int64_t now_ms = 0;              // the request's time, Unix ms (counters' windows)
  const PlanNode* node = nullptr;  // id, op, compiled expr/pred, output types
  const Schema* schema = nullptr;  // the plan's (Plan::schema)
  // The process's indexes as the request found them when it started (plans that search
  // one: Plan::reads_indexes; else null). The request holds them until it ends.
  const AnnSet* ann = nullptr;
  const TaskArgs* args = nullptr;       // this request's task parameters, resolved and checked
  const ParamValues* params = nullptr;  // this request's plan parameters, by decl index
  Deadline request_deadline;            // the whole request's
  Deadline deadline;                    // this node's: min(request, start + node timeout)
  // Set once nobody needs this run's result (the request answered, the node's timeout
  // race was lost). Long CPU runs poll cancelled() at least every millisecond of work
  // and return early; their result is discarded anyway.
  const CancelToken* cancel = nullptr;
  bool cancelled() const { return cancel && cancel->cancelled(); }
};

// What a run returns when it stopped because cancelled() said so.
inline Error CancelledError(std::string_view op) {
  return Error::Unavailable(std::string(op) + ": cancelled (the request no longer needs it)");
}

// An IO-style run: a coroutine on the loop thread (Redis, timers).
using AsyncRunFn = std::function<Coro<Result<RowSet>>(const TaskContext&, RowSets)>;
// What long CPU work polls between blocks (plan/expr.h CancelCheck): ctx.cancelled(),
// or nothing to poll when the run has no token.
inline CancelCheck CancelCheckOf(const TaskContext& ctx) {
  if (!ctx.cancel) return {};
  return [&ctx] { return ctx.cancelled(); };
}

// The column of `rs` named by the node's `key` parameter (sort, dedupe, diversify, cap). Its
// absence is a bug (the plan was typed at load): an internal error naming `op`.
inline Result<const Column*> KeyColumn(const TaskContext& ctx, const RowSet& rs,
                                       std::string_view op) {
  const std::string& key = ctx.args->Str("key");
  const Column* col = rs.column(key);
  if (!col) return Fail(Error::Internal(std::string(op) + ": no column '" + key + "'"));
  return col;
}

// A CPU run: a plain function, inline on the loop or on a CPU worker.
using CpuRunFn = std::function<Result<RowSet>(const TaskContext&, RowSets)>;

enum class RunKind : uint8_t {
  kAsync,    // run_async on the loop thread
  kCpu,      // run_cpu inline when the input is small, else on the pool
  kCpuPool,  // run_cpu always on the pool (busy_cpu)
};

// Inputs of at most this many rows (summed over inputs, times PlanNode::row_cost) run
// kCpu tasks inline on the loop: below it the hop to a worker and back costs more than
// the work. See docs/engine.md for how it was measured.
inline constexpr size_t kInlineCpuRows = 2048;

struct TaskSpec : OpSchema {
  RunKind kind = RunKind::kCpu;
  AsyncRunFn run_async;  // kAsync
  CpuRunFn run_cpu;      // kCpu, kCpuPool

  // The spec of an op taking min_inputs..max_inputs inputs (UINT32_MAX: unbounded).
  static TaskSpec Cpu(std::string op, uint32_t min_inputs, uint32_t max_inputs,
                      std::vector<TaskParamSpec> params, SchemaFn output, CpuRunFn run,
                      RunKind kind = RunKind::kCpu);
  static TaskSpec Async(std::string op, uint32_t min_inputs, uint32_t max_inputs,
                        std::vector<TaskParamSpec> params, SchemaFn output, AsyncRunFn run);

  // The catalogue entry (OpSchema's doc, family_types, keeps_input, adds):
  // TaskSpec::Cpu(...).Doc("...").Adds({AddedColumn::ByParam("out_key", ...)}).
  TaskSpec Doc(std::string line) &&;
  // An IO op: reads a family of one of `types` (its `family` param), keyed by the input's
  // ids or, with by_user, by the request's user_id.
  TaskSpec Reads(std::vector<FamilyType> types, bool by_user = false) &&;
  // It searches an index of the schema (OpSchema::reads_index).
  TaskSpec ReadsIndex() &&;
  TaskSpec Adds(std::vector<AddedColumn> columns) &&;
  // The output holds only the added columns, not the input's.
  TaskSpec Replaces(std::vector<AddedColumn> columns) &&;
  TaskSpec TestOnly() &&;
};

class TaskRegistry : public OpCatalog {
 public:
  // `test_ops_enabled`: whether plans loaded against it may use the test-only ops.
  explicit TaskRegistry(bool test_ops_enabled = false) : test_ops_enabled_(test_ops_enabled) {}
  TaskRegistry(const TaskRegistry&) = delete;  // plans point into it
  TaskRegistry& operator=(const TaskRegistry&) = delete;

  // REQUIRES: no spec of that op yet.
  void Add(TaskSpec spec);

  const TaskSpec* Find(std::string_view op) const;
  const OpSchema* FindOp(std::string_view op) const override { return Find(op); }
  bool test_ops_enabled() const override { return test_ops_enabled_; }
  std::vector<std::string> ops() const;

  // Every built-in task (each op file's registration, tasks/meson.build), built on first use. Both
  // hold the same ops; Default() refuses a plan that uses a test-only one (production),
  // WithTestOps() loads it (--enable-test-ops, unit tests, fuzzers, benchmarks).
  static const TaskRegistry& Default();
  static const TaskRegistry& WithTestOps();

 private:
  bool test_ops_enabled_;
  std::deque<TaskSpec> specs_;  // stable addresses: plans point at them
  std::unordered_map<std::string, TaskSpec*> by_op_;
};

// The spec behind a node of a plan loaded against a TaskRegistry.
inline const TaskSpec& SpecOf(const PlanNode& n) { return *static_cast<const TaskSpec*>(n.schema); }

// --- registration ----------------------------------------------------------------------
// Every op file `src/tasks/<stem>.cc` listed in tasks/meson.build's `op_files` defines
// `void RegisterOps_<stem>(TaskRegistry& r)`, which adds its ops; the build generates the
// list that calls them all (op_list.cc.in), so adding an op edits no shared file.
void RegisterBuiltinOps(TaskRegistry& r);  // op_list.cc (generated)

}  // namespace rankd
