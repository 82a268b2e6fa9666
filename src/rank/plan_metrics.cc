#include "rank/plan_metrics.h"

#include "metrics/metric_buckets.h"
#include "sched/scheduler.h"

namespace rankd {

PlanMetrics::~PlanMetrics() {
  for (auto* s : outcomes) set.Release(s);
  set.Release(duration);
  set.Release(deadline_exceeded);
  for (auto* s : node_duration) set.Release(s);
  for (const auto& by_status : node_outcomes)
    for (auto* s : by_status) set.Release(s);
  for (auto* list : {&node_degraded, &model_rows, &model_eval, &model_null_rows})
    for (auto* s : *list)
      if (s) set.Release(s);
  for (auto* s : served_state)
    if (s) set.Release(s);
  set.Publish();
}

void ShardPlanMetrics::PreparePlans(const std::vector<PlanPtr>& plans) {
  // The new snapshot's series first, so that a label set both snapshots use is never
  // released in between (its count would drop to zero and the series restart).
  std::unordered_map<const Plan*, PlanMetricsPtr> next;
  for (const auto& p : plans) next.emplace(p.get(), Make(*p));
  plans_.swap(next);
  set_.Publish();
}

PlanMetricsPtr ShardPlanMetrics::ForPlan(const Plan& plan) const {
  auto it = plans_.find(&plan);
  return it == plans_.end() ? nullptr : it->second;
}

// Label values in the order of each family's labels (metrics/metric_table.cc).
PlanMetricsPtr ShardPlanMetrics::Make(const Plan& plan) {
  using F = SeriesFamily;
  auto pm = std::make_shared<PlanMetrics>(set_);
  const std::string& name = plan.name;
  pm->outcomes[0] = set_.Retain(F::kRankRequests, {"ok", name, shard_});
  for (const auto& e : kApiErrors)
    pm->outcomes[1 + static_cast<size_t>(e.code)] =
        set_.Retain(F::kRankRequests, {std::string(e.name), name, shard_});
  pm->duration = set_.Retain(F::kRankDuration, {name, shard_}, kLatencyBuckets);
  pm->deadline_exceeded = set_.Retain(F::kDeadlineExceeded, {name, shard_});
  for (const auto& n : plan.nodes) {
    pm->node_duration.push_back(
        set_.Retain(F::kNodeDuration, {n.id, n.op, name, shard_}, kNodeBuckets));
    std::array<Series*, 4> by_status{};
    for (size_t s = 0; s < by_status.size(); ++s)
      by_status[s] = set_.Retain(
          F::kNodeOutcomes,
          {n.id, name, shard_, std::string(NodeStatusName(static_cast<NodeStatus>(s)))});
    pm->node_outcomes.push_back(by_status);
    pm->node_degraded.push_back(n.optional ? set_.Retain(F::kDegraded, {n.id, name, shard_})
                                           : nullptr);
    const ModelPtr& model = n.model.model;
    pm->model_rows.push_back(model ? set_.Retain(F::kModelRows, {model->name(), shard_}) : nullptr);
    pm->model_eval.push_back(
        model ? set_.Retain(F::kModelEval, {model->name(), shard_}, kNodeBuckets) : nullptr);
    pm->model_null_rows.push_back(model ? set_.Retain(F::kModelNullRows, {model->name(), shard_})
                                        : nullptr);
  }
  if (plan.served_state.enabled) {
    static constexpr const char* kOutcomes[] = {"ok", "failed", "dropped"};
    for (size_t o = 0; o < pm->served_state.size(); ++o)
      pm->served_state[o] = set_.Retain(F::kServedStateWrites, {kOutcomes[o], name});
  }
  return pm;
}

ExperimentSeries MakeExperimentSeries(SeriesSet& set, const ExperimentSet& experiments) {
  using F = SeriesFamily;
  static constexpr std::string_view kOutcomes[] = {"ok", "failed", "shed", "cancelled"};
  ExperimentSeries out;
  for (const Experiment& e : experiments.experiments) {
    auto& requests = out.requests.emplace_back();
    requests.push_back(set.Retain(F::kExperimentRequests, {e.name, std::string(kControlVariant)}));
    for (const auto& v : e.variants)
      requests.push_back(set.Retain(F::kExperimentRequests, {e.name, v.name}));
    auto& shadows = out.shadows.emplace_back();
    for (const auto& sh : e.shadows) {
      const std::string& plan = sh.plan->name;
      ExperimentSeries::Shadow& s = shadows.emplace_back();
      for (size_t o = 0; o < s.runs.size(); ++o)
        s.runs[o] = set.Retain(F::kShadowRuns, {e.name, std::string(kOutcomes[o]), plan});
      s.overlap = set.Retain(F::kShadowOverlap, {e.name, plan}, kOverlapBuckets);
      s.correlation = set.Retain(F::kShadowCorrelation, {e.name, plan}, kCorrelationBuckets);
      s.duration = set.Retain(F::kShadowDuration, {e.name, plan}, kLatencyBuckets);
    }
  }
  set.Publish();
  return out;
}

}  // namespace rankd
