#include "sched/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <memory_resource>
#include <new>

#include "ann/ann_set.h"
#include "core/awaitables.h"
#include "core/block_pool.h"
#include "core/timeout.h"
#include "tasks/task.h"

namespace rankd {

std::string_view NodeStatusName(NodeStatus s) {
  switch (s) {
    case NodeStatus::kSkipped: return "skipped";
    case NodeStatus::kOk: return "ok";
    case NodeStatus::kFailed: return "failed";
    case NodeStatus::kTimeout: return "timeout";
  }
  return "skipped";
}

namespace {

// One request's state. Loop thread only, except that a CPU worker reads plan, ctxs and
// its own inputs (never written while it runs). Owned by shared_ptr: RunPlan and every
// node run still in flight hold it, so it is freed only when nothing can touch it.
//
// Its per-node arrays live in `arena`, which starts in the state's own inline buffer, and
// the state itself comes from the thread's block pool (core/block_pool.h): a plan of up
// to a few dozen nodes costs the heap nothing per request once the shard is warm. The
// arena is released with the state, in one step.
struct RequestState {
  // Room for the arrays of a plan of ~20 nodes; larger plans spill to the heap.
  static constexpr size_t kInlineBytes = 4096;

  explicit RequestState(size_t nodes)
      : arena(inline_bytes, sizeof inline_bytes),
        node_cancel(MakeTokens(arena, nodes)),
        resolved(&arena),
        ctxs(nodes, &arena),
        pending(nodes, &arena),
        consumers(nodes, &arena),
        outputs(nodes, &arena),
        stats(nodes, &arena),
        null_rows(nodes, &arena),
        ready(&arena),
        degraded(&arena) {}

  // Tokens are trivially destructible: the arena's release is their end.
  static CancelToken* MakeTokens(std::pmr::memory_resource& r, size_t n) {
    auto* t = static_cast<CancelToken*>(r.allocate(n * sizeof(CancelToken), alignof(CancelToken)));
    for (size_t i = 0; i < n; ++i) new (&t[i]) CancelToken;
    return t;
  }

