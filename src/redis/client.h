// RedisClient: what tasks talk to for one configured endpoint — a single server
// (RedisPool) or a Redis Cluster (RedisClusterPool). Either way a task hands its whole
// batch of commands to Batch() before it suspends and gets one reply per command, in
// order; the endpoint's counters are one RedisStats, whatever the number of servers.
//
// Threads: Batch, live, NotLiveReason and Close on the loop thread of the shard that
// owns the client; endpoint(), prefix() and the stats from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "redis/command.h"
#include "redis/command_batch.h"
#include "redis/endpoint.h"
#include "redis/invalidation.h"
#include "redis/resp_replies.h"
#include "redis/stats.h"

namespace rankd {

class RedisClient {
 public:
  virtual ~RedisClient() = default;
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One reply per command, in order, as RESP bytes read in place (resp_replies.h:
  // RespView per reply). Redis error replies
  // are values (kError), not failures: the caller knows which key a WRONGTYPE is about.
  // Fails with unavailable (no live connection, or one lost before every reply came),
  // backend_error (a connection dropped over a bad reply) or deadline_exceeded. The
  // message names the endpoint by name and says what failed; the error's detail (for the
  // log only) adds the address, why, and the batch's first command and key. An empty
  // batch succeeds at once.
  virtual Coro<Result<RespReplies>> Batch(RedisCommands commands, Deadline deadline) = 0;
  // The same for commands built one by one (tests, tools): copied into one buffer first.
  Coro<Result<RespReplies>> Batch(std::vector<RedisCommand> commands, Deadline deadline) {
    return Batch(RedisCommands::From(commands), deadline);
  }

  // Every command can be sent now (for a cluster: the slot map is known and each
  // master has a live connection).
  virtual bool live() const = 0;
  // Why not live(), "" when live.
  virtual std::string NotLiveReason() const = 0;
  // Client-side caching (invalidation.h): opens a tracker per Redis node and turns tracking
  // on for every data connection before its next read. Call once, before the first
  // Batch whose replies may be cached.
  virtual void EnableTracking(const TrackingConfig& config) = 0;
  // Every read sent from now on is tracked, so a change of its keys will reach the sink
  // (or the sink hears OnInvalidateAll). A reader checks this before it sends the reads
  // it may cache: a loss after that reaches the sink as OnInvalidateAll.
  virtual bool tracking_ready() const = 0;
  // BCAST tracking's prefixes changed (a reload's new schema): tracking restarts with
  // them, and the sink hears OnInvalidateAll at once (what changes meanwhile is not
  // heard). Nothing when tracking is off, the mode is not BCAST, or they are the same.
  virtual void SetTrackingPrefixes(std::vector<std::string> prefixes) = 0;

  // Fails queued and in-flight batches with unavailable and closes every connection.
  // Idempotent. REQUIRES: not inside a connection's read handler.
  virtual void Close() = 0;

  const RedisEndpoint& endpoint() const { return endpoint_; }
  const std::string& prefix() const { return endpoint_.prefix; }
  const RedisStats& stats() const { return *stats_; }
  // For the IO tasks' value counters (fields_missing, ...). Loop thread only.
  RedisStats& mutable_stats() { return *stats_; }
  std::shared_ptr<const RedisStats> shared_stats() const { return stats_; }

 protected:
  RedisClient(RedisEndpoint endpoint, std::shared_ptr<RedisStats> stats)
      : endpoint_(std::move(endpoint)), stats_(std::move(stats)) {}

  RedisEndpoint endpoint_;
  std::shared_ptr<RedisStats> stats_;
};

}  // namespace rankd
