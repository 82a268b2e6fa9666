// MetricValue and MetricHistogram: the counters and gauges a layer keeps for /metrics. One thread
// writes each (its owner: a shard's loop, or the main thread), any thread reads it (a
// scrape). They are relaxed atomics written with a plain load and store, not a
// read-modify-write: an increment costs what a plain integer's does (no lock prefix, no
// mutex a scrape could hold), and a reader sees each value whole, though not all of
// them at one instant.
//
// A value more than one thread writes (a CPU worker and the loop) stays a
// std::atomic with fetch_add.
//
// Threads: the owner writes; any thread reads. Copies read the value (on the owner's
// thread, like any write).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace rankd {

template <class T>
class MetricValue {
 public:
  MetricValue() = default;
  MetricValue(T v) : v_(v) {}  // NOLINT: reads like the integer it replaces
  MetricValue(const MetricValue& o) : v_(o.value()) {}
  MetricValue& operator=(const MetricValue& o) { return *this = o.value(); }

  // Owner thread.
  MetricValue& operator=(T v) {
    v_.store(v, std::memory_order_relaxed);
    return *this;
  }
  MetricValue& operator+=(T n) { return *this = value() + n; }
  MetricValue& operator-=(T n) { return *this = value() - n; }
  MetricValue& operator++() { return *this += T{1}; }
  MetricValue& operator--() { return *this -= T{1}; }

  // Any thread.
  T value() const { return v_.load(std::memory_order_relaxed); }
  operator T() const { return value(); }  // NOLINT: arithmetic reads like the integer's

 private:
  std::atomic<T> v_{};
};

// A Prometheus histogram with fixed upper bounds (the last bucket is +Inf). The bounds
// outlive it (they are constants).
class MetricHistogram {
 public:
  explicit MetricHistogram(std::span<const double> bounds)
      : bounds_(bounds), buckets_(std::make_unique<MetricValue<uint64_t>[]>(bounds.size() + 1)) {}

  // Owner thread.
  void Observe(double v) {
    auto i =
        static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
    ++buckets_[i];
    sum_ += v;
  }

  // Any thread.
  std::span<const double> bounds() const { return bounds_; }
  // Observations in bucket i alone (not cumulative); i == bounds().size() is +Inf.
  uint64_t bucket(size_t i) const { return buckets_[i].value(); }
  double sum() const { return sum_.value(); }

 private:
  std::span<const double> bounds_;
  std::unique_ptr<MetricValue<uint64_t>[]> buckets_;
  MetricValue<double> sum_;
};

}  // namespace rankd
