// FillRandom: bytes from the kernel's random source (getrandom), for what must not be
// guessed: cursor keys, page snapshot ids.
//
// Threads: any thread.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

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

}  // namespace rankd
