// RedisPool: one shard's connections to one Redis endpoint, and the one way tasks talk
// to Redis: Batch(), which sends a whole batch of commands on one connection before the
// caller suspends, so they leave in one write and cost one round trip.
//
// Replies: the connections are data connections (connection.h, raw replies): each
// batch is a ReplyWaiter whose replies' RESP bytes are appended to one RespReplies
// (resp_replies.h) as they are read, no reply object per value. The waiting coroutine is
// resumed later through EventLoop::Defer, never inside the read handler. Redis has no
// per-command timeout, so the caller's deadline is a timer of ours: when it wins, the batch fails
// with deadline_exceeded and replies that still arrive are dropped and counted.
//
// Threads: create, use, Close and destroy on the loop thread of `loop` only (the entry
// points check it in debug and sanitizer builds; a pool already closed may be destroyed
// after its loop has stopped). stats() and shared_stats() may be read from any thread.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "redis/client.h"
#include "redis/command_batch.h"
#include "redis/connection.h"
#include "redis/endpoint.h"
#include "redis/invalidation.h"
#include "redis/options.h"
#include "redis/resp_replies.h"
#include "redis/stats.h"
#include "redis/tracker.h"

namespace rankd {

struct PendingBatch;     // server_pool.cc
struct PendingBatchRef;  // server_pool.cc

class RedisPool final : public RedisClient {
 public:
  // Starts connecting at once; a Redis that is down is retried in the background. The
  // counters go to `stats` (a cluster's node pools share their endpoint's).
  RedisPool(EventLoop& loop, RedisEndpoint endpoint, RedisClientOptions opts,
            std::shared_ptr<RedisStats> stats = std::make_shared<RedisStats>());
  ~RedisPool() override;  // Close()s if needed

  // RedisClient::Batch on one connection: every command leaves in one write. Fails
  // with unavailable when no connection is live or the one used is lost before every
  // reply came, backend_error when it is dropped over a bad reply (over ReplyLimits,
  // protocol error), deadline_exceeded when `deadline` passes first (also when it
  // already has). While every connection is busy up to its in-flight cap, or still
  // connecting, the batch waits (bounded by the deadline).
  Coro<Result<RespReplies>> Batch(RedisCommands commands, Deadline deadline) override;
  using RedisClient::Batch;

  // At least one connection has completed its handshake and is not lost.
  bool live() const override;
  // Why the pool is not live ("connect failed: Connection refused"), "" when live.
  std::string NotLiveReason() const override;
  void Close() override;

  void EnableTracking(const TrackingConfig& config) override;
  bool tracking_ready() const override;
  void SetTrackingPrefixes(std::vector<std::string> prefixes) override;

 private:
  friend struct PendingBatch;
  // The body of Batch. The reference is a parameter so that it is
  // released with the frame even if the task is never awaited.
  Coro<Result<RespReplies>> Run(PendingBatchRef ref);
  struct TrackingWaiter;
  void OnTrackingReply(RespView reply);

  void OnConnectionChange(size_t i);
  // A tracker for tracking_ (a new connection to the endpoint), started.
  void StartTracker();
  void OnTrackerChange();
  // Before a batch goes out on conns_[i]: turns its tracking on (or re-points it at a
  // new tracker) in the same write, ahead of the batch's reads.
  void EnsureTracked(size_t i);
  void Dispatch(PendingBatch* b);
  void Send(RedisConnection* c, PendingBatch* b);
  RedisConnection* PickConnection(size_t n);
  bool AnyConnectingOrLive() const;
  void Finish(PendingBatch* b, std::optional<Error> error);
  // Fails a batch not yet written whose deadline passed (Finish counts it in
  // expired_unsent, as it does a queued batch whose deadline timer fires).
  void FinishExpired(PendingBatch* b);
  void SchedulePump();
  void Pump();
  // The batch's error: `what` (fit for clients) after the endpoint's name; `detail`
  // (for the log) after its address, with the batch's first command and key.
  Error BatchError(const PendingBatch* b, ErrorCode code, std::string_view what,
                   std::string_view detail) const;
  Error UnavailableError(const PendingBatch* b, std::string_view what,
                         std::string_view detail) const;

  EventLoop& loop_;
  RedisClientOptions opts_;
  std::vector<std::unique_ptr<RedisConnection>> conns_;
  std::deque<PendingBatch*> queue_;  // waiting for a connection; each holds a ref
  bool pump_scheduled_ = false;
  bool closed_ = false;
  size_t next_ = 0;  // round-robin start among equals
  // Client-side caching (EnableTracking); tracked_to_[i]: the tracker id conns_[i]
  // redirects to in its current session, 0 = not tracking.
  std::optional<TrackingConfig> tracking_;
  std::unique_ptr<RedisTracker> tracker_;
  std::vector<int64_t> tracked_to_;
  std::vector<std::unique_ptr<TrackingWaiter>> tracking_waiters_;  // one per connection
  int64_t tracker_id_ = 0;      // the id the sink last heard about
  std::string tracking_error_;  // Redis refused CLIENT TRACKING: caching stays off
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards Defer'd pumps
};

}  // namespace rankd
