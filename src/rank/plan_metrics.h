// The series a shard counts plan runs in: per plan, node and model (PlanMetrics), and per
// experiment and shadow plan (ExperimentSeries). They live in the shard's SeriesSet and
// are looked up when the shard installs a plan snapshot, never per request.
//
// Threads: the shard's loop thread (a PlanMetrics is also released there).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/errors.h"
#include "metrics/series_set.h"
#include "plan/experiments.h"
#include "plan/plan.h"

namespace rankd {

enum class ServedStateOutcome : uint8_t { kOk, kFailed, kDropped };

// One plan snapshot's series on one shard. Shared: the shard's current plan set holds
// one per plan, and every request of that plan holds its own until it has answered, so
// a reload never drops series a request is about to count in. Series are shared by
// label set with other snapshots (a plan name that survives a reload keeps counting);
// the destructor drops those no other snapshot uses any more (a removed plan's series
// go). REQUIRES: destroyed on the shard's loop thread.
struct PlanMetrics {
  explicit PlanMetrics(SeriesSet& set) : set(set) {}
  ~PlanMetrics();
  PlanMetrics(const PlanMetrics&) = delete;
  PlanMetrics& operator=(const PlanMetrics&) = delete;

  SeriesSet& set;
  // By outcome: 0 = "ok", 1 + ErrorCode = that error's code name.
  std::array<Series*, 1 + kErrorCodeCount> outcomes{};
  Series* duration = nullptr;
  Series* deadline_exceeded = nullptr;
  // By node index.
  std::vector<Series*> node_duration;
  std::vector<std::array<Series*, 4>> node_outcomes;  // by NodeStatus
  std::vector<Series*> node_degraded;                 // null for required nodes
  // `model` nodes: rows scored and the node's run time, by model (null for other nodes).
  // Shared with every plan node of any snapshot that uses a model of that name.
  std::vector<Series*> model_rows;
  std::vector<Series*> model_eval;
  std::vector<Series*> model_null_rows;
  // Plans with served_state: its writes, by ServedStateOutcome (null for other plans).
  std::array<Series*, 3> served_state{};
};
using PlanMetricsPtr = std::shared_ptr<PlanMetrics>;

// The PlanMetrics of the snapshot a shard has installed.
class ShardPlanMetrics {
 public:
  ShardPlanMetrics(SeriesSet& set, int shard) : set_(set), shard_(std::to_string(shard)) {}

  // The series of a plan of the installed snapshot (null if it is not in it).
  PlanMetricsPtr ForPlan(const Plan& plan) const;
  // Makes the series of a new snapshot, then lets go of the previous snapshot's: series
  // of a surviving label set live on, the others go once the last request holding them
  // has answered.
  void PreparePlans(const std::vector<PlanPtr>& plans);

 private:
  PlanMetricsPtr Make(const Plan& plan);

  SeriesSet& set_;
  const std::string shard_;
  std::unordered_map<const Plan*, PlanMetricsPtr> plans_;  // by identity
};

// The series of an experiment set (plan/experiments.h), looked up when a shard installs
// a snapshot. Series of experiments a reload removed stay (counters are not reset): they
// are never released.
enum class ShadowOutcome : uint8_t { kOk, kFailed, kShed, kCancelled, kCount };
struct ExperimentSeries {
  // requests[experiment][0] is control, [1 + v] variant v.
  std::vector<std::vector<Series*>> requests;
  struct Shadow {
    std::array<Series*, static_cast<size_t>(ShadowOutcome::kCount)> runs{};
    Series* overlap = nullptr;
    Series* correlation = nullptr;
    Series* duration = nullptr;
  };
  std::vector<std::vector<Shadow>> shadows;  // [experiment][shadow]
};
ExperimentSeries MakeExperimentSeries(SeriesSet& set, const ExperimentSet& experiments);

}  // namespace rankd
