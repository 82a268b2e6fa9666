#include "rank/stage_experiment.h"

#include "core/client_text.h"
#include "rank/context.h"
#include "rank/path.h"

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

}  // namespace

GivenParams ParamsFor(const Plan& plan, const GivenParams& given, const GivenParams& overrides) {
  GivenParams out;
  for (const auto& p : given)
    if (plan.params.index_of(p.first) >= 0) out.push_back(p);
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::string_view VariantName(const ExperimentStage::Slot& s) {
  if (!s.experiment || s.variant < 0) return kControlVariant;
  return s.experiment->variants[static_cast<size_t>(s.variant)].name;
}

Status ExperimentStage::Before(RankContext& ctx, RankInput& in) {
  RunRequest& run = ctx.run;
  Slot& slot = ctx.slot<ExperimentStage>();
  const ExperimentSetPtr& set = shard_.runtime->plans()->experiments;
  std::string_view header = in.req.header("x-rankd-variant");
  if (!header.empty() && !shard_.opts.allow_forced_variants) {
    ++shard_.stats->forced_variants_ignored;
    header = {};
  }
  const Experiment* e = set->ForPlan(run.plan->name);
  if (e && !e->Active(UnixMsAt(ctx.t0))) e = nullptr;
  std::optional<int> forced;
  if (!header.empty()) {  // checked even when no experiment applies: a QA typo shows
    auto f = ForcedVariant(header, *set, e);
    if (!f) return Fail(f.error());
    forced = *f;
  }
  if (!e) return {};
  int variant = forced ? *forced : e->VariantOf(ExperimentBucket(e->salt, run.user_id));
  slot.forced = forced.has_value();
  // The request's params are the requested plan's, whichever plan runs them.
  if (auto bound = BindParams(*run.plan, run.params); !bound) return Fail(bound.error());
  slot.experiments = set;
  slot.experiment = e;
  slot.index = static_cast<int>(e - set->experiments.data());
  slot.variant = variant;
  slot.requests =
      series_.requests[static_cast<size_t>(slot.index)][static_cast<size_t>(variant + 1)];
  if (!e->shadows.empty()) slot.params = run.params;
  if (variant >= 0) {
    const ExperimentVariant& v = e->variants[static_cast<size_t>(variant)];
    run.params = ParamsFor(*v.plan, run.params, v.params);
    run.plan = v.plan;
  }
  return {};
}

void ExperimentStage::OnResult(RankContext& ctx) {
  const Slot& slot = ctx.slot<ExperimentStage>();
  if (!slot.experiment) return;
  ctx.extras.experiment = slot.experiment->name;
  ctx.extras.variant = VariantName(slot);
}

void ExperimentStage::Count(RankContext& ctx) {
  // Once admitted, in the series of the snapshot it started with (never released).
  if (Series* s = ctx.slot<ExperimentStage>().requests) s->Add();
}

void ExperimentStage::Install(const PlanSet& plans) {
  series_ = MakeExperimentSeries(shard_.stats->series, *plans.experiments);
}

}  // namespace rankd
