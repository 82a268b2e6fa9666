// CacheSink: what a Redis endpoint's client tells the shard's cache (redis/invalidation.h):
// the invalidations of that endpoint, tagged with its index.
//
// Threads: the shard's loop thread (the clients call it there).
#pragma once

#include <cstdint>
#include <string_view>

#include "cache/shard_cache.h"
#include "redis/invalidation.h"

namespace rankd {

class CacheSink final : public InvalidationSink {
 public:
  CacheSink(ShardCache& cache, uint16_t endpoint) : cache_(cache), endpoint_(endpoint) {}
  void OnInvalidate(std::string_view key) override { cache_.Invalidate(endpoint_, key); }
  void OnInvalidateAll() override { cache_.InvalidateAll(endpoint_); }

 private:
  ShardCache& cache_;
  uint16_t endpoint_;
};

}  // namespace rankd
