#include "rank/stage_shadows.h"

#include <chrono>

#include "rank/context.h"
#include "rank/path.h"
#include "rank/shadow_compare.h"

namespace rankd {

void ShadowStage::Cancel() {
  if (running_ == 0) return;
  cancel_->Cancel();
  cancel_ = std::make_shared<CancelToken>();
}

void ShadowStage::After(RankContext& ctx) {
  const ExperimentStage::Slot& t = ctx.slot<ExperimentStage>();
  if (!ctx.result || !t.experiment || t.experiment->shadows.empty()) return;
  const Experiment& e = *t.experiment;
  auto ei = static_cast<size_t>(t.index);
  const auto& series = shard_.path->stage<ExperimentStage>().series().shadows;
  std::vector<uint64_t> ids;
  for (size_t si = 0; si < e.shadows.size(); ++si) {
    const ExperimentShadow& sh = e.shadows[si];
    // xorshift64*: a draw per shadow, 53 bits as a percent in [0, 100).
    rng_ ^= rng_ >> 12, rng_ ^= rng_ << 25, rng_ ^= rng_ >> 27;
    double draw = static_cast<double>((rng_ * 2685821657736338717ull) >> 11) * 0x1p-53 * 100;
    if (draw >= sh.percent) continue;
    bool counted = t.experiments == shard_.runtime->plans()->experiments && ei < series.size() &&
                   si < series[ei].size();
    // Shed: past the sheddable share of the admission limit (half of it) the primaries
    // need the shard, and at most --shadow-max-inflight run at once.
    if (!shard_.path->stage<AdmissionStage>().AdmitShadow(
            shard_.stats->live_requests.load(std::memory_order_relaxed)) ||
        running_ >= shard_.opts.shadow_max_inflight) {
      if (counted) series[ei][si].runs[static_cast<size_t>(ShadowOutcome::kShed)]->Add();
      continue;
    }
    if (ids.empty()) ids = IdKeys(ctx.result->output);
    RunRequest run;
    run.plan = sh.plan;
    run.user_id = ctx.user_id;
    run.params = ParamsFor(*sh.plan, t.params, {});
    run.deadline = Clock::now() + std::chrono::milliseconds(ctx.deadline_ms);
    run.cancel = cancel_;
    Shadow s;
    s.experiment.experiments = t.experiments;
    s.experiment.experiment = t.experiment;
    s.experiment.index = t.index;
    s.experiment.variant = t.variant;
    s.index = si;
    s.request_id = ctx.request_id;
    s.t0 = Clock::now();
    shard_.path->stage<ServedLogStage>().SelectShadow(run, s.t0, s.served);
    ++running_;
    Spawn(Run(std::move(run), std::move(s), ids));
  }
}

Coro<void> ShadowStage::Run(RunRequest run, Shadow s, std::vector<uint64_t> primary_ids) {
  std::shared_ptr<const CancelToken> cancel = run.cancel;
  const ExperimentStage::Slot& t = s.experiment;
  auto ei = static_cast<size_t>(t.index);
  size_t si = s.index;
  // Its metric series now: a reload may replace the shard's while it runs.
  const auto& all = shard_.path->stage<ExperimentStage>().series().shadows;
  ExperimentSeries::Shadow series;
  bool counted = t.experiments == shard_.runtime->plans()->experiments && ei < all.size() &&
                 si < all[ei].size();
  if (counted) series = all[ei][si];
  uint32_t k = t.experiment->shadows[si].compare_top;
  Result<RunResult> result = co_await RunPlan(shard_.runtime->env(), std::move(run));
  --running_;
  if (!counted) co_return;
  double secs = std::chrono::duration<double>(Clock::now() - s.t0).count();
  series.duration->Observe(secs);
  ShadowOutcome outcome = cancel->cancelled() ? ShadowOutcome::kCancelled
                          : result            ? ShadowOutcome::kOk
                                              : ShadowOutcome::kFailed;
  series.runs[static_cast<size_t>(outcome)]->Add();
  if (outcome != ShadowOutcome::kOk) co_return;
  std::vector<uint64_t> ids = IdKeys(result->output);
  if (auto o = OverlapAtK(primary_ids, ids, k)) series.overlap->Observe(*o);
  if (auto tau = KendallTauA(primary_ids, ids)) series.correlation->Observe(*tau);
  if (!s.served.served_id.empty()) {
    RecordHeader h;
    h.request_id = s.request_id;
    h.experiment = t.experiment->name;
    h.variant = VariantName(t);
    h.shadow = true;
    shard_.path->stage<ServedLogStage>().Record(*result, s.served, h);
  }
}

}  // namespace rankd
