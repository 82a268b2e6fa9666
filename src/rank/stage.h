// The /rank path's stages: what a stage is, and what the stages of one shard share.
//
// A stage is a class in its own file (rank/stage_<name>.h and .cc), listed once in
// RankStages (rank/stages.h), whose order is the order its hooks run in. It is made from
// the shard's RankShard (StageBase), holds the shard's state of its feature, may declare
// `struct Slot` (its state of one request, kept in RankContext: ctx.slot<Stage>()) and has any of
// these hooks, each called stage by stage in the list's order:
//
//   Status Before(RankContext&, RankInput&)  before the run: reads the request, fills the
//       run and its slot. An error refuses the request (answered with it; the stages after
//       it are not asked). A stage may answer the request itself (ctx.answered).
//   void Refused(RankContext&, const Error&)  the request was refused before its run.
//   void OnResult(RankContext&)  the run has ended (ctx.result): what the answer adds.
//   bool Settles(const RankContext&) and Coro<void> Settle(RankContext&)  after the run,
//       before the answer is written: work the answer waits for (a page snapshot). The
//       request counts as running until every Settle has ended.
//   bool WriteBody(RankContext&, std::string&)  writes the answer's body instead of the
//       whole ranking (true: written; the first stage that writes it wins).
//   void Count(RankContext&)  the answer is written and not yet sent: counters a client
//       reading its answer then /metrics must find.
//   void After(RankContext&)  the answer is on its way: work the request does not wait for.
//   void Install(const PlanSet&)  a new plan snapshot; void Tick(TimePoint)  every 100 ms.
//
// Hooks are called without virtual dispatch and a stage's state is a member, so the path
// allocates nothing per stage per request.
//
// Threads: the shard's loop thread, all of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/rank_request.h"
#include "api/routes.h"
#include "core/spsc_ring.h"
#include "http/message.h"
#include "http/responder.h"
#include "metrics/shard_stats.h"
#include "rank/admission.h"
#include "sched/shard_runtime.h"

namespace rankd {

class CursorKey;
class RankPath;
class RedisClient;
class ShardServedLog;
struct RankContext;

// The flags of `rankd serve` the path reads (docs/operations.md has each).
struct RankOptions {
  int64_t deadline_ms = 200;  // --deadline-ms
  AdmissionOptions admission;
  bool allow_priority = false;         // --allow-priority
  bool allow_forced_variants = false;  // --allow-forced-variants
  size_t shadow_max_inflight = 16;
  size_t page_max_items = 1000;
  uint64_t page_ttl_ms = 600000;
  size_t page_max_snapshots = 4;
  uint64_t page_write_bytes_per_s = 8u << 20;
  std::string page_endpoint = "redis_default";
  bool access_log = false;  // --access-log
};

// What the stages of one shard share; set while the shard starts, before any request.
struct RankShard {
  int id = 0;
  RankOptions opts;
  ShardRuntime* runtime = nullptr;
  ShardStats* stats = nullptr;
  RankPath* path = nullptr;               // to reach another stage: path->stage<S>()
  ShardServedLog* served_log = nullptr;   // never null once started
  RedisClient* page_redis = nullptr;      // --page-endpoint's client
  const CursorKey* cursor_key = nullptr;  // the key page cursors are signed with
  SpscRing* access_log = nullptr;         // null without --access-log
};

// What most stages derive from: the shard's RankShard, as shard_.
class StageBase {
 public:
  explicit StageBase(RankShard& shard) : shard_(shard) {}

 protected:
  RankShard& shard_;
};

// The request as read, for the hooks before the run.
struct RankInput {
  const http::Request& req;
  Listener listener;  // where it was asked: the metrics address is the console's
  RankRequest rr;     // parsed by the first stage
};

// The extra header of every 503 (overload, not ready, no Redis).
inline constexpr http::HeaderField kRetryAfter[] = {{"Retry-After", "1"}};

}  // namespace rankd
