// RedisClientOptions: the knobs of a shard's Redis pools (connections per endpoint,
// in-flight cap, connect timeout, reconnect backoff). Plain value type: any thread.
#pragma once

#include <cstdint>

namespace rankd {

struct RedisClientOptions {
  int connections_per_endpoint = 2;
  // Commands in flight per connection before new batches wait for a free one. A batch
  // is never split, so a batch larger than the cap still goes to an idle connection.
  int max_inflight_per_connection = 4096;
  uint64_t connect_timeout_ms = 1000;  // name lookup + TCP connect + AUTH/SELECT/PING
  // Reconnect delay: doubles from min to max, each draw jittered into [d/2, d] so that
  // the shards' connections do not all retry in the same millisecond.
  uint64_t backoff_min_ms = 50;
  uint64_t backoff_max_ms = 2000;
};

}  // namespace rankd
