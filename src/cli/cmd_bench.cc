// rankd bench --plan NAME -n N -c C: N requests through the plan, C in flight at once on
// one loop (plus a CPU pool); prints one JSON line with throughput and latencies.
#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/cli_redis.h"
#include "cli/commands.h"
#include "plan/loader.h"
#include "redis/shard_clients.h"
#include "sched/scheduler.h"

namespace rankd {

namespace {

struct BenchState {
  ExecEnv env;
  PlanPtr plan;
  int64_t user_id = 0;
  int64_t deadline_ms = 0;
  int64_t total = 0;
  int64_t issued = 0;
  int64_t errors = 0;
  std::string first_error;
  std::vector<int64_t> latency_us;
  int workers = 0;
  std::coroutine_handle<> waiter;
};

Coro<void> Worker(BenchState& b) {
  while (b.issued < b.total) {
    ++b.issued;
    RunRequest req{.plan = b.plan,
                   .user_id = b.user_id,
                   .params = {},
                   .deadline = std::nullopt,
                   .keep_for_log = false,
                   .cancel = {}};
    TimePoint t0 = Clock::now();
    if (b.deadline_ms > 0) req.deadline = t0 + std::chrono::milliseconds(b.deadline_ms);
    auto r = co_await RunPlan(b.env, std::move(req));
    b.latency_us.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
    if (!r && b.errors++ == 0) {
      b.first_error = r.error().message;
      if (!r.error().detail.empty()) b.first_error += " [" + r.error().detail + "]";
    }
  }
  if (--b.workers == 0 && b.waiter) b.env.loop->Defer(std::exchange(b.waiter, {}));
}

struct AllDone {
  BenchState& b;
  bool await_ready() const noexcept { return b.workers == 0; }
  void await_suspend(std::coroutine_handle<> h) noexcept { b.waiter = h; }
  void await_resume() const noexcept {}
};

Coro<void> BenchMain(BenchState& b, int concurrency) {
  b.workers = concurrency;
  for (int i = 0; i < concurrency; ++i) Spawn(Worker(b));
  co_await AllDone{b};
}

int64_t Pct(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

int CmdBench(const std::vector<std::string>& argv) {
  RedisFlags redis_flags;
  PlanDirFlags plan_dir;
  std::string plan_name;
  int64_t n = 1000, c = 1, user_id = 1, deadline_ms = 0, node_timeout_ms = 0, threads = 2,
          redis_conns = 2;
  std::vector<Flag> flags = RedisFlagRows(redis_flags);
  plan_dir.AddRows(flags);
  flags.insert(flags.end(),
               {
                   TextFlag("--plan", "NAME", {}, plan_name),
                   IntFlag("-n", "N", {}, n, -kAnyInt, kAnyInt, "--requests"),
                   IntFlag("-c", "C", {}, c, -kAnyInt, kAnyInt, "--concurrency"),
                   IntFlag("--redis-conns", "K", {}, redis_conns, -kAnyInt, kAnyInt),
                   IntFlag("--user-id", "U", {}, user_id, -kAnyInt, kAnyInt),
                   IntFlag("--deadline-ms", "N", {}, deadline_ms, -kAnyInt, kAnyInt),
                   IntFlag("--node-timeout-ms", "N", {}, node_timeout_ms, -kAnyInt, kAnyInt),
                   IntFlag("--cpu-threads", "N", {}, threads, -kAnyInt, kAnyInt),
               });
  if (!ParseCommandFlags("bench", argv, flags)) return 2;
  auto endpoints = ResolveCommandRedis("bench", redis_flags);
  if (!endpoints) return 2;
  if (plan_name.empty() || n < 1 || c < 1 || threads < 1) {
    std::fprintf(stderr, "rankd bench: need --plan NAME, -n >= 1, -c >= 1\n");
    return 2;
  }
  auto plans = plan_dir.Load();
  if (!plans) {
    std::fprintf(stderr, "%s\n", plans.error().message.c_str());
    return 1;
  }
  PlanPtr plan = plans->Find(plan_name);
  if (!plan) {
    std::fprintf(stderr, "rankd bench: plan '%s' is not in %s\n", plan_name.c_str(),
                 plan_dir.dir.c_str());
    return 1;
  }
  bool uses_redis = !redis_flags.endpoints.empty();
  for (const auto& node : plan->nodes) uses_redis |= node.schema->is_io;
  ShardRuntime runtime("bench", static_cast<size_t>(threads));
  runtime.Start();
  RedisPools* redis =
      uses_redis ? &OpenCliRedis(runtime, *endpoints, static_cast<int>(redis_conns)) : nullptr;
  auto redis_totals = [&] {  // commands, batches, socket writes, over every endpoint
    std::array<uint64_t, 3> t{};
    if (redis)
      for (const auto& p : redis->pools())
        t = {t[0] + Read(p->stats().commands), t[1] + Read(p->stats().batches),
             t[2] + Read(p->stats().socket_writes)};
    return t;
  };
  auto redis0 = redis_totals();
  BenchState b;
  runtime.env().node_timeout_ms = static_cast<uint64_t>(std::max<int64_t>(node_timeout_ms, 0));
  b.env = runtime.env();
  b.plan = plan;
  b.user_id = user_id;
  b.deadline_ms = deadline_ms;
  b.total = n;
  b.latency_us.reserve(static_cast<size_t>(n));
  TimePoint t0 = Clock::now();
  runtime.Run(BenchMain(b, static_cast<int>(std::min(c, n))));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  auto redis1 = redis_totals();
  runtime.Stop();
  std::sort(b.latency_us.begin(), b.latency_us.end());
  std::printf(
      "{\"plan\":\"%s\",\"requests\":%lld,\"concurrency\":%lld,\"errors\":%lld,"
      "\"rps\":%.1f,\"p50_us\":%lld,\"p90_us\":%lld,\"p99_us\":%lld,\"max_us\":%lld,"
      "\"redis_commands_per_request\":%.2f,\"redis_batches_per_request\":%.2f,"
      "\"redis_writes_per_request\":%.2f}\n",
      plan->name.c_str(), static_cast<long long>(n), static_cast<long long>(c),
      static_cast<long long>(b.errors), static_cast<double>(n) / secs,
      static_cast<long long>(Pct(b.latency_us, 0.50)),
      static_cast<long long>(Pct(b.latency_us, 0.90)),
      static_cast<long long>(Pct(b.latency_us, 0.99)),
      static_cast<long long>(b.latency_us.empty() ? 0 : b.latency_us.back()),
      static_cast<double>(redis1[0] - redis0[0]) / static_cast<double>(n),
      static_cast<double>(redis1[1] - redis0[1]) / static_cast<double>(n),
      static_cast<double>(redis1[2] - redis0[2]) / static_cast<double>(n));
  if (b.errors)
    std::fprintf(stderr, "rankd bench: %lld error(s), first: %s\n",
                 static_cast<long long>(b.errors), b.first_error.c_str());
  return b.errors ? 1 : 0;
}

const char kBenchSynopsis[] =
    "--plan NAME [-n N] [-c C] [--plans DIR] [--user-id U] [--deadline-ms N] [--node-timeout-ms N]"
    " [--redis NAME=URL]... [--redis-conns K] [--enable-test-ops]";

}  // namespace rankd
