// MetricValue and MetricHistogram (core/metric_value.h): arithmetic like the integer they
// replace, Prometheus bucket bounds (a value equal to a bound is in its bucket), and a
// reader thread that sees every counter whole and never going back while the owner
// counts (the runtime suite runs this under TSan).
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <thread>

#include "core/metric_value.h"

using namespace rankd;

TEST_CASE("MetricValue: counts and reads like an integer") {
  MetricValue<uint64_t> c;
  ++c;
  c += 4;
  CHECK(c == 5);
  MetricValue<size_t> g = 10;
  g = g - 3 + 1;
  --g;
  CHECK(g.value() == 7);
  MetricValue<uint64_t> copy = c;
  ++c;
  CHECK(copy == 5);
  CHECK(c == 6);
}

TEST_CASE("MetricHistogram: a value equal to a bound is in that bound's bucket") {
  static constexpr std::array<double, 3> kBounds = {0.1, 0.5, 1.0};
  MetricHistogram h(kBounds);
  for (double v : {0.05, 0.1, 0.3, 0.5, 1.0, 7.0, 9.0}) h.Observe(v);
  CHECK(h.bucket(0) == 2);  // 0.05, 0.1
  CHECK(h.bucket(1) == 2);  // 0.3, 0.5
  CHECK(h.bucket(2) == 1);  // 1.0
  CHECK(h.bucket(3) == 2);  // +Inf
  CHECK(h.sum() == doctest::Approx(17.95));
}

TEST_CASE("MetricValue: a reader on another thread never sees a counter go back") {
  MetricValue<uint64_t> c;
  std::atomic<bool> done{false};
  bool monotonic = true;
  std::thread reader([&] {
    uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      uint64_t v = c;
      if (v < last) monotonic = false;
      last = v;
    }
  });
  for (int i = 0; i < 200000; ++i) ++c;
  done.store(true, std::memory_order_release);
  reader.join();
  CHECK(monotonic);
  CHECK(c == 200000);
}
