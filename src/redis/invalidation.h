// Client-side caching support: what a Redis client tells the shard's cache, and how it
// asks Redis to tell it (docs/cache.md).
//
// Redis 7 tracks the keys a connection reads (CLIENT TRACKING) and, when one changes,
// sends an invalidation message. rankd speaks RESP2, where a connection receives such
// messages only as a subscriber of `__redis__:invalidate`; so each node
// gets one more connection, the tracker (tracker.h), subscribed there, and every data
// connection of the node turns tracking on with REDIRECT to the tracker's client id
// before its first read.
//
// Threads: the loop thread of the shard that owns the client.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rankd {

// What hears about changed keys: the shard's cache (cache/shard_cache.h).
class InvalidationSink {
 public:
  // `key` changed in Redis (written, deleted, expired, evicted); without the endpoint's
  // prefix. Keys outside the prefix are not passed on.
  virtual void OnInvalidate(std::string_view key) = 0;
  // Anything may have changed: Redis flushed, or an invalidation may have been lost (a
  // tracker or data connection dropped, the slot map changed). Every entry read through
  // this client must go, and no read in flight may be stored.
  virtual void OnInvalidateAll() = 0;

 protected:
  ~InvalidationSink() = default;
};

enum class TrackingMode : uint8_t {
  // Redis remembers, per key, which connections read it and tells only them (its
  // memory grows with the keys read: tracking-table-max-keys bounds it).
  kDefault,
  // Redis tells every tracker about every write under the prefixes (no per-key memory;
  // every shard hears every write).
  kBcast,
};

struct TrackingConfig {
  InvalidationSink* sink = nullptr;  // REQUIRES: non-null; outlives the client
  TrackingMode mode = TrackingMode::kDefault;
  // kBcast: the key families to hear about, without the endpoint's prefix ("item:").
  std::vector<std::string> bcast_prefixes;
};

}  // namespace rankd
