// ops/bench runtime: cross-thread post throughput, 10k coroutine timers and 1000
// concurrent sleeps, each against a raw-libuv (or thread pool) baseline run in the same
// process, and the offload round trip by thread placement. Prints one JSON object per line.
#include <pthread.h>
#include <sched.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/awaitables.h"
#include "core/deadline.h"
#include "core/event_loop.h"
#include "core/loop_runtime.h"
#include "core/run_sync.h"
#include "core/thread_pool.h"

using namespace rankd;
using Ms = std::chrono::duration<double, std::milli>;
using Clock = rankd::Clock;

namespace {

constexpr int kPosts = 1'000'000;
constexpr int kTimers = 10'000;
constexpr int kFanout = 1'000;
constexpr int kRounds = 5;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Emit(const char* name, double value, const char* unit, double baseline, const char* extra) {
  std::printf(
      "{\"name\": \"%s\", \"value\": %.4g, \"unit\": \"%s\", \"baseline\": %.4g, "
      "\"ratio\": %.3f%s}\n",
      name, value, unit, baseline, value / baseline, extra);
}

// --- cross-thread post throughput ---------------------------------------------------

double RankdPostsPerSec() {
  EventLoop loop("bench");
  loop.Start();
  std::atomic<int> ran{0};
  auto t0 = Clock::now();
  for (int i = 0; i < kPosts; ++i)
    loop.Post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  while (ran.load(std::memory_order_acquire) < kPosts) std::this_thread::yield();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  loop.Stop();
  return kPosts / s;
}

// The baseline: what a hand-written libuv program does — a mutex-guarded vector of
// plain function pointers, uv_async_send per post, drained whole per wake-up.
struct RawQueue {
  uv_loop_t loop;
  uv_async_t async;
  std::mutex mu;
  std::vector<std::pair<void (*)(void*), void*>> items;
  std::atomic<int> ran{0};
  std::atomic<bool> stop{false};
};

double RawPostsPerSec() {
  RawQueue q;
  std::atomic<bool> ready{false};
  std::thread loop_thread([&] {
    uv_loop_init(&q.loop);
    uv_async_init(&q.loop, &q.async, [](uv_async_t* a) {
      auto* q = static_cast<RawQueue*>(a->data);
      std::vector<std::pair<void (*)(void*), void*>> batch;
      {
        std::lock_guard lk(q->mu);
        batch.swap(q->items);
      }
      for (auto& [fn, arg] : batch) fn(arg);
      if (q->stop) uv_close(reinterpret_cast<uv_handle_t*>(a), nullptr);
    });
    q.async.data = &q;
    ready = true;
    uv_run(&q.loop, UV_RUN_DEFAULT);
    uv_loop_close(&q.loop);
  });
  while (!ready) std::this_thread::yield();
  auto bump = [](void* p) {
    static_cast<RawQueue*>(p)->ran.fetch_add(1, std::memory_order_relaxed);
  };
  auto t0 = Clock::now();
  for (int i = 0; i < kPosts; ++i) {
    {
      std::lock_guard lk(q.mu);
      q.items.emplace_back(bump, &q);
    }
    uv_async_send(&q.async);
  }
  while (q.ran.load(std::memory_order_acquire) < kPosts) std::this_thread::yield();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  q.stop = true;
  uv_async_send(&q.async);
  loop_thread.join();
  return kPosts / s;
}

// --- 10k x 1 ms timers, coroutine SleepMs vs raw uv timers -------------------------

// Resumes the awaiting coroutine when `count` reaches `target` (no polling).
struct Countdown {
  int remaining;
  std::coroutine_handle<> waiter;
  void Done() {
    if (--remaining == 0 && waiter) waiter.resume();
  }
  bool await_ready() const { return remaining == 0; }
  void await_suspend(std::coroutine_handle<> h) { waiter = h; }
  void await_resume() {}
};

double CoroSleepsWallMs(EventLoop& loop, int n) {
  return RunSync(loop, [&loop, n]() -> Coro<double> {
    Countdown left{n, {}};
    auto t0 = Clock::now();
    auto one = [&]() -> Coro<void> {
      co_await SleepMs(loop, 1);
      left.Done();
    };
    for (int i = 0; i < n; ++i) Spawn(one());
    co_await left;
    co_return Ms(Clock::now() - t0).count();
  }());
}

double RankdTimersWallMs(EventLoop& loop) { return CoroSleepsWallMs(loop, kTimers); }

double RawTimersWallMs() {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<uv_timer_t> timers(kTimers);
  int done = 0;
  auto t0 = Clock::now();
  for (auto& t : timers) {
    uv_timer_init(&loop, &t);
    t.data = &done;
    uv_timer_start(
        &t, [](uv_timer_t* h) { ++*static_cast<int*>(h->data); }, 1, 0);
  }
  while (done < kTimers) uv_run(&loop, UV_RUN_ONCE);
  double ms = Ms(Clock::now() - t0).count();
  for (auto& t : timers) uv_close(reinterpret_cast<uv_handle_t*>(&t), nullptr);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return ms;
}

// --- 1000 concurrent 1 ms sleeps vs an 8-thread pool of blocking sleeps --------------

double RankdFanoutWallMs(EventLoop& loop) { return CoroSleepsWallMs(loop, kFanout); }

double PoolFanoutWallMs() {
  ThreadPool pool(8);
  auto t0 = Clock::now();
  for (int i = 0; i < kFanout; ++i)
    pool.Submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); });
  pool.WaitIdle();
  return Ms(Clock::now() - t0).count();
}

