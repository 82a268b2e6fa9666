// The experiment stage of /rank (docs/experiments.md): the variant a request gets (its
// user's bucket, or X-Rankd-Variant with --allow-forced-variants), which hands the run to
// the variant's plan with its params; counted by variant; named in the answer.
//
// Threads: the shard's loop thread.
#pragma once

#include "core/error.h"
#include "plan/experiments.h"
#include "rank/plan_metrics.h"
#include "rank/stage.h"

namespace rankd {

class ExperimentStage : public StageBase {
 public:
  // The experiment that applied (experiment null: none), kept alive by `experiments`.
  struct Slot {
    ExperimentSetPtr experiments;
    const Experiment* experiment = nullptr;
    int index = -1;
    int variant = -1;            // -1: control
    bool forced = false;         // by X-Rankd-Variant
    GivenParams params;          // as the request gave them, when the experiment has shadows
    Series* requests = nullptr;  // its variant's count
  };
  using StageBase::StageBase;

  // Errors: a bad X-Rankd-Variant (400), the request's params against the requested plan
  // (invalid_param).
  Status Before(RankContext& ctx, RankInput& in);
  void OnResult(RankContext& ctx);
  void Count(RankContext& ctx);
  void Install(const PlanSet& plans);

  // The installed snapshot's experiment series.
  const ExperimentSeries& series() const { return series_; }

 private:
  ExperimentSeries series_;
};

// "control", or the variant's name.
std::string_view VariantName(const ExperimentStage::Slot& s);
// The request's params for `plan`, a variant or shadow plan: those it declares, then
// `overrides` (later entries win in BindParams).
GivenParams ParamsFor(const Plan& plan, const GivenParams& given, const GivenParams& overrides);

}  // namespace rankd
