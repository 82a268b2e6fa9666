#include "rank/latency_window.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rankd {

void LatencyWindow::Add(int64_t micros) {
  uint32_t v = micros <= 0 ? 0
               : micros >= std::numeric_limits<uint32_t>::max()
                   ? std::numeric_limits<uint32_t>::max()
                   : static_cast<uint32_t>(micros);
  ring_[next_] = v;
  next_ = (next_ + 1) % kSize;
  if (filled_ < kSize) ++filled_;
  ++added_;
}

void LatencyWindow::Clear() { *this = LatencyWindow(); }

int64_t LatencyWindow::Cached(Cache& c, double q) {
  // A window still filling changes a lot per sample: recompute on every change then.
  bool stale =
      c.at == UINT64_MAX || (filled_ < kSize ? c.at != added_ : added_ - c.at >= kRecomputeEvery);
  if (stale) {
    c.value = Quantile(q);
    c.at = added_;
  }
  return c.value;
}

int64_t LatencyWindow::Quantile(double q) const {
  if (filled_ == 0) return 0;
  std::array<uint32_t, kSize> copy;
  std::copy_n(ring_.begin(), filled_, copy.begin());
  // Nearest rank: the smallest sample with at least q of the window at or below it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(filled_)));
  size_t k = rank == 0 ? 0 : rank - 1;
  std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(k),
                   copy.begin() + static_cast<std::ptrdiff_t>(filled_));
  return copy[k];
}

}  // namespace rankd
