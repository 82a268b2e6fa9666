// LineRateLimit: at most one log line per second per key (an error code), so that a
// client sending deadline_ms: 1 in a loop, or a Redis that is down, writes a line a
// second, not a line per request. The next line allowed for a key learns how many of
// that key were refused since the previous one (it ends "(N suppressed)"); refused lines
// after the last allowed one are never reported.
//
// Threads: any thread. Lock-free (two atomics per key), so every shard shares one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rankd {

template <size_t Keys>
class LineRateLimit {
 public:
  static constexpr int64_t kIntervalMs = 1000;

  // True when a line of `key` may be written at `now_ms` (a monotonic clock, in ms); then
  // `*suppressed` is how many lines of `key` were refused since the last one allowed.
  // Of lines racing for the same second, exactly one wins.
  // REQUIRES: key < Keys.
  bool Allow(size_t key, int64_t now_ms, uint64_t* suppressed) {
    int64_t next = next_ms_[key].load(std::memory_order_relaxed);
    if (now_ms < next || !next_ms_[key].compare_exchange_strong(next, now_ms + kIntervalMs,
                                                                std::memory_order_relaxed)) {
      refused_[key].fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    *suppressed = refused_[key].exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  std::atomic<int64_t> next_ms_[Keys] = {};  // the first ms a line of the key may be written
  std::atomic<uint64_t> refused_[Keys] = {};
};

}  // namespace rankd
