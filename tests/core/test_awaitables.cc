// SleepMs, OffloadCpu, the two timeout races, runner tracking and deadline helpers.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/awaitables.h"
#include "core/deadline.h"
#include "core/run_sync.h"
#include "core/timeout.h"

using namespace rankd;
using namespace std::chrono_literals;

namespace {
struct Fixture {
  EventLoop loop{"test"};
  ThreadPool pool{2};
  Fixture() { loop.Start(); }
  ~Fixture() {
    pool.WaitIdle();  // drain what posts back before the loop stops
    loop.Stop();
  }
};

Coro<int> SleepThen(EventLoop& loop, uint64_t ms, int v) {
  co_await SleepMs(loop, ms);
  co_return v;
}

Coro<Result<int>> SleepThenResult(EventLoop& loop, uint64_t ms, int v) {
  co_await SleepMs(loop, ms);
  co_return v;
}

Coro<int> ThrowAfter(EventLoop& loop, uint64_t ms) {
  co_await SleepMs(loop, ms);
  throw std::runtime_error("inner failed");
}

uint64_t Late() { return LateCompletions().load(); }

// Waits (bounded) until cond holds.
template <class F>
bool Eventually(F cond) {
  for (int i = 0; i < 5000 && !cond(); ++i) std::this_thread::sleep_for(1ms);
  return cond();
}
}  // namespace

TEST_CASE("SleepMs suspends on a loop timer; SleepMs(0) does not suspend") {
  Fixture f;
  auto t0 = Clock::now();
  CHECK(RunSync(f.loop, SleepThen(f.loop, 20, 5)) == 5);
  CHECK(Clock::now() - t0 >= 19ms);
  CHECK(RunSync(f.loop, SleepThen(f.loop, 0, 6)) == 6);
}

TEST_CASE("1000 concurrent sleeps all complete on one loop") {
  Fixture f;
  auto body = [&]() -> Coro<int> {
    int done = 0;
    int started = 0;
    auto one = [&](int) -> Coro<void> {
      co_await SleepMs(f.loop, 1);
      ++done;
    };
    for (int i = 0; i < 1000; ++i, ++started) Spawn(one(i));
    while (done < 1000) co_await SleepMs(f.loop, 1);
    co_return done;
  };
  CHECK(RunSync(f.loop, body()) == 1000);
}

TEST_CASE("OffloadCpu runs on a worker and resumes on the loop") {
  Fixture f;
  auto body = [&]() -> Coro<bool> {
    auto loop_thread = std::this_thread::get_id();
    auto worker = co_await OffloadCpu(f.loop, f.pool, [] { return std::this_thread::get_id(); });
    co_return worker != loop_thread&& std::this_thread::get_id() == loop_thread;
  };
  CHECK(RunSync(f.loop, body()));
}

TEST_CASE("OffloadCpu rethrows the worker's exception on the loop") {
  Fixture f;
  auto body = [&]() -> Coro<bool> {
    try {
      co_await OffloadCpu(f.loop, f.pool, []() -> int { throw std::runtime_error("cpu"); });
    } catch (const std::runtime_error&) {
      co_return true;
    }
    co_return false;
  };
  CHECK(RunSync(f.loop, body()));
}

TEST_CASE("OffloadCpuWithTimeout: work wins") {
  Fixture f;
  auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(f.loop, f.pool, 2000, [] { return 11; });
  }());
  REQUIRE(r.has_value());
  CHECK(*r == 11);
}

TEST_CASE("OffloadCpuWithTimeout: timer wins, late completion counted") {
  Fixture f;
  uint64_t before = Late();
  auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(f.loop, f.pool, 5, [] {
      std::this_thread::sleep_for(60ms);
      return 1;
    });
  }());
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(Eventually([&] { return Late() == before + 1; }));
}

TEST_CASE("OffloadCpuWithTimeout: a Result-returning fn is flattened; throw → internal") {
  Fixture f;
  auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(
        f.loop, f.pool, 1000, []() -> Result<int> { return Fail(Error::Backend("x")); });
  }());
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kBackendError);
  auto t = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(f.loop, f.pool, 1000,
                                             []() -> int { throw std::runtime_error("oops"); });
  }());
  REQUIRE_FALSE(t.has_value());
  CHECK(t.error().code == ErrorCode::kInternal);
  CHECK(t.error().message.find("oops") != std::string::npos);
}

TEST_CASE("OffloadCpuWithTimeout: zero time left fails at once without running fn") {
  Fixture f;
  std::atomic<bool> ran{false};
  auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await OffloadCpuWithTimeout(f.loop, f.pool, 0, [&] {
      ran = true;
      return 1;
    });
  }());
  CHECK_FALSE(r.has_value());
  CHECK_FALSE(ran);
}