// --- the hop behind the scheduler's inline-vs-pool threshold --------------------------
// One OffloadCpu round trip (loop -> worker -> loop) of an empty job: the cost a CPU task
// pays to leave the loop. docs/engine.md derives kInlineCpuRows from it.
//
// Each trip is timed on its own, with the CPU the loop and the worker ran on: the cost is
// two thread wake-ups, and what a wake-up costs depends on where the scheduler put the
// two threads (docs/runtime.md, "The offload hop"). A mean over many trips on a shared
// machine is dominated by the few trips whose thread waited for another process's time
// slice, so the figure is the median trip, with the tail and the mean beside it.
struct OffloadTrip {
  double us;
  bool split;  // the worker ran on another CPU than the loop
};

std::vector<OffloadTrip> OffloadTrips(EventLoop& loop, ThreadPool& pool, int n) {
  return RunSync(loop, [&loop, &pool, n]() -> Coro<std::vector<OffloadTrip>> {
    std::vector<OffloadTrip> trips;
    trips.reserve(n);
    for (int i = 0; i < n; ++i) {
      int loop_cpu = sched_getcpu();
      auto t0 = Clock::now();
      int worker_cpu = co_await OffloadCpu(loop, pool, [] { return sched_getcpu(); });
      double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      trips.push_back({us, worker_cpu != loop_cpu});
    }
    co_return trips;
  }());
}

// Where the loop thread and the CPU worker run: where the scheduler puts them (any CPU
// the process may use), pinned to two different CPUs, or pinned to the same one.
enum class Placement { kFree, kSplit, kSame };

struct OffloadCpus {
  cpu_set_t allowed;  // the process's CPUs at start
  int first = -1;
  int second = -1;  // -1: one CPU only
};

OffloadCpus AllowedCpus() {
  OffloadCpus cpus;
  sched_getaffinity(0, sizeof cpus.allowed, &cpus.allowed);
  for (int c = 0; c < CPU_SETSIZE && cpus.second < 0; ++c)
    if (CPU_ISSET(c, &cpus.allowed)) (cpus.first < 0 ? cpus.first : cpus.second) = c;
  return cpus;
}

void PinThisThread(const OffloadCpus& cpus, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  if (cpu >= 0) CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), cpu >= 0 ? &one : &cpus.allowed);
}

void Place(LoopRuntime& runtime, const OffloadCpus& cpus, Placement where) {
  int loop_cpu = where == Placement::kFree ? -1 : cpus.first;
  int worker_cpu = where == Placement::kSplit ? cpus.second : loop_cpu;
  runtime.OnLoop([&cpus, loop_cpu] { PinThisThread(cpus, loop_cpu); });
  runtime.cpu().Submit([&cpus, worker_cpu] { PinThisThread(cpus, worker_cpu); });
  runtime.cpu().WaitIdle();
}

