// Cancellation tokens, the bounded CPU queue, and where EventLoop destroys a callable
// it refused (never on the posting thread while the loop can still do it).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "core/cancel.h"
#include "core/event_loop.h"
#include "core/run_sync.h"
#include "core/thread_pool.h"
#include "core/timeout.h"

using namespace rankd;
using namespace std::chrono_literals;

TEST_CASE("CancelToken: a child reads its parent's cancellation") {
  CancelToken request, node;
  node.set_parent(&request);
  CHECK_FALSE(node.cancelled());
  request.Cancel();
  CHECK(node.cancelled());
  CancelToken other;
  other.set_parent(&node);
  CHECK(other.cancelled());
  CancelToken alone;
  alone.Cancel();
  CHECK(alone.cancelled());
}

TEST_CASE("CancelToken: a worker polling it stops soon after the loop cancels") {
  CancelToken t;
  std::atomic<bool> stopped{false};
  std::promise<void> polling;
  std::thread worker([&] {
    auto until = std::chrono::steady_clock::now() + 30s;
    polling.set_value();
    while (std::chrono::steady_clock::now() < until && !t.cancelled()) {
    }
    stopped = true;
  });
  polling.get_future().wait();  // cancel a worker that is polling, not one yet to start
  t.Cancel();
  worker.join();  // far less than the 30 s it would spin otherwise
  CHECK(stopped);
}

TEST_CASE("ThreadPool::TrySubmit: a full queue refuses with unavailable") {
  ThreadPool pool(1);
  pool.set_max_queued(2);
  std::promise<void> release;
  auto gate = release.get_future().share();
  std::atomic<int> ran{0};
  // One running (blocked on the gate), two queued: the queue is full.
  std::promise<void> taken;
  REQUIRE(pool.TrySubmit([gate, &ran, &taken] {
    taken.set_value();
    gate.wait();
    ++ran;
  }));
  taken.get_future().wait();  // the worker holds the first job: it no longer counts as queued
  REQUIRE(pool.TrySubmit([&] { ++ran; }));
  REQUIRE(pool.TrySubmit([&] { ++ran; }));
  Status full = pool.TrySubmit([&] { ++ran; });
  REQUIRE_FALSE(full);
  CHECK(full.error().code == ErrorCode::kUnavailable);
  CHECK(pool.Submit([&] { ++ran; }));  // control work is not bounded
  release.set_value();
  pool.WaitIdle();
  CHECK(ran == 4);
  pool.Shutdown();
  Status down = pool.TrySubmit([] {});
  REQUIRE_FALSE(down);
  CHECK(down.error().code == ErrorCode::kInternal);
}

TEST_CASE("OffloadCpuWithTimeout: a refused job comes back as the pool's error") {
  EventLoop loop;
  ThreadPool pool(1);
  pool.set_max_queued(1);
  loop.Start();
  std::promise<void> release;
  auto gate = release.get_future().share();
  std::promise<void> taken;
  REQUIRE(pool.TrySubmit([gate, &taken] {
    taken.set_value();
    gate.wait();
  }));
  taken.get_future().wait();       // the worker holds it: the queue is empty again
  REQUIRE(pool.TrySubmit([] {}));  // the queue now holds its one job
  auto run = [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(loop, pool, 5000, [] { return 1; });
  };
  Result<int> r = RunSync(loop, run());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
  release.set_value();
  pool.WaitIdle();
  loop.Stop();
}

namespace {
// Records the thread that destroys it.
struct Witness {
  std::shared_ptr<std::atomic<std::thread::id>> where;
  std::shared_ptr<std::atomic<int>> ran;
  explicit Witness(std::shared_ptr<std::atomic<std::thread::id>> w,
                   std::shared_ptr<std::atomic<int>> r)
      : where(std::move(w)), ran(std::move(r)) {}
  Witness(Witness&& o) noexcept = default;
  ~Witness() {
    if (where) where->store(std::this_thread::get_id());
  }
  void operator()() { ++*ran; }
};
}  // namespace

TEST_CASE("Post refused while Stopping: the callable is destroyed on the loop thread") {
  EventLoop loop;
  loop.Start();
  auto where = std::make_shared<std::atomic<std::thread::id>>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  std::thread::id loop_thread;
  std::promise<void> posted;
  std::atomic<bool> refused{false};
  // A loop callback that blocks the loop while Stop flips the state to Stopping, then a
  // worker posts (refused) before the final drain is over.
  std::promise<void> in_cb;
  std::thread worker;
  REQUIRE(loop.Post([&] {
    loop_thread = std::this_thread::get_id();
    in_cb.set_value();
    while (loop.state() != EventLoop::State::kStopping) std::this_thread::sleep_for(100us);
    worker = std::thread([&] {
      refused = !loop.Post(Witness(where, ran));
      posted.set_value();
    });
    posted.get_future().wait();
  }));
  in_cb.get_future().wait();
  loop.Stop();
  worker.join();
  CHECK(refused);
  CHECK(*ran == 0);
  // Before the fix the refused callable was destroyed on the worker thread.
  CHECK(where->load() == loop_thread);
}

TEST_CASE("Post refused after Stop: the callable is not destroyed on the posting thread") {
  EventLoop loop;
  loop.Start();
  loop.Stop();
  auto where = std::make_shared<std::atomic<std::thread::id>>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  CHECK_FALSE(loop.Post(Witness(where, ran)));
  CHECK(*ran == 0);
  CHECK(where->load() != std::this_thread::get_id());  // kept, on purpose, for ever
}
