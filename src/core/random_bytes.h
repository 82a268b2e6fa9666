// FillRandom: bytes from the kernel's random source (getrandom), for what must not be
// guessed: cursor keys, page snapshot ids, served ids. RandomBuffer hands the same bytes
// out a few at a time, so that an id per request costs a copy, not a system call.
//
// Threads: FillRandom, any thread. A RandomBuffer, one thread at a time (a shard's loop).
#pragma once

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace rankd {

// REQUIRES: the kernel's source works (Linux >= 3.17); rankd aborts otherwise, since it
// cannot make an unguessable value any other way.
inline void FillRandom(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      LogError("getrandom failed: no random bytes for a key or id");
      std::abort();
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

// kBytes of FillRandom at a time: one getrandom per 256 served ids. Bytes handed out are
// wiped from the buffer, so a later leak of its memory shows no id already issued.
class RandomBuffer {
 public:
  static constexpr size_t kBytes = 4096;

  // REQUIRES: n <= kBytes.
  void Take(void* out, size_t n) {
    if (kBytes - used_ < n) {
      FillRandom(buf_.data(), kBytes);
      used_ = 0;
    }
    std::memcpy(out, buf_.data() + used_, n);
    std::memset(buf_.data() + used_, 0, n);
    used_ += n;
  }

 private:
  std::array<uint8_t, kBytes> buf_{};
  size_t used_ = kBytes;  // all taken: the first Take fills it
};

}  // namespace rankd
