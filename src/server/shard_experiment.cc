// Experiments on a shard (docs/experiments.md): the variant a request gets, and the
// shadow plans run after its answer, measured against it.
#include <chrono>

#include "core/client_text.h"
#include "core/log.h"
#include "plan/experiments.h"
#include "server/shadow_compare.h"
#include "server/shard.h"

namespace rankd {

namespace {

// The variant X-Rankd-Variant forces on `e`: its index (-1: control); nullopt when the
// header names other experiments only (or `e` is null: none applies, the header is only
// checked). Errors: a malformed pair, an unknown experiment or variant (the header is a
// list of EXPERIMENT=VARIANT, comma-separated).
Result<std::optional<int>> ForcedVariant(std::string_view header, const ExperimentSet& set,
                                         const Experiment* e) {
  std::optional<int> out;
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view pair = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    while (!pair.empty() && pair.back() == ' ') pair.remove_suffix(1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos)
      return Fail(Error::BadRequest("X-Rankd-Variant: '" + ClientText(pair, 64) +
                                    "' is not EXPERIMENT=VARIANT"));
    std::string_view name = pair.substr(0, eq), variant = pair.substr(eq + 1);
    const Experiment* named = set.Find(name);
    if (!named)
      return Fail(Error::BadRequest("X-Rankd-Variant: no experiment '" + ClientText(name, 64) +
                                    "' is loaded"));
    auto idx = named->Find(variant);
    if (!idx)
      return Fail(Error::BadRequest("X-Rankd-Variant: experiment '" + named->name +
                                    "' has no variant '" + ClientText(variant, 64) + "'"));
    if (named == e) out = *idx;
  }
  return out;
}

// The request's params for `plan`, a variant or shadow plan: those it declares, then
// `overrides` (later entries win in BindParams).
GivenParams ParamsFor(const Plan& plan, const GivenParams& given, const GivenParams& overrides) {
  GivenParams out;
  for (const auto& p : given)
    if (plan.params.index_of(p.first) >= 0) out.push_back(p);
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

}  // namespace

int64_t Shard::UnixMsAt(TimePoint t) const {
  auto since = Clock::now() - t;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             (std::chrono::system_clock::now() - since).time_since_epoch())
      .count();
}

std::string_view Shard::VariantName(const RankTicket& t) {
  if (!t.experiment || t.variant < 0) return kControlVariant;
  return t.experiment->variants[static_cast<size_t>(t.variant)].name;
}

Status Shard::PickVariant(const http::Request& req, RunRequest& run, RankTicket& ticket) {
  const ExperimentSetPtr& set = runtime_.plans()->experiments;
  std::string_view header = req.header("x-rankd-variant");
  if (!header.empty() && !opts_.allow_forced_variants) {
    ++stats_.forced_variants_ignored;
    header = {};
  }
  const Experiment* e = set->ForPlan(run.plan->name);
  if (e && !e->Active(UnixMsAt(ticket.t0))) e = nullptr;
  std::optional<int> forced;
  if (!header.empty()) {  // checked even when no experiment applies: a QA typo shows
    auto f = ForcedVariant(header, *set, e);
    if (!f) return Fail(f.error());
    forced = *f;
  }
  if (!e) return {};
  int variant = forced ? *forced : e->VariantOf(ExperimentBucket(e->salt, run.user_id));
  ticket.forced = forced.has_value();
  // The request's params are the requested plan's, whichever plan runs them.
  if (auto bound = BindParams(*run.plan, run.params); !bound) return Fail(bound.error());
  ticket.experiments = set;
  ticket.experiment = e;
  ticket.experiment_index = static_cast<int>(e - set->experiments.data());
  ticket.variant = variant;
  if (!e->shadows.empty()) ticket.params = run.params;
  if (variant >= 0) {
    const ExperimentVariant& v = e->variants[static_cast<size_t>(variant)];
    run.params = ParamsFor(*v.plan, run.params, v.params);
    run.plan = v.plan;
  }
  return {};
}

void Shard::CancelShadows() {
  if (shadows_running_ == 0) return;
  shadow_cancel_->Cancel();
  shadow_cancel_ = std::make_shared<CancelToken>();
}

