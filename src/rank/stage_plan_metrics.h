// The plan metrics stage of /rank: the series of the plan that runs (rank/plan_metrics.h),
// held by the request until it has answered; its outcome, duration and node counts.
//
// Threads: the shard's loop thread.
#pragma once

#include "rank/plan_metrics.h"
#include "rank/stage.h"

namespace rankd {

class PlanMetricsStage : public StageBase {
 public:
  struct Slot {
    PlanMetricsPtr pm;  // null with --no-metrics
  };
  explicit PlanMetricsStage(RankShard& shard)
      : StageBase(shard), plans_(shard.stats->series, shard.id) {}

  Status Before(RankContext& ctx, RankInput& in);
  void Refused(RankContext& ctx, const Error& e);
  void Count(RankContext& ctx);
  void Install(const PlanSet& plans);
  // The series of a plan of the installed snapshot (null if it is not in it, or with
  // --no-metrics).
  PlanMetricsPtr ForPlan(const Plan& plan) const {
    return shard_.stats->enabled ? plans_.ForPlan(plan) : nullptr;
  }

 private:
  ShardPlanMetrics plans_;
};

}  // namespace rankd
