// The cache's key of a str id (cached_values.h StrIdKey). Threads: any thread (pure, after
// the seed's one-time draw).
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

int64_t StrIdKey(std::string_view id) { return static_cast<int64_t>(HashBytes(id, Seed())); }

}  // namespace rankd
