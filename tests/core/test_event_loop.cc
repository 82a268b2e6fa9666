// The EventLoop lifecycle (Idle -> Starting -> Running -> Stopping -> Stopped), plus Defer
// and the timer pool.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/event_loop.h"
#include "core/run_sync.h"

using namespace rankd;
using namespace std::chrono_literals;

namespace {
// Blocks until fn ran on the loop; false if the loop refused it.
bool PostAndWait(EventLoop& loop, std::function<void()> fn) {
  try {
    RunOnLoop(loop, std::move(fn));
    return true;
  } catch (const LoopNotRunning&) {
    return false;
  }
}
}  // namespace

TEST_CASE("Post before Start returns false and callback never executes") {
  EventLoop loop;
  std::atomic<int> ran{0};
  CHECK_FALSE(loop.Post([&] { ++ran; }));
  CHECK(loop.state() == EventLoop::State::kIdle);
  loop.Start();
  loop.Stop();
  CHECK(ran == 0);
}

TEST_CASE("Start reaches Running and Post runs on the loop thread") {
  EventLoop loop;
  loop.Start();
  CHECK(loop.state() == EventLoop::State::kRunning);
  std::thread::id on;
  CHECK(PostAndWait(loop, [&] { on = std::this_thread::get_id(); }));
  CHECK(on != std::this_thread::get_id());
  loop.Stop();
  CHECK(loop.state() == EventLoop::State::kStopped);
}

TEST_CASE("Post after Stop returns false and callback never executes") {
  EventLoop loop;
  loop.Start();
  loop.Stop();
  std::atomic<int> ran{0};
  CHECK_FALSE(loop.Post([&] { ++ran; }));
  std::this_thread::sleep_for(5ms);
  CHECK(ran == 0);
}

TEST_CASE("Post during Stop is rejected and rejected callbacks never execute") {
  for (int round = 0; round < 20; ++round) {
    EventLoop loop;
    loop.Start();
    std::atomic<int> accepted{0}, executed{0};
    std::atomic<bool> go{true};
    std::thread producer([&] {
      while (go) {
        if (loop.Post([&] { ++executed; })) ++accepted;
      }
    });
    std::this_thread::sleep_for(1ms);
    loop.Stop();
    go = false;
    producer.join();
    // Every accepted callback ran (Stop drains accepted work); no rejected one did.
    CHECK(executed == accepted);
  }
}

TEST_CASE("Multiple Stop calls are idempotent") {
  EventLoop loop;
  loop.Start();
  loop.Stop();
  loop.Stop();
  loop.Stop();
  CHECK(loop.state() == EventLoop::State::kStopped);
}

TEST_CASE("Concurrent Stop calls from several threads") {
  EventLoop loop;
  loop.Start();
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&] { loop.Stop(); });
  for (auto& t : ts) t.join();
  CHECK(loop.state() == EventLoop::State::kStopped);
}

TEST_CASE("Stop from within callback") {
  auto loop = std::make_unique<EventLoop>();
  loop->Start();
  std::atomic<bool> after_stop_post{true};
  CHECK(loop->Post([&] {
    loop->Stop();
    after_stop_post = loop->Post([] {});
  }));
  while (loop->state() != EventLoop::State::kStopped) std::this_thread::sleep_for(100us);
  CHECK_FALSE(after_stop_post);
  loop.reset();  // destructor joins the thread from here
}

TEST_CASE("Destruction without Stop") {
  std::atomic<int> ran{0};
  {
    EventLoop loop;
    loop.Start();
    CHECK(PostAndWait(loop, [&] { ++ran; }));
  }
  CHECK(ran == 1);
}

TEST_CASE("Destruction of a never-started loop") {
  EventLoop loop;
  CHECK(loop.state() == EventLoop::State::kIdle);
}

TEST_CASE("Accepted work queued before Stop still runs") {
  EventLoop loop;
  loop.Start();
  std::atomic<int> ran{0};
  CHECK(loop.Post([&] { std::this_thread::sleep_for(20ms); }));
  for (int i = 0; i < 100; ++i) CHECK(loop.Post([&] { ++ran; }));
  loop.Stop();
  CHECK(ran == 100);
}

TEST_CASE("Posts from many threads all run, in order per producer") {
  EventLoop loop;
  loop.Start();
  constexpr int kThreads = 4, kEach = 10000;
  std::vector<std::vector<int>> seen(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) REQUIRE(loop.Post([&, t, i] { seen[t].push_back(i); }));
    });
  for (auto& t : ts) t.join();
  loop.Stop();
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(seen[t].size() == kEach);
    for (int i = 0; i < kEach; ++i) CHECK(seen[t][i] == i);
  }
}

