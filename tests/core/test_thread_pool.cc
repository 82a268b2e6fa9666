// ThreadPool: every job runs, WaitIdle drains, Submit after Shutdown is refused.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/thread_pool.h"

using namespace rankd;
using namespace std::chrono_literals;

TEST_CASE("WaitIdle returns only after every submitted job finished") {
  ThreadPool pool(3);
  std::atomic<int> done{0};
  for (int i = 0; i < 200; ++i)
    CHECK(pool.Submit([&] {
      std::this_thread::sleep_for(100us);
      ++done;
    }));
  pool.WaitIdle();
  CHECK(done == 200);
  CHECK(pool.inflight() == 0);
}

TEST_CASE("WaitIdle on an idle pool returns at once") {
  ThreadPool pool(1);
  pool.WaitIdle();
  CHECK(pool.inflight() == 0);
}

TEST_CASE("Shutdown finishes queued jobs and then refuses new ones") {
  ThreadPool pool(1);
  std::atomic<int> done{0};
  for (int i = 0; i < 20; ++i) pool.Submit([&] { ++done; });
  pool.Shutdown();
  CHECK(done == 20);
  std::atomic<bool> ran{false};
  CHECK_FALSE(pool.Submit([&] { ran = true; }));
  CHECK_FALSE(ran);
  pool.Shutdown();  // idempotent
}

TEST_CASE("Jobs submitted from many threads all run") {
  ThreadPool pool(2);
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t)
    producers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) pool.Submit([&] { ++done; });
    });
  for (auto& p : producers) p.join();
  pool.WaitIdle();
  CHECK(done == 2000);
}