TEST_CASE("OffloadCpuWithTimeout: 100 alternating wins") {
  // A slow job holds its worker until its 1 ms timeout has answered (not for a fixed
  // time: a loaded machine may fire the timer late), a fast one has 5 s.
  Fixture f;
  int ok = 0, timeouts = 0;
  std::atomic<bool> release{false};
  for (int i = 0; i < 100; ++i) {
    bool slow = i % 2;
    auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
      co_return co_await OffloadCpuWithTimeout(f.loop, f.pool, slow ? 1 : 5000, [slow, &release] {
        while (slow && !release) std::this_thread::sleep_for(1ms);
        return 3;
      });
    }());
    (r ? ok : timeouts)++;
    release = true;
    f.pool.WaitIdle();
    release = false;
  }
  CHECK(ok == 50);
  CHECK(timeouts == 50);
}

TEST_CASE("AsyncWithTimeout: work wins, timer wins, immediate completion, exceptions") {
  Fixture f;
  uint64_t before = Late();
  auto win = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<int>(f.loop, SleepThen(f.loop, 2, 8), 2000);
  }());
  REQUIRE(win.has_value());
  CHECK(*win == 8);

  auto lose = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<int>(f.loop, SleepThen(f.loop, 50, 8), 5);
  }());
  REQUIRE_FALSE(lose.has_value());
  CHECK(lose.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(Eventually([&] { return Late() == before + 1; }));

  auto instant = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<int>(f.loop, SleepThen(f.loop, 0, 4), 10);
  }());
  REQUIRE(instant.has_value());
  CHECK(*instant == 4);

  auto flat = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<Result<int>>(f.loop, SleepThenResult(f.loop, 1, 2), 1000);
  }());
  REQUIRE(flat.has_value());
  CHECK(*flat == 2);

  auto thrown = RunSync(f.loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<int>(f.loop, ThrowAfter(f.loop, 1), 1000);
  }());
  REQUIRE_FALSE(thrown.has_value());
  CHECK(thrown.error().code == ErrorCode::kInternal);
}

TEST_CASE("AsyncWithTimeout: 100 alternating wins, runners all finish") {
  Fixture f;
  int ok = 0, timeouts = 0;
  for (int i = 0; i < 100; ++i) {
    bool slow = i % 2;
    auto r = RunSync(f.loop, [&]() -> Coro<Result<int>> {
      co_return co_await AsyncWithTimeout<int>(f.loop, SleepThen(f.loop, slow ? 20 : 0, 1),
                                               slow ? 1 : 5000);
    }());
    (r ? ok : timeouts)++;
  }
  CHECK(ok == 50);
  CHECK(timeouts == 50);
  int runners = -1;
  CHECK(Eventually([&] {
    RunSync(f.loop, [&]() -> Coro<void> {
      runners = f.loop.runners();
      co_return;
    }());
    return runners == 0;
  }));
}

TEST_CASE("Stop waits for a runner that lost its race before closing the loop") {
  auto loop = std::make_unique<EventLoop>("runner");
  loop->Start();
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto inner = [](EventLoop& l, std::shared_ptr<std::atomic<bool>> flag) -> Coro<int> {
    co_await SleepMs(l, 40);
    *flag = true;
    co_return 1;
  };
  auto r = RunSync(*loop, [&]() -> Coro<Result<int>> {
    co_return co_await AsyncWithTimeout<int>(*loop, inner(*loop, finished), 1);
  }());
  CHECK_FALSE(r.has_value());
  loop->Stop();  // the runner is still sleeping: Stop lets it finish
  CHECK(*finished);
}

TEST_CASE("ComputeEffectiveDeadline takes the earlier limit") {
  auto now = Clock::now();
  CHECK_FALSE(ComputeEffectiveDeadline(now, std::nullopt, std::nullopt).has_value());
  auto req = now + 100ms;
  CHECK(*ComputeEffectiveDeadline(now, req, std::nullopt) == req);
  CHECK(*ComputeEffectiveDeadline(now, req, 50ms) == now + 50ms);
  CHECK(*ComputeEffectiveDeadline(now, req, 500ms) == req);
  CHECK(*ComputeEffectiveDeadline(now, std::nullopt, 5ms) == now + 5ms);
  CHECK(deadline_exceeded(now - 1ms, now));
  CHECK_FALSE(deadline_exceeded(std::nullopt, now));
  CHECK(ms_until(now + 1500us, now) == 2);
  CHECK(ms_until(now - 1ms, now) == 0);
}
