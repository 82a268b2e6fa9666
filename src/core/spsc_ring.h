// SpscRing: a bounded lock-free byte ring for one producer thread and one consumer
// thread. The producer pushes whole records (all or nothing) and never blocks: a record
// that does not fit is refused, and the caller counts it. The consumer reads what is
// there in at most two contiguous pieces and releases it when done. Used for the access
// log: each shard loop owns one ring, a writer thread drains them all, and no lock is
// shared between shards.
//
// Threads: TryPush on the producer thread only; Readable/Release on the consumer thread
// only; capacity/empty from either.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace rankd {

class SpscRing {
 public:
  // REQUIRES: capacity is a power of two.
  explicit SpscRing(size_t capacity)
      : cap_(capacity), mask_(capacity - 1), buf_(std::make_unique<char[]>(capacity)) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  size_t capacity() const { return cap_; }

  // Appends `a` then `b` as one record; false (nothing written) if both do not fit.
  bool TryPush(std::string_view a, std::string_view b = {}) {
    size_t n = a.size() + b.size();
    size_t tail = tail_.load(std::memory_order_relaxed);
    // Acquire: the consumer's reads of the bytes it released happened before.
    size_t head = head_.load(std::memory_order_acquire);
    if (cap_ - (tail - head) < n) return false;
    Copy(tail, a);
    Copy(tail + a.size(), b);
    // Release: the bytes are written before the consumer can see the new tail.
    tail_.store(tail + n, std::memory_order_release);
    return true;
  }

  // The readable bytes, as up to two pieces (the second when they wrap around).
  struct Pieces {
    std::string_view first, second;
    size_t size() const { return first.size() + second.size(); }
  };
  Pieces Readable() const {
    size_t head = head_.load(std::memory_order_relaxed);
    size_t tail = tail_.load(std::memory_order_acquire);
    size_t n = tail - head, at = head & mask_;
    size_t first = std::min(n, cap_ - at);
    return {{buf_.get() + at, first}, {buf_.get(), n - first}};
  }
  // Gives back the first `n` readable bytes to the producer.
  void Release(size_t n) { head_.fetch_add(n, std::memory_order_release); }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  void Copy(size_t pos, std::string_view s) {
    if (s.empty()) return;  // an empty view may have a null data(): memcpy forbids it
    size_t at = pos & mask_;
    size_t first = std::min(s.size(), cap_ - at);
    std::memcpy(buf_.get() + at, s.data(), first);
    if (first < s.size()) std::memcpy(buf_.get(), s.data() + first, s.size() - first);
  }

  const size_t cap_, mask_;
  std::unique_ptr<char[]> buf_;
  // Monotonic byte counts (wrap only after 2^64 bytes); apart to avoid false sharing.
  alignas(64) std::atomic<size_t> head_{0};  // consumer
  alignas(64) std::atomic<size_t> tail_{0};  // producer
};

}  // namespace rankd
