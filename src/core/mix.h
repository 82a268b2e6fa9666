// Mix64: splitmix64's finalizer, the one hash mix of keys that are often small and dense
// (ids, packed short strings) before they index a power-of-two table. SplitMix64: the
// generator built on it, for the few random numbers rankd draws (reconnect jitter, the
// demo data of `rankd seed`): fast, seedable, reproducible on every platform.
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

// The next number of the splitmix64 stream whose state is `s` (advances it).
inline uint64_t SplitMix64(uint64_t& s) { return Mix64(s += 0x9e3779b97f4a7c15ULL); }

}  // namespace rankd
