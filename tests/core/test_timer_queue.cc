// TimerQueue: order, cancellation, and that a cancelled timer leaves the heap at once
// (memory follows the live timers, not their due times).
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <random>
#include <vector>

#include "core/event_loop.h"

using namespace rankd;

namespace {
// Runs fn on the loop thread and waits for it.
template <class F>
void OnLoop(EventLoop& loop, F fn) {
  std::promise<void> done;
  REQUIRE(loop.Post([&] {
    fn();
    done.set_value();
  }));
  done.get_future().wait();
}
}  // namespace

TEST_CASE("TimerQueue: Cancel removes the entry at once") {
  EventLoop loop;
  loop.Start();
  OnLoop(loop, [&] {
    TimerQueue& q = loop.timers();
    std::vector<TimerQueue::Id> ids;
    for (int i = 0; i < 10000; ++i) ids.push_back(q.Start(60000, [] {}));
    CHECK(q.entries() == 10000);
    for (auto id : ids) CHECK(q.Cancel(id));
    // Before the fix the heap kept every cancelled entry until its due time (60 s).
    CHECK(q.entries() == 0);
    CHECK(q.pending() == 0);
    CHECK_FALSE(q.Cancel(ids.front()));  // already cancelled
    CHECK_FALSE(q.Cancel(0));
  });
  loop.Stop();
}

TEST_CASE("TimerQueue: random cancels keep the rest firing in due order") {
  EventLoop loop;
  loop.Start();
  std::vector<int> fired;
  std::vector<int> want;
  std::promise<void> all;
  OnLoop(loop, [&] {
    TimerQueue& q = loop.timers();
    std::mt19937 rng(7);
    std::vector<std::pair<TimerQueue::Id, int>> ids;
    for (int i = 0; i < 400; ++i) {
      int ms = static_cast<int>(rng() % 40);
      ids.push_back({q.Start(static_cast<uint64_t>(ms), [&fired, i] { fired.push_back(i); }), ms});
    }
    std::vector<std::pair<int, int>> kept;  // (due ms, start order)
    for (int i = 0; i < 400; ++i) {
      if (rng() % 2) {
        CHECK(q.Cancel(ids[static_cast<size_t>(i)].first));
      } else {
        kept.push_back({ids[static_cast<size_t>(i)].second, i});
      }
    }
    CHECK(q.entries() == kept.size());
    std::stable_sort(kept.begin(), kept.end(), [](auto a, auto b) { return a.first < b.first; });
    for (auto [ms, i] : kept) want.push_back(i);
    q.Start(100, [&] { all.set_value(); });
  });
  all.get_future().wait();
  CHECK(fired == want);  // due order, FIFO among equal due times
  OnLoop(loop, [&] { CHECK(loop.timers().entries() == 0); });
  loop.Stop();
}

TEST_CASE("TimerQueue: a callback may cancel a later timer and start a new one") {
  EventLoop loop;
  loop.Start();
  std::atomic<int> ran{0};
  std::promise<void> done;
  OnLoop(loop, [&] {
    TimerQueue& q = loop.timers();
    TimerQueue::Id later = q.Start(20, [&] { ran += 100; });
    q.Start(1, [&, later] {
      ++ran;
      CHECK(loop.timers().Cancel(later));
      loop.timers().Start(1, [&] { done.set_value(); });
    });
  });
  done.get_future().wait();
  CHECK(ran == 1);
  loop.Stop();
}
