// Mix64: splitmix64's finalizer, the one hash mix of keys that are often small and dense
// (ids, packed short strings) before they index a power-of-two table.
//
// Threads: a pure function; any thread.
#pragma once

#include <cstdint>

namespace rankd {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace rankd
