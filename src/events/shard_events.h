// ShardEvents: one shard's writes of accepted events to Redis (docs/events.md). The
// counters of every request read within --events-flush-ms go out together as one
// aggregated batch (many events on one key and bucket become one increment, pipelined
// as EVALSHAs of up to 64 keys), with the marks of their types; each request waits until
// Redis has acknowledged every write it contributed to, so that its 200 means its
// events are kept. With --events-flush-ms 0 each request writes its own at once, not
// aggregated: one increment per event and counters family, one mark per event, each its
// own EVALSHA.
//
// Threads: the shard's loop thread; the stats are read by scrapes from any thread.
#pragma once

#include <coroutine>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/coro.h"
#include "core/deadline.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "core/metric_value.h"
#include "events/counter_write.h"
#include "events/event.h"
#include "events/zset_marks.h"
#include "redis/client.h"

namespace rankd {

// What a shard's event writes count (rankd_events_flush_*).
// Writes a batch of events' counters and marks as a flush does: both in one pipelined
// batch (one round trip, script_calls.h). The number of calls sent again by text after
// NOSCRIPT, or the first error. REQUIRES: the loop thread of `redis`; the batches outlive
// the call.
Coro<Result<size_t>> WriteEventBatch(RedisClient& redis, const CounterBatch& counters,
                                     const MarkBatch& marks, Deadline deadline,
                                     size_t* calls = nullptr);

struct EventWriteStats {
  EventWriteStats();
  MetricHistogram flush_increments;  // distinct (key, type, bucket) a flush writes
  MetricHistogram flush_seconds;     // from a flush's start to Redis's last reply
  MetricValue<uint64_t> flushes_failed;
  MetricValue<uint64_t> too_old;  // counts of an event skipped: older than a family's keep_s
};

class ShardEvents {
 public:
  // `flush_ms`: --events-flush-ms. `redis`: the client of the endpoint counters and marks
  // live on (redis_default), set before the first Apply; null: every Apply fails
  // unavailable.
  ShardEvents(EventLoop& loop, int64_t flush_ms);
  ShardEvents(const ShardEvents&) = delete;
  ShardEvents& operator=(const ShardEvents&) = delete;

  void SetRedis(RedisClient* redis) { redis_ = redis; }

  // Adds `events` (checked against `schema`, read at `now_ms`) to the next flush and
  // waits for it: ok once Redis acknowledged every increment and mark of the flush; else
  // its error (unavailable, deadline_exceeded, backend_error). A flush is given the latest
  // deadline of its requests.
  Coro<Status> Apply(std::span<const Event> events, SchemaPtr schema, int64_t now_ms,
                     Deadline deadline);

  const EventWriteStats& stats() const { return stats_; }

 private:
  struct Flush;
  struct FlushDone;
  void Add(Flush& f, std::span<const Event> events);
  void StartFlush(std::shared_ptr<Flush> f);
  Coro<void> Write(Flush* f);

  EventLoop& loop_;
  const int64_t flush_ms_;
  RedisClient* redis_ = nullptr;
  std::shared_ptr<Flush> pending_;               // gathering until its timer fires
  std::vector<std::shared_ptr<Flush>> writing_;  // being written (a few at most)
  EventWriteStats stats_;
};

}  // namespace rankd