void Shard::StartShadows(const RankTicket& t, const RunResult& primary, const UserId& user) {
  const Experiment& e = *t.experiment;
  auto ei = static_cast<size_t>(t.experiment_index);
  std::vector<uint64_t> ids;
  for (size_t si = 0; si < e.shadows.size(); ++si) {
    const ExperimentShadow& sh = e.shadows[si];
    // xorshift64*: a draw per shadow, 53 bits as a percent in [0, 100).
    shadow_rng_ ^= shadow_rng_ >> 12, shadow_rng_ ^= shadow_rng_ << 25,
        shadow_rng_ ^= shadow_rng_ >> 27;
    double draw = static_cast<double>((shadow_rng_ * 2685821657736338717ull) >> 11) * 0x1p-53 * 100;
    if (draw >= sh.percent) continue;
    const auto& series = experiment_series_.shadows;
    bool counted = t.experiments == runtime_.plans()->experiments && ei < series.size() &&
                   si < series[ei].size();
    // Shed: past the sheddable share of the admission limit (half of it) the primaries
    // need the shard, and at most --shadow-max-inflight run at once.
    if (!admission_.AdmitShadow(stats_.live_requests.load(std::memory_order_relaxed)) ||
        shadows_running_ >= opts_.shadow_max_inflight) {
      if (counted) series[ei][si].runs[static_cast<size_t>(ShadowOutcome::kShed)]->Add();
      continue;
    }
    if (ids.empty()) ids = IdKeys(primary.output);
    RunRequest run;
    run.plan = sh.plan;
    run.user_id = user;
    run.params = ParamsFor(*sh.plan, t.params, {});
    run.deadline = Clock::now() + std::chrono::milliseconds(t.deadline_ms);
    run.cancel = shadow_cancel_;
    RankTicket st;
    st.experiments = t.experiments;
    st.experiment = t.experiment;
    st.experiment_index = t.experiment_index;
    st.variant = t.variant;
    st.request_id = t.request_id;
    st.t0 = Clock::now();
    if (served_log_ && served_log_->Selected(*run.plan, false)) {
      run.keep_for_log = true;
      st.served_id = served_log_->NewServedId();
      st.ts_ms = UnixMsAt(st.t0);
    }
    ++shadows_running_;
    Spawn(RunShadow(std::move(run), ei, si, std::move(st), ids));
  }
}

Coro<void> Shard::RunShadow(RunRequest run, size_t ei, size_t si, RankTicket t,
                            std::vector<uint64_t> primary_ids) {
  std::shared_ptr<const CancelToken> cancel = run.cancel;
  // Its metric series now: a reload may replace the shard's while it runs.
  ExperimentSeries::Shadow series;
  bool counted = t.experiments == runtime_.plans()->experiments &&
                 ei < experiment_series_.shadows.size() &&
                 si < experiment_series_.shadows[ei].size();
  if (counted) series = experiment_series_.shadows[ei][si];
  uint32_t k = t.experiment->shadows[si].compare_top;
  Result<RunResult> result = co_await RunPlan(runtime_.env(), std::move(run));
  --shadows_running_;
  if (!counted) co_return;
  double secs = std::chrono::duration<double>(Clock::now() - t.t0).count();
  series.duration->Observe(secs);
  ShadowOutcome outcome = cancel->cancelled() ? ShadowOutcome::kCancelled
                          : result            ? ShadowOutcome::kOk
                                              : ShadowOutcome::kFailed;
  series.runs[static_cast<size_t>(outcome)]->Add();
  if (outcome != ShadowOutcome::kOk) co_return;
  std::vector<uint64_t> ids = IdKeys(result->output);
  if (auto o = OverlapAtK(primary_ids, ids, k)) series.overlap->Observe(*o);
  if (auto tau = KendallTauA(primary_ids, ids)) series.correlation->Observe(*tau);
  if (!t.served_id.empty()) {
    RecordHeader h;
    h.served_id = t.served_id;
    h.ts_ms = t.ts_ms;
    h.request_id = t.request_id;
    h.experiment = t.experiment->name;
    h.variant = VariantName(t);
    h.shadow = true;
    served_log_->Record(*result, h);
  }
}

}  // namespace rankd
