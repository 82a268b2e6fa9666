// RedisPools: a shard's Redis clients — one RedisClient per configured endpoint (a
// RedisPool for redis://, a RedisClusterPool for redis-cluster://), created on
// the shard's loop thread from the parsed `--redis` flags. A shard whose Redis is down
// still starts: pools connect and reconnect in the background, and Ready() (for
// /readyz) says whether every endpoint has a live connection.
//
//   auto eps = ResolveRedisFlags(flags);              // main thread, at start
//   // on the shard's loop thread:
//   auto pools = std::make_unique<RedisPools>(loop, *eps, RedisClientOptions{});
//   RedisClient* p = pools->Get("redis_default");     // from tasks, per node
//
// Close() (also run by an EventLoop shutdown hook if nobody called it) fails pending
// commands with unavailable and closes the connections.
//
// Threads: construct, use, Close and destroy on the loop thread of `loop` (checked in
// debug and sanitizer builds; destroying after the loop has stopped is fine too, once
// closed). Get, pools() and ForEachStats may be called from any thread once constructed
// (the list never changes); the stats may be read anywhere. A pool's own methods are for
// the loop thread (redis/server_pool.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/event_loop.h"
#include "redis/client.h"
#include "redis/endpoint.h"
#include "redis/options.h"
#include "redis/stats.h"

namespace rankd {

class RedisPools {
 public:
  RedisPools(EventLoop& loop, const std::vector<RedisEndpoint>& endpoints,
             RedisClientOptions opts = {});
  ~RedisPools();
  RedisPools(const RedisPools&) = delete;
  RedisPools& operator=(const RedisPools&) = delete;

  // The pool of endpoint `name`; nullptr when no such endpoint is configured.
  RedisClient* Get(std::string_view name) const;
  // Its index in pools(), -1 when no such endpoint is configured.
  int IndexOf(std::string_view name) const;
  // Every endpoint has at least one live connection (but those SetReadyExempt names).
  bool Ready() const;
  // Endpoints whose connections do not gate Ready(): those only the served log writes
  // to, so that a dead log sink never takes the replica out of its balancer. Replaces
  // the previous list; unknown names are ignored. Loop thread.
  void SetReadyExempt(const std::vector<std::string>& names);
  // "" when Ready(); else which endpoints are not, and why, for /readyz's body.
  std::string NotReadyReason() const;
  const std::vector<std::unique_ptr<RedisClient>>& pools() const { return pools_; }
  // Calls fn(endpoint name, stats) per endpoint; the shared_ptr may be kept for scrapes.
  void ForEachStats(
      const std::function<void(const std::string&, std::shared_ptr<const RedisStats>)>& fn) const;

  void Close();  // idempotent

 private:
  const EventLoop& loop_;
  std::vector<std::unique_ptr<RedisClient>> pools_;
  std::vector<bool> exempt_;  // by index in pools_
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards the shutdown hook
};

}  // namespace rankd