TEST_CASE("Defer runs after the current callback, in the same turn, in order") {
  EventLoop loop;
  loop.Start();
  std::vector<int> order;
  CHECK(PostAndWait(loop, [&] {
    loop.Defer([&] {
      order.push_back(2);
      loop.Defer([&] { order.push_back(3); });
    });
    order.push_back(1);
  }));
  std::atomic<bool> done{false};
  while (!done) {
    PostAndWait(loop, [&] { done = order.size() == 3; });
  }
  loop.Stop();
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("NextTurn runs in the next turn, after its timers; Defer stays in this one") {
  EventLoop loop;
  loop.Start();
  std::vector<std::string> order;
  std::atomic<bool> done{false};
  CHECK(PostAndWait(loop, [&] {
    loop.NextTurn([&] {
      order.push_back("next_turn");
      done = true;
    });
    loop.timers().Start(0, [&] { order.push_back("timer"); });
    loop.Defer([&] { order.push_back("defer"); });
  }));
  while (!done) std::this_thread::sleep_for(100us);
  loop.Stop();
  CHECK(order == std::vector<std::string>{"defer", "timer", "next_turn"});
}

TEST_CASE("NextTurn work queued from a NextTurn batch waits for the turn after") {
  EventLoop loop;
  loop.Start();
  int turns = 0, timers_fired = 0;
  bool same_turn = false;
  std::atomic<bool> done{false};
  // Each round starts a 0 ms timer: it fires at the start of the next turn, so it has
  // fired before the next round runs only if that round waited for a new turn.
  std::function<void()> again = [&] {
    if (timers_fired != turns) same_turn = true;
    if (++turns == 100) {
      done = true;
      return;
    }
    loop.timers().Start(0, [&] { ++timers_fired; });
    loop.NextTurn(again);
  };
  CHECK(loop.Post([&] { loop.NextTurn(again); }));
  while (!done) std::this_thread::sleep_for(100us);
  loop.Stop();
  CHECK(turns == 100);
  CHECK_FALSE(same_turn);
}

TEST_CASE("BeforePoll runs once after the turn's deferred work; Cancel withdraws it") {
  EventLoop loop;
  loop.Start();
  std::vector<std::string> order;
  std::atomic<bool> done{false};
  int a = 0, b = 0, c = 0;
  auto log = [](void* p) { ++*static_cast<int*>(p); };
  std::pair<EventLoop*, int*> canceller{&loop, &c};
  CHECK(PostAndWait(loop, [&] {
    loop.BeforePoll(log, &a);
    loop.BeforePoll(log, &b);
    loop.CancelBeforePoll(&b);
    loop.Defer([&] {
      order.push_back("defer");
      // Queued while the turn runs: still before this turn's poll.
      loop.BeforePoll(
          [](void* p) {
            auto* o = static_cast<std::vector<std::string>*>(p);
            o->push_back("before_poll");
          },
          &order);
    });
    // A call queued by a before-poll call runs in the same pass; one it cancels does not.
    loop.BeforePoll(
        [](void* p) {
          auto* self = static_cast<std::pair<EventLoop*, int*>*>(p);
          self->first->CancelBeforePoll(self->second);
        },
        &canceller);
    loop.BeforePoll(log, &c);
    loop.timers().Start(5, [&] { done = true; });
  }));
  while (!done) std::this_thread::sleep_for(100us);
  loop.Stop();
  CHECK(a == 1);
  CHECK(b == 0);
  CHECK(c == 0);
  CHECK(order == std::vector<std::string>{"defer", "before_poll"});
}

TEST_CASE("TurnOverBudget follows the budget") {
  EventLoop loop;
  loop.Start();
  bool zero = false, large = true;
  CHECK(PostAndWait(loop, [&] {
    loop.set_turn_budget_us(0);
    std::this_thread::sleep_for(10us);
    zero = loop.TurnOverBudget();
    loop.set_turn_budget_us(60'000'000);
    large = loop.TurnOverBudget();
  }));
  loop.Stop();
  CHECK(zero);
  CHECK_FALSE(large);
}

TEST_CASE("Timer pool reuses handles and closes them at Stop") {
  EventLoop loop;
  loop.Start();
  uv_timer_t* first = nullptr;
  uv_timer_t* second = nullptr;
  CHECK(PostAndWait(loop, [&] {
    first = loop.AcquireTimer();
    loop.ReleaseTimer(first);
    second = loop.AcquireTimer();
    // Left acquired on purpose: Stop must still close and free it (ASan checks).
  }));
  CHECK(first == second);
  loop.Stop();
}