void EmitOffload(const char* name, std::vector<OffloadTrip> trips, const char* note) {
  std::vector<double> us;
  double sum = 0;
  size_t split = 0;
  for (const auto& t : trips) {
    us.push_back(t.us);
    sum += t.us;
    split += t.split;
  }
  std::sort(us.begin(), us.end());
  auto at = [&us](double q) { return us[static_cast<size_t>(q * (us.size() - 1))]; };
  std::printf(
      "{\"name\": \"%s\", \"value\": %.3g, \"unit\": \"us\", \"p90\": %.3g, \"p99\": %.3g, "
      "\"mean\": %.3g, \"split_share\": %.2f, \"trips\": %zu, \"target_max_us\": 20, "
      "\"note\": \"median loop -> CPU worker -> loop, empty job; %s\"}\n",
      name, at(0.5), at(0.9), at(0.99), sum / us.size(), double(split) / us.size(), us.size(),
      note);
}

// Rounds alternate the placements, so each sees the same machine load.
void OffloadFigures(LoopRuntime& runtime) {
  constexpr int kTrips = 10'000;
  const OffloadCpus cpus = AllowedCpus();
  std::vector<OffloadTrip> placed, split, same;
  OffloadTrips(runtime.loop(), runtime.cpu(), 1000);  // warm-up
  auto add = [&](std::vector<OffloadTrip>& to, Placement where) {
    Place(runtime, cpus, where);
    auto trips = OffloadTrips(runtime.loop(), runtime.cpu(), kTrips);
    to.insert(to.end(), trips.begin(), trips.end());
  };
  for (int r = 0; r < kRounds; ++r) {
    add(placed, Placement::kFree);
    if (cpus.second >= 0) add(split, Placement::kSplit);
    add(same, Placement::kSame);
  }
  Place(runtime, cpus, Placement::kFree);
  EmitOffload("offload_roundtrip", std::move(placed), "threads where the scheduler puts them");
  if (cpus.second >= 0)
    EmitOffload("offload_roundtrip_split", std::move(split),
                "loop and worker pinned to two CPUs: two cross-CPU wake-ups");
  EmitOffload("offload_roundtrip_same", std::move(same),
              "loop and worker pinned to one CPU: two context switches");
}

}  // namespace

int main() {
  std::vector<double> ours, raw;
  RankdPostsPerSec();  // warm-up
  RawPostsPerSec();
  for (int r = 0; r < kRounds; ++r) {
    ours.push_back(RankdPostsPerSec());
    raw.push_back(RawPostsPerSec());
  }
  Emit("post_throughput", Median(ours), "ops/s", Median(raw),
       ", \"target_ratio_min\": 0.8, \"posts\": 1000000, \"producers\": 1");

  LoopRuntime runtime("bench", /*cpu_threads=*/1);
  runtime.Start();
  EventLoop& loop = runtime.loop();
  ours.clear();
  raw.clear();
  RankdTimersWallMs(loop);  // warm-up: fills the timer pool
  RawTimersWallMs();
  for (int r = 0; r < kRounds; ++r) {
    ours.push_back(RankdTimersWallMs(loop));
    raw.push_back(RawTimersWallMs());
  }
  Emit("timer_coro_overhead", Median(ours), "ms", Median(raw),
       ", \"target_ratio_max\": 1.10, \"timers\": 10000, \"timeout_ms\": 1");

  ours.clear();
  raw.clear();
  RankdFanoutWallMs(loop);
  for (int r = 0; r < kRounds; ++r) {
    ours.push_back(RankdFanoutWallMs(loop));
    raw.push_back(PoolFanoutWallMs());
  }
  Emit("fanout_sleep_wall", Median(ours), "ms", Median(raw),
       ", \"target_max_ms\": 1.5, \"sleeps\": 1000, \"baseline_pool_threads\": 8");
  OffloadFigures(runtime);
  runtime.Stop();
  return 0;
}
