// SpinLock: a test-and-test-and-set lock for critical sections of a few instructions
// (EventLoop's post queue: a push or a swap). Uncontended it costs one exchange and one
// store, about half of a pthread mutex; after a short spin it yields, so a preempted
// holder does not burn the other core. Not for anything longer than a vector push.
//
// Threads: any; meets BasicLockable (usable with std::lock_guard).
#pragma once

#include <atomic>
#include <thread>

namespace rankd {

class SpinLock {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
          spins = 0;
        }
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace rankd
