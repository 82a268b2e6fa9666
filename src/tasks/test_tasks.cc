// Tasks without IO for tests and benchmarks (docs/plan.md): fixed_source, sleep, busy_cpu.
#include <chrono>

#include "core/awaitables.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

Result<ColumnTypes> FixedSchema(const SchemaArgs& a) {
  ColumnTypes t = *SchemaIdOnly(a);
  t.cols.emplace_back("score", ColumnType::kF64);
  return t;
}

Result<RowSet> RunFixed(const TaskContext& ctx, RowSets) {
  size_t n = static_cast<size_t>(ctx.args->I64("count"));
  PoolVector<int64_t> ids(n);
  PoolVector<double> scores(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<int64_t>(i + 1);
    scores[i] = static_cast<double>(i + 1);
  }
  RowSet out;
  out.SetColumn("id", Share(Column::I64(std::move(ids))));
  out.SetColumn("score", Share(Column::F64(std::move(scores))));
  return out;
}

RowSet PassThrough(RowSets& in) { return in.empty() ? RowSet::Empty() : std::move(in[0]); }

// A loop timer, no thread blocked. `ctx` outlives this coroutine (TaskContext contract).
Coro<Result<RowSet>> RunSleep(const TaskContext& ctx, RowSets in) {
  int64_t ms = ctx.args->I64("duration_ms");
  co_await SleepMs(*ctx.loop, static_cast<uint64_t>(ms));
  if (ctx.args->Bool("fail_after_sleep"))
    co_return Fail(
        Error::Internal("sleep failed after " + std::to_string(ms) + " ms (fail_after_sleep)"));
  co_return PassThrough(in);
}

// Spins the CPU worker it runs on; the scheduler always sends it to the pool. It polls
// its cancel token on every clock read (well under a millisecond apart), as any long
// CPU run must.
Result<RowSet> RunBusy(const TaskContext& ctx, RowSets in) {
  auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx.args->I64("duration_ms"));
  while (std::chrono::steady_clock::now() < until) {
    if (ctx.cancelled()) return Fail(CancelledError("busy_cpu"));
  }
  return PassThrough(in);
}

TaskParamSpec Duration() {
  return TaskParamSpec::Optional("duration_ms", ParamKind::kI64, int64_t{0}).Bounds(0, 60000).Ref();
}

}  // namespace

// Each is test_only: a plan using one loads only with --enable-test-ops (a plan that
// sleeps or spins a worker for 60 s has no place on a production server).
void RegisterOps_test_tasks(TaskRegistry& r) {
  using P = TaskParamSpec;
  using C = AddedColumn;
  r.Add(TaskSpec::Cpu("fixed_source", 0, 0,
                      {P::Optional("count", ParamKind::kI64, int64_t{10}).Bounds(0, 100000).Ref()},
                      &FixedSchema, &RunFixed)
            .Doc("Rows id = 1..count and score = id, without IO.")
            .Replaces({C::Named("id", ColumnFrom::kFixed, ColumnType::kI64),
                       C::Named("score", ColumnFrom::kFixed, ColumnType::kF64)})
            .TestOnly());
  r.Add(
      TaskSpec::Async("sleep", 0, 1,
                      {Duration(), P::Optional("fail_after_sleep", ParamKind::kBool, false).Ref()},
                      &SchemaSameAsInput, &RunSleep)
          .Doc("Waits duration_ms on a loop timer, then passes its input through (no input: "
               "id only, zero rows), or fails.")
          .TestOnly());
  r.Add(
      TaskSpec::Cpu("busy_cpu", 0, 1, {Duration()}, &SchemaSameAsInput, &RunBusy, RunKind::kCpuPool)
          .Doc("Spins a CPU worker for duration_ms, then passes its input through (no input: "
               "id only, zero rows).")
          .TestOnly());
}

}  // namespace rankd
