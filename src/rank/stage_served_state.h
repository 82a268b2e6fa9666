// The served-state stage of /rank (docs/plan.md, "served_state"): after the answer of a plan
// with a served_state block is sent, its items (a first page's only; a later page's when
// it is served) go into the user's zset, scored by the answer's ts_ms, trimmed to the
// newest `max` and given the TTL: one pipelined batch, off the request's time. A failed or
// dropped write is counted, never an error of the request. explain runs and the console's
// (those asked on the metrics address) write nothing; shadow runs never reach this stage.
//
// Threads: the shard's loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/coro.h"
#include "rank/plan_metrics.h"
#include "rank/stage.h"

namespace rankd {

class ServedStateStage : public StageBase {
 public:
  struct Slot {
    bool writes = false;  // the plan keeps served state and this run may write it
    int64_t ts_ms = 0;    // the request's time (RunRequest::ts_ms): the members' score
  };
  using StageBase::StageBase;

  Status Before(RankContext& ctx, RankInput& in);
  void After(RankContext& ctx);
  // A later page was sent: `head` is its snapshot's head line (which names the plan that
  // ran and the user), `lines` its items, one JSON object a line. Writes their ids, as the
  // plan of that name in the shard's current snapshot says.
  void LaterPage(std::string_view head, std::string_view lines, int64_t ts_ms);

  // Writes in flight on a shard at most; past it a write is dropped (and counted). A
  // write takes one round trip: 256 covers a few thousand answers a second through a
  // Redis that stalls for tens of milliseconds.
  static constexpr size_t kMaxInflight = 256;

 private:
  // The ids to write, as Redis arguments: i64 ids or the bytes of str ids.
  struct Ids {
    std::vector<int64_t> nums;
    std::vector<std::string> strs;
    size_t size() const { return nums.size() + strs.size(); }
  };
  void Start(PlanPtr plan, PlanMetricsPtr pm, UserId user, Ids ids, int64_t ts_ms);
  Coro<void> Write(PlanPtr plan, PlanMetricsPtr pm, UserId user, Ids ids, int64_t ts_ms);

  size_t inflight_ = 0;
};

}  // namespace rankd
