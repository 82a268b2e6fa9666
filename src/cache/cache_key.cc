// The cache's key of a str id (cached_values.h StrIdKey). Threads: any thread (pure, after
// the seed's one-time draw).
#include <cstring>
#include <random>

#include "cache/cached_values.h"
#include "core/mix.h"

namespace rankd {

namespace {

uint64_t Seed() {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return seed;
}

}  // namespace

int64_t StrIdKey(std::string_view id) {
  // 8 bytes a round through splitmix64's finalizer, keyed by the seed and the length.
  uint64_t h = Seed() ^ Mix64(id.size() + 0x9e3779b97f4a7c15ULL);
  size_t i = 0;
  for (; i + 8 <= id.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, id.data() + i, 8);
    h = Mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
  }
  uint64_t w = 0;
  std::memcpy(&w, id.data() + i, id.size() - i);
  h = Mix64(h ^ w ^ (uint64_t{id.size() - i} << 59));
  return static_cast<int64_t>(h);
}

}  // namespace rankd
