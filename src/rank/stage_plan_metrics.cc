#include "rank/stage_plan_metrics.h"

#include "rank/context.h"

namespace rankd {

Status PlanMetricsStage::Before(RankContext& ctx, RankInput&) {
  // The request holds its plan's metric series until it has answered: a reload may
  // replace the shard's snapshot meanwhile.
  if (shard_.stats->enabled) ctx.slot<PlanMetricsStage>().pm = plans_.ForPlan(*ctx.run.plan);
  return {};
}

void PlanMetricsStage::Refused(RankContext& ctx, const Error& e) {
  if (const PlanMetricsPtr& pm = ctx.slot<PlanMetricsStage>().pm)
    pm->outcomes[1 + static_cast<size_t>(e.code)]->Add();
}

void PlanMetricsStage::Count(RankContext& ctx) {
  PlanMetrics* pm = ctx.slot<PlanMetricsStage>().pm.get();
  if (!pm) return;
  const Result<RunResult>& result = ctx.result;
  pm->outcomes[result ? 0 : 1 + static_cast<size_t>(result.error().code)]->Add();
  pm->duration->Observe(static_cast<double>(ctx.took_us) / 1e6);
  if (!result && result.error().code == ErrorCode::kDeadlineExceeded) pm->deadline_exceeded->Add();
  if (!result) return;
  const auto& nodes = result->nodes;
  for (size_t i = 0; i < nodes.size() && i < pm->node_duration.size(); ++i) {
    pm->node_outcomes[i][static_cast<size_t>(nodes[i].status)]->Add();
    if (nodes[i].status != NodeStatus::kSkipped)
      pm->node_duration[i]->Observe(static_cast<double>(nodes[i].took_us) / 1e6);
    if (nodes[i].status == NodeStatus::kOk && pm->model_rows[i]) {
      pm->model_rows[i]->Add(nodes[i].rows);
      pm->model_eval[i]->Observe(static_cast<double>(nodes[i].took_us) / 1e6);
      if (nodes[i].null_rows) pm->model_null_rows[i]->Add(nodes[i].null_rows);
    }
  }
  for (uint32_t d : result->degraded)
    if (d < pm->node_degraded.size() && pm->node_degraded[d]) pm->node_degraded[d]->Add();
}

void PlanMetricsStage::Install(const PlanSet& plans) {
  std::vector<PlanPtr> list;
  for (const auto& [name, p] : plans.plans) list.push_back(p);
  // Metric series now, not on the request path. Requests still running hold the
  // previous snapshot's series (shared_ptr), so nothing they touch is freed here.
  plans_.PreparePlans(list);
}

}  // namespace rankd