  alignas(std::max_align_t) std::byte inline_bytes[kInlineBytes];
  std::pmr::monotonic_buffer_resource arena;  // before every member that allocates in it
  ExecEnv env;
  PlanPtr plan;
  AnnSetPtr ann;  // Plan::reads_indexes: the indexes the run started with (TaskContext::ann)
  std::shared_ptr<void> live;                       // RunPlan's `live`: released with the state
  CancelToken cancel;                               // the request's: set when it answers
  std::shared_ptr<const CancelToken> outer_cancel;  // RunRequest::cancel: cancel's parent
  CancelToken* node_cancel;                         // by node index; parent: cancel
  ParamValues values;
  std::pmr::vector<TaskArgs> resolved;   // args of nodes with {"param"} refs; reserved, stable
  std::pmr::vector<TaskContext> ctxs;    // by node index
  UserId user_id;                        // what ctxs' user_id views
  std::pmr::vector<uint32_t> pending;    // inputs not yet produced
  std::pmr::vector<uint32_t> consumers;  // successor edges that have not read the output yet
  std::pmr::vector<RowSet> outputs;
  bool keep_for_log = false;  // outputs of plan->log.kept are copied to readers, not moved
  std::pmr::vector<NodeStat> stats;
  // What a `model` run on a CPU worker reports (TaskContext::null_rows), taken into stats
  // by Complete on the loop: atomic, as a run the request gave up on may still write it.
  std::pmr::vector<std::atomic<uint64_t>> null_rows;
  std::pmr::vector<uint32_t> ready;  // FIFO from ready_head
  size_t ready_head = 0;
  bool running_ready = false;
  bool done = false;
  std::optional<Error> error;
  std::pmr::vector<uint32_t> degraded;
  std::vector<Error> degraded_errors;
  TimePoint start;
  Deadline deadline;
  std::coroutine_handle<> waiter;
};
static_assert(std::is_trivially_destructible_v<CancelToken>);
using StatePtr = std::shared_ptr<RequestState>;

int64_t Micros(TimePoint from, TimePoint to) {
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

RowSet EmptyOf(const ColumnTypes& types) {
  RowSet rs;
  for (const auto& [name, type, dim] : types.cols)
    rs.SetColumn(name, Share(Column::Nulls(type, 0, dim)));
  if (rs.num_columns() == 0) return RowSet::Empty();
  return rs;
}

void Finish(RequestState& st) {
  st.done = true;
  st.cancel.Cancel();  // the answer is decided: work still running or queued may stop
  // Resume RunPlan later in this turn: never inside a node's own frame.
  if (st.waiter) st.env.loop->Defer(std::exchange(st.waiter, {}));
}

// The `from` values that read node idx (Plan::from_values): its first row's cells, or
// nulls when it has none. Written once, before any node that reads them can start (they
// are its successors), so CPU workers running other nodes never see them change.
void BindFromValues(RequestState& st, uint32_t idx, const RowSet& out) {
  const Plan& plan = *st.plan;
  const size_t base = plan.params.decls.size();
  for (size_t k = 0; k < plan.from_values.size(); ++k) {
    const FromValue& f = plan.from_values[k];
    if (f.node != idx) continue;
    const Column* col = out.column(f.column);
    st.values[base + k] = col && out.size() > 0 ? col->Get(out.row(0)) : Value{};
  }
}

void Complete(RequestState& st, uint32_t idx, Result<RowSet> r) {
  const PlanNode& node = st.plan->nodes[idx];
  NodeStat& stat = st.stats[idx];
  stat.took_us = Micros(st.start, Clock::now()) - stat.start_us;
  bool timed_out = !r && r.error().code == ErrorCode::kDeadlineExceeded;
  stat.status = r ? NodeStatus::kOk : timed_out ? NodeStatus::kTimeout : NodeStatus::kFailed;
  stat.null_rows = st.null_rows[idx].load(std::memory_order_relaxed);
  if (st.done) return;  // the request was answered already (fail-fast): nothing to do
  RowSet out;
  if (r) {
    out = std::move(*r);
  } else if (node.optional) {
    st.degraded.push_back(idx);
    st.degraded_errors.push_back(std::move(r.error()));
    out = EmptyOf(node.out_types);
  } else {
    Error e = std::move(r.error());
    e.message = "node '" + node.id + "' (" + node.op + "): " + e.message;
    st.error = std::move(e);
    Finish(st);
    return;
  }
  stat.rows = out.size();
  if (!st.plan->from_values.empty()) BindFromValues(st, idx, out);
  st.outputs[idx] = std::move(out);
  if (idx == st.plan->output) {  // every node reaches the output: it is the last
    Finish(st);
    return;
  }
  for (uint32_t s : node.successors)
    if (--st.pending[s] == 0) st.ready.push_back(s);
}

bool KeptForLog(const RequestState& st, uint32_t idx) {
  if (!st.keep_for_log) return false;
  const auto& kept = st.plan->log.kept;
  return std::find(kept.begin(), kept.end(), idx) != kept.end();
}

// Inputs in listed order; the last consumer of an output takes it instead of copying.
RowSets GatherInputs(RequestState& st, const PlanNode& node) {
  RowSets inputs;
  inputs.reserve(node.inputs.size());
  for (uint32_t in : node.inputs) {
    if (--st.consumers[in] == 0 && in != st.plan->output && !KeptForLog(st, in))
      inputs.push_back(std::move(st.outputs[in]));
    else
      inputs.push_back(st.outputs[in]);
  }
  return inputs;
}

Result<RowSet> RunCpuCaught(const TaskSpec& spec, const TaskContext& ctx, RowSets in) {
  try {
    return spec.run_cpu(ctx, std::move(in));
  } catch (const std::exception& e) {
    return Fail(Error::Internal(std::string("uncaught exception: ") + e.what()));
  }
}

// Keeps the request state alive for as long as an abandoned IO run goes on.
Coro<Result<RowSet>> KeepingState(StatePtr, Coro<Result<RowSet>> t) {
  co_return co_await std::move(t);
}

void RunReady(const StatePtr& st);

// A node that suspends (IO, timers) or goes to the CPU pool.
Coro<void> RunSuspending(StatePtr st, uint32_t idx, RowSets inputs) {
  EventLoop& loop = *st->env.loop;
  WorkGate::Hold hold = loop.HoldWork();
  const TaskSpec& spec = SpecOf(st->plan->nodes[idx]);
  const TaskContext& ctx = st->ctxs[idx];
  Result<RowSet> r = Fail(Error::Internal("not run"));
  try {
    if (spec.kind == RunKind::kAsync) {
      // Named tasks, not temporaries inside co_await: GCC 12 mishandles those.
      if (ctx.deadline) {
        Coro<Result<RowSet>> kept = KeepingState(st, spec.run_async(ctx, std::move(inputs)));
        r = co_await AsyncWithTimeout<Result<RowSet>>(loop, std::move(kept),
                                                      ms_until(*ctx.deadline));
      } else {
        Coro<Result<RowSet>> run = spec.run_async(ctx, std::move(inputs));
        r = co_await std::move(run);
      }
    } else {
      auto work = [st, idx, in = std::move(inputs)]() mutable -> Result<RowSet> {
        const TaskContext& c = st->ctxs[idx];
        const TaskSpec& s = SpecOf(st->plan->nodes[idx]);
        // A job whose request has answered (or whose race was lost) while it queued
        // does not start.
        if (c.cancelled()) {
          if (st->env.cpu_cancelled) st->env.cpu_cancelled->fetch_add(1, std::memory_order_relaxed);
          return Fail(CancelledError(s.op));
        }
        Result<RowSet> out = RunCpuCaught(s, c, std::move(in));
        if (!out && c.cancelled() && st->env.cpu_cancelled)
          st->env.cpu_cancelled->fetch_add(1, std::memory_order_relaxed);
        return out;
      };
      if (ctx.deadline)
        r = co_await OffloadCpuWithTimeout(loop, *st->env.pool, ms_until(*ctx.deadline),
                                           std::move(work));
      else
        r = co_await OffloadCpu(loop, *st->env.pool, std::move(work));
      if (!r && r.error().code == ErrorCode::kUnavailable && !ctx.cancelled() && st->env.offloads)
        ++st->env.offloads->queue_rejects;
    }
  } catch (const std::exception& e) {
    r = Fail(Error::Internal(std::string("uncaught exception: ") + e.what()));
  }
  // The race is over, whoever won: work that is still running has lost it.
  st->node_cancel[idx].Cancel();
  Complete(*st, idx, std::move(r));
  RunReady(st);
}

void StartNode(const StatePtr& st, uint32_t idx) {
  RequestState& s = *st;
  const PlanNode& node = s.plan->nodes[idx];
  TimePoint now = Clock::now();
  s.stats[idx].start_us = Micros(s.start, now);
  if (deadline_exceeded(s.deadline, now)) {
    Complete(s, idx,
             Fail(Error::DeadlineExceeded("the request deadline passed before it started")));
    return;
  }
  TaskContext& ctx = s.ctxs[idx];
  uint64_t timeout = node.timeout_ms.value_or(s.env.node_timeout_ms);
  ctx.deadline = ComputeEffectiveDeadline(
      now, s.deadline, timeout ? std::optional(std::chrono::milliseconds(timeout)) : std::nullopt);
  RowSets inputs = GatherInputs(s, node);
  const TaskSpec& spec = SpecOf(node);
  if (spec.kind == RunKind::kCpu) {
    size_t rows = 0;
    for (const RowSet& in : inputs) rows += in.size();
    if (rows * node.row_cost <= s.env.inline_cpu_rows) {
      if (s.env.offloads) ++s.env.offloads->inline_runs;
      Complete(s, idx, RunCpuCaught(spec, ctx, std::move(inputs)));
      return;
    }
  }
  if (s.env.offloads && spec.kind != RunKind::kAsync) ++s.env.offloads->pool_runs;
  Spawn(RunSuspending(st, idx, std::move(inputs)));
}

// Starts every ready node. Re-entrant calls (a node finishing inside StartNode) only
// queue, so a long chain of inline nodes runs in a loop, not in ever deeper recursion.
void RunReady(const StatePtr& st) {
  RequestState& s = *st;
  if (s.running_ready) return;
  s.running_ready = true;
  while (s.ready_head < s.ready.size() && !s.done) StartNode(st, s.ready[s.ready_head++]);
  if (s.ready_head == s.ready.size()) s.ready.clear(), s.ready_head = 0;
  s.running_ready = false;
}

// The quality block's params of this run, scaled by q: rounded, within the op's bounds
// (at least 1). A {"param"} the request gave is the client's and stays as given.
void ScaleForQuality(RequestState& st, const GivenParams& given, double q) {
  const Plan& plan = *st.plan;
  for (const QualityScale& s : plan.quality.scale) {
    if (s.ref_decl >= 0) {
      const std::string& name = plan.params.decls[static_cast<size_t>(s.ref_decl)].name;
      if (std::any_of(given.begin(), given.end(), [&](const auto& g) { return g.first == name; }))
        continue;
    }
    TaskContext& ctx = st.ctxs[s.node];
    TaskArgs* own = nullptr;
    for (TaskArgs& a : st.resolved)
      if (&a == ctx.args) own = &a;
    if (!own) {
      st.resolved.push_back(*ctx.args);  // reserved: no reallocation
      own = &st.resolved.back();
      ctx.args = own;
    }
    Value& v = own->at(s.arg);
    const int64_t* base = std::get_if<int64_t>(&v);
    if (!base) base = std::get_if<int64_t>(&own->spec(s.arg).default_value);
    if (!base) continue;
    auto scaled = static_cast<int64_t>(std::llround(static_cast<double>(*base) * q));
    v = std::clamp(scaled, s.lo, std::max(s.lo, s.hi));
  }
}

struct WaitDone {
  RequestState* st;
  bool await_ready() const noexcept { return st->done; }
  void await_suspend(std::coroutine_handle<> h) noexcept { st->waiter = h; }
  void await_resume() const noexcept {}
};

}  // namespace

Coro<Result<RunResult>> RunPlan(const ExecEnv& env, RunRequest req, std::shared_ptr<void> live) {
  env.loop->AssertInLoopThread();
  TimePoint start = Clock::now();
  const Plan& plan = *req.plan;
  auto values = BindParams(plan, req.params);
  if (!values) co_return Fail(std::move(values.error()));

  size_t n = plan.nodes.size();
  auto st = std::allocate_shared<RequestState>(block_pool::Allocator<RequestState>(), n);
  st->env = env;
  st->plan = req.plan;
  st->live = std::move(live);
  st->values = std::move(*values);
  st->user_id = req.user_id;
  st->start = start;
  st->deadline = req.deadline;
  st->keep_for_log = req.keep_for_log;
  if (plan.reads_indexes && env.ann) st->ann = env.ann->Current();
  st->outer_cancel = std::move(req.cancel);
  st->cancel.set_parent(st->outer_cancel.get());
  size_t with_refs = 0;
  for (const PlanNode& node : plan.nodes) with_refs += node.refs.empty() ? 0 : 1;
  bool scaled = plan.quality.enabled && req.quality < 1.0;
  const int64_t now_ms = req.ts_ms != 0 ? req.ts_ms
                                        : std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count();
  // TaskContext::args points into it.
  st->resolved.reserve(with_refs + (scaled ? plan.quality.scale.size() : 0));
  for (size_t i = 0; i < n; ++i) {
    const PlanNode& node = plan.nodes[i];
    TaskContext& ctx = st->ctxs[i];
    ctx.loop = env.loop;
    ctx.pool = env.pool;
    ctx.redis = env.redis;
    ctx.cache = env.cache;
    ctx.cache_lookups = &st->stats[i].cache;
    ctx.null_rows = &st->null_rows[i];
    ctx.user_id = {st->user_id.num, st->user_id.str};
    ctx.now_ms = now_ms;
    ctx.node = &node;
    ctx.schema = plan.schema.get();
    ctx.ann = st->ann.get();
    ctx.params = &st->values;
    ctx.request_deadline = req.deadline;
    ctx.args = &node.args;
    st->node_cancel[i].set_parent(&st->cancel);
    ctx.cancel = &st->node_cancel[i];
    if (!node.refs.empty()) {
      auto args = ResolveArgs(plan, node, st->values);
      if (!args) co_return Fail(std::move(args.error()));
      st->resolved.push_back(std::move(*args));
      ctx.args = &st->resolved.back();
    }
    st->pending[i] = node.in_degree;
    st->consumers[i] = static_cast<uint32_t>(node.successors.size());
  }
  if (scaled) ScaleForQuality(*st, req.params, req.quality);
  st->ready.reserve(n);
  st->ready.assign(plan.sources.begin(), plan.sources.end());
  RunReady(st);
  co_await WaitDone{st.get()};

  if (st->error) co_return Fail(std::move(*st->error));
  RunResult out;
  out.plan = req.plan;
  out.user_id = req.user_id;
  out.output = std::move(st->outputs[plan.output]);
  out.degraded.assign(st->degraded.begin(), st->degraded.end());
  out.degraded_errors = std::move(st->degraded_errors);
  out.nodes.assign(st->stats.begin(), st->stats.end());
  out.took_us = Micros(start, Clock::now());
  if (plan.quality.enabled) out.quality = req.quality;
  if (st->keep_for_log) {
    for (uint32_t k : plan.log.kept) out.kept.push_back(st->outputs[k]);
    out.params = st->values;
  }
  co_return out;
}

}  // namespace rankd
