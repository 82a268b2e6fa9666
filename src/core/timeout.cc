#include "core/timeout.h"

namespace rankd {

std::atomic<uint64_t>& LateCompletions() {
  static std::atomic<uint64_t> count{0};
  return count;
}

}  // namespace rankd
