// RateBudget: a token bucket of units (bytes) a second, for what a shard writes on its
// clients' behalf (page snapshots: docs/api.md, "Pages"). It admits while the bucket is not
// empty and charges the whole size, so that a write over a second's worth still goes
// once the debt is paid back; the bucket holds at most a second's worth.
//
// Threads: one thread at a time (a shard's loop).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/deadline.h"

namespace rankd {

class RateBudget {
 public:
  // REQUIRES: per_s > 0.
  explicit RateBudget(uint64_t per_s)
      : per_s_(static_cast<double>(per_s)), tokens_(static_cast<double>(per_s)) {}

  // Whether a write of `units` may go at `now`; when it may, it is charged.
  bool Take(uint64_t units, TimePoint now) {
    if (now > at_) {
      double secs = std::chrono::duration<double>(now - at_).count();
      tokens_ = std::min(per_s_, tokens_ + secs * per_s_);
      at_ = now;
    }
    if (tokens_ <= 0) return false;
    tokens_ -= static_cast<double>(units);
    return true;
  }

 private:
  const double per_s_;
  double tokens_;   // may go below 0: the debt of a large write
  TimePoint at_{};  // the last refill (the epoch: the bucket starts full)
};

}  // namespace rankd
