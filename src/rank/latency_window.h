// LatencyWindow: the last N latencies of one plan on one shard, and quantiles of them.
// Admission reads its median (is a request's remaining deadline long enough?) and the
// quality factor its p95; both are asked far more often than a window changes, so a
// quantile is computed once per `kRecomputeEvery` new samples (an nth_element over N)
// and cached, which keeps the per-request cost a ring write and a compare.
//
// Threads: one owner thread (a shard's loop).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rankd {

class LatencyWindow {
 public:
  static constexpr size_t kSize = 200;
  static constexpr uint32_t kRecomputeEvery = 16;

  void Add(int64_t micros);
  size_t size() const { return filled_; }
  // Samples added since the last Clear (not capped at kSize).
  uint64_t added() const { return added_; }
  // The q-quantile (0..1, nearest rank) of the samples in the window, µs; 0 when empty.
  // Cached until kRecomputeEvery more samples came (or the window was not yet full).
  int64_t Median() { return Cached(median_, 0.5); }
  int64_t P95() { return Cached(p95_, 0.95); }
  void Clear();

 private:
  struct Cache {
    int64_t value = 0;
    uint64_t at = UINT64_MAX;  // added_ when computed; UINT64_MAX: never
  };
  int64_t Cached(Cache& c, double q);
  int64_t Quantile(double q) const;

  std::array<uint32_t, kSize> ring_{};  // µs, saturated at UINT32_MAX (71 minutes)
  size_t next_ = 0;
  size_t filled_ = 0;
  uint64_t added_ = 0;
  Cache median_, p95_;
};

}  // namespace rankd
