// RedisClientOptions: the knobs of a shard's Redis pools (connections per endpoint,
// in-flight cap, connect timeout, reconnect backoff, reply limits). Plain value types:
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rankd {

// What one reply from Redis may cost before the connection is failed (resp_scanner.h).
struct ReplyLimits {
  // Bytes of one top-level reply, headers included (--redis-max-reply-bytes).
  uint64_t max_bytes = uint64_t{64} << 20;
  // Arrays nested inside one reply (--redis-max-reply-depth, 1..7: the scanner's stack
  // of open arrays holds 7).
  // Our commands' replies nest at most 1 deep (HGETALL, LRANGE, HMGET, SMISMEMBER).
  int max_depth = 4;
  // Elements announced by one reply's arrays. A reply is kept as its bytes, but what
  // reads it spends per element (a row, a cell: tens of bytes each), so this caps what a
  // reply of tiny elements ("+\r\n" x N) can make a reader allocate.
  uint64_t max_elements = uint64_t{1} << 20;
};

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
  ReplyLimits reply_limits{};
  // Redis Cluster: MOVED/ASK redirects followed per command (--redis-max-redirects);
  // past them the redirect's error reply is the command's reply.
  int max_redirects = 5;
  // Redis Cluster: nodes one CLUSTER SLOTS reply may name (--redis-max-cluster-nodes); a
  // reply naming more is refused and the slot map kept.
  size_t max_cluster_nodes = 1000;
};

}  // namespace rankd
