// LineRateLimit: a line a second per key, and the count of the refused ones on the next.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/line_rate_limit.h"

using namespace rankd;

TEST_CASE("one line a second per key; the next one counts the refused") {
  LineRateLimit<3> limit;
  uint64_t suppressed = 99;
  CHECK(limit.Allow(0, 5000, &suppressed));
  CHECK(suppressed == 0);
  for (int64_t t = 5000; t < 6000; t += 10) CHECK_FALSE(limit.Allow(0, t, &suppressed));
  // Another key has its own second.
  CHECK(limit.Allow(1, 5500, &suppressed));
  CHECK(suppressed == 0);
  CHECK(limit.Allow(0, 6000, &suppressed));
  CHECK(suppressed == 100);
  CHECK_FALSE(limit.Allow(0, 6999, &suppressed));
  CHECK(limit.Allow(0, 9000, &suppressed));  // a quiet spell: the next line is at once
  CHECK(suppressed == 1);
  CHECK(limit.Allow(2, 0, &suppressed));  // the clock's first ms
}

TEST_CASE("threads racing for the same second: one wins, the others are counted") {
  LineRateLimit<1> limit;
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      uint64_t suppressed = 0;
      for (int k = 0; k < 1000; ++k) allowed += limit.Allow(0, 7000, &suppressed);
    });
  for (auto& t : threads) t.join();
  CHECK(allowed == 1);
  uint64_t suppressed = 0;
  REQUIRE(limit.Allow(0, 8000, &suppressed));
  CHECK(suppressed == 3999);
}
