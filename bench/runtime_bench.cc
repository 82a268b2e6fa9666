// ops/bench runtime: cross-thread post throughput, 10k coroutine timers and 1000
// concurrent sleeps, each against a raw-libuv (or thread pool) baseline run in the same
// process. Prints one JSON object per line.
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
  return RunSync(loop, [&loop, n]() -> Task<double> {
    Countdown left{n, {}};
    auto t0 = Clock::now();
    auto one = [&]() -> Task<void> {
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
// One OffloadCpu round trip (loop -> worker -> loop) of an empty job, in µs: the cost a
// CPU task pays to leave the loop. docs/engine.md derives kInlineCpuRows from it.
double OffloadRoundTripUs(EventLoop& loop, ThreadPool& pool, int n) {
  return RunSync(loop, [&loop, &pool, n]() -> Task<double> {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) co_await OffloadCpu(loop, pool, [] { return 0; });
    co_return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
  }());
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
  OffloadRoundTripUs(loop, runtime.cpu(), 1000);
  ours.clear();
  for (int r = 0; r < kRounds; ++r) ours.push_back(OffloadRoundTripUs(loop, runtime.cpu(), 10000));
  std::printf(
      "{\"name\": \"offload_roundtrip\", \"value\": %.3g, \"unit\": \"us\", "
      "\"note\": \"loop -> CPU worker -> loop, empty job\"}\n",
      Median(ours));
  runtime.Stop();
  return 0;
}
