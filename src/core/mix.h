// Mix64: splitmix64's finalizer, the one hash mix of keys that are often small and dense
// (ids, packed short strings) before they index a power-of-two table. SplitMix64: the
// generator built on it, for the few random numbers rankd draws (reconnect jitter, the
// demo data of `rankd seed`): fast, seedable, reproducible on every platform.
//
// Threads: a pure function; any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace rankd {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A 64-bit hash of `bytes` under `seed`: 8 bytes a round through Mix64, the length mixed
// in. Not cryptographic: a seed drawn at random keeps inputs from being chosen to collide.
inline uint64_t HashBytes(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed ^ Mix64(bytes.size() + 0x9e3779b97f4a7c15ULL);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = Mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
  }
  uint64_t w = 0;
  if (i < bytes.size()) std::memcpy(&w, bytes.data() + i, bytes.size() - i);
  return Mix64(h ^ w ^ (uint64_t{bytes.size() - i} << 59));
}

// The next number of the splitmix64 stream whose state is `s` (advances it).
inline uint64_t SplitMix64(uint64_t& s) { return Mix64(s += 0x9e3779b97f4a7c15ULL); }

}  // namespace rankd
