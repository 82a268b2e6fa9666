// Published<T>: an immutable snapshot that one thread replaces now and then and any
// thread reads, each reader keeping the snapshot it got alive for as long as it holds it
// (a /metrics scrape reading the series of a shard's plans while the shard installs new
// ones). The lock covers a pointer copy only: neither side waits on the other's work.
//
// Threads: any.
#pragma once

#include <memory>
#include <mutex>

#include "core/spin_lock.h"

namespace rankd {

template <class T>
class Published {
 public:
  void Set(std::shared_ptr<const T> next) {
    {
      std::lock_guard lk(mu_);
      current_.swap(next);
    }
    // `next` (the previous snapshot) is released here, outside the lock.
  }
  std::shared_ptr<const T> Get() const {
    std::lock_guard lk(mu_);
    return current_;
  }

 private:
  mutable SpinLock mu_;
  std::shared_ptr<const T> current_;
};

}  // namespace rankd
