#include "rank/stage_admission.h"

#include "rank/context.h"
#include "rank/path.h"

namespace rankd {

AdmissionStage::AdmissionStage(RankShard& shard)
    : StageBase(shard), admission_(shard.opts.admission) {}

// Admission counts requests until their work has really stopped, so abandoned CPU work
// (a 504 whose job still runs) counts against the limit.
Status AdmissionStage::AdmitWithoutRun() {
  size_t live = shard_.stats->live_requests.load(std::memory_order_relaxed);
  size_t limit = admission_.LimitFor(Priority::kDefault);
  if (live >= limit)
    return Fail(Error::Unavailable("shard " + std::to_string(shard_.id) +
                                   " is at its admission limit " + std::to_string(limit) +
                                   "; retry later"));
  if (!admission_.AdmitShadow(live + 1))
    shard_.path->stage<ShadowStage>().Cancel();  // primaries first
  return {};
}

Status AdmissionStage::Before(RankContext& ctx, RankInput& in) {
  const RankRequest& rr = in.rr;
  Priority priority = Priority::kDefault;
  if (rr.priority) {
    if (shard_.opts.allow_priority)
      priority = *rr.priority;
    else
      ++admission_.mutable_stats().priority_ignored;
  }
  Admission::Ticket& ticket = ctx.slot<AdmissionStage>().ticket;
  size_t live = shard_.stats->live_requests.load(std::memory_order_relaxed);
  TimePoint now = Clock::now();
  int64_t remaining_us =
      ctx.deadline_ms * 1000 -
      std::chrono::duration_cast<std::chrono::microseconds>(now - ctx.t0).count();
  auto refused = admission_.Admit(ctx.run.plan, live, priority, remaining_us, ticket);
  if (!refused) {
    if (!admission_.AdmitShadow(live + 1))
      shard_.path->stage<ShadowStage>().Cancel();  // primaries first
    if (double q = admission_.QualityOf(*ticket.load); q >= 0) ctx.run.quality = q;
    return {};
  }
  ++admission_.mutable_stats()
        .refusals[static_cast<size_t>(*refused)][static_cast<size_t>(priority)];
  if (shard_.stats->enabled)
    shard_.stats->admission_refusal_seconds.Observe(
        std::chrono::duration<double>(Clock::now() - ctx.t0).count());
  if (*refused == Refusal::kDeadline)
    return Fail(Error::Unavailable("plan '" + ctx.run.plan->name + "': the " +
                                   std::to_string(remaining_us / 1000) +
                                   " ms left of the deadline are less than its recent median "
                                   "time to answer; retry with a longer deadline_ms"));
  return Fail(Error::Unavailable("shard " + std::to_string(shard_.id) +
                                 " is at its admission limit (" +
                                 std::to_string(admission_.LimitFor(priority)) + " for " +
                                 std::string(PriorityName(priority)) + " requests); retry later"));
}

void AdmissionStage::Count(RankContext& ctx) {
  admission_.OnAnswer(ctx.slot<AdmissionStage>().ticket, ctx.took_us, ctx.result.has_value());
}

void AdmissionStage::Install(const PlanSet& plans) {
  std::vector<PlanPtr> list;
  for (const auto& [name, p] : plans.plans) list.push_back(p);
  admission_.Install(list);
  PrepareQualitySeries();
}

void AdmissionStage::Tick(TimePoint now) {
  admission_.OnTick(now, shard_.stats->live_requests.load(std::memory_order_relaxed));
}

void AdmissionStage::PrepareQualitySeries() {
  ShardStats& stats = *shard_.stats;
  if (!stats.enabled) return;
  std::unordered_map<std::string, Series*> next;
  for (const auto& [name, load] : admission_.loads()) {
    if (!load->quality) continue;
    auto it = quality_series_.find(name);
    Series* s = it != quality_series_.end()
                    ? it->second
                    : stats.series.Retain(SeriesFamily::kPlanQuality, {name, stats.shard});
    if (it != quality_series_.end()) quality_series_.erase(it);
    load->q_gauge = &s->gauge;
    s->gauge = load->q;
    next[name] = s;
  }
  for (const auto& [name, s] : quality_series_) stats.series.Release(s);
  quality_series_ = std::move(next);
  stats.series.Publish();
}

}  // namespace rankd
