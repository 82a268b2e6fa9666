// RedisTracker: the connection of one Redis node that receives the invalidation
// messages for one shard (invalidation.h): it connects like a data connection, asks its own
// client id (CLIENT ID), subscribes to `__redis__:invalidate` and then only listens.
//   kDefault: data connections redirect their tracking to redirect_id().
//   kBcast: the tracker itself turns tracking on, BCAST over the prefixes, redirected to
//           itself (before SUBSCRIBE: a RESP2 subscriber may send nothing else), so the
//           data connections track nothing and their loss loses no invalidation.
//
// Messages become sink calls: a list of keys -> OnInvalidate per key under the
// endpoint's prefix (others are ignored); a nil list (FLUSHALL, FLUSHDB) ->
// OnInvalidateAll. A reply of any other shape drops the connection, which reconnects
// and subscribes again.
//
// `on_change` runs whenever redirect_id() changes (subscribed, or lost: then it is 0);
// the owner then flushes what was read under the old id and re-tracks its data
// connections. It runs synchronously, possibly inside the connection's read handler or a
// push: it must not close this tracker.
//
// Threads: create, use, Close and destroy on the loop thread of `loop` only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/event_loop.h"
#include "redis/connection.h"
#include "redis/endpoint.h"
#include "redis/invalidation.h"
#include "redis/options.h"
#include "redis/stats.h"

namespace rankd {

class RedisTracker final : private PushSink {
 public:
  // `config` must outlive the tracker.
  RedisTracker(EventLoop& loop, const RedisEndpoint& endpoint, const RedisClientOptions& opts,
               RedisStats& stats, const TrackingConfig& config, std::function<void()> on_change);
  ~RedisTracker();
  RedisTracker(const RedisTracker&) = delete;
  RedisTracker& operator=(const RedisTracker&) = delete;

  void Start();
  void Close();  // idempotent; REQUIRES: not inside a push or on_change

  // The tracker's client id once it is subscribed, else 0.
  int64_t redirect_id() const { return id_; }

 private:
  enum class Step : uint8_t { kDown, kAwaitId, kAwaitTracking, kAwaitSubscribed, kListening };

  void OnConnectionChange();
  void OnPush(RespView reply) override;
  void OnMessage(RespView payload);
  // A reply of the wrong shape: drop the connection (later, outside the read).
  void Misbehaved(std::string why);
  void SetId(int64_t id);

  EventLoop& loop_;
  const RedisEndpoint& endpoint_;
  const TrackingConfig& config_;
  InvalidationSink* sink_;
  std::function<void()> on_change_;
  std::unique_ptr<RedisConnection> conn_;
  Step step_ = Step::kDown;
  int64_t id_ = 0;
  int64_t pending_id_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rankd
