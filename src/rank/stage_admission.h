// The admission stage of /rank (rank/admission.h; docs/operations.md, "Overload"): a plan
// run past the shard's adaptive limit, or with less time left than its plan's recent
// median, is refused 503 unavailable; an answer's time feeds its plan's statistics. Also
// the admission of later pages and shadow runs, and the quality gauges.
//
// Threads: the shard's loop thread.
#pragma once

#include <string>
#include <unordered_map>

#include "core/error.h"
#include "rank/admission.h"
#include "rank/stage.h"

namespace rankd {

class AdmissionStage : public StageBase {
 public:
  struct Slot {
    Admission::Ticket ticket;  // its plan's load statistics, for its answer's sample
  };
  explicit AdmissionStage(RankShard& shard);

  // Refused: 503 unavailable with the reason, counted, and the time to the refusal observed.
  Status Before(RankContext& ctx, RankInput& in);
  void Count(RankContext& ctx);
  void Install(const PlanSet& plans);
  void Tick(TimePoint now);

  // A request that runs no plan (a later page, POST /events): 503 unavailable when the
  // shard runs its admission limit of requests already; cancels the shadows past the
  // sheddable share of it.
  Status AdmitWithoutRun();
  // Whether a shadow run may start with `live` requests running.
  bool AdmitShadow(size_t live) const { return admission_.AdmitShadow(live); }
  const AdmissionStats& stats() const { return admission_.stats(); }

 private:
  void PrepareQualitySeries();  // the gauges of the snapshot's plans with a quality block

  Admission admission_;
  std::unordered_map<std::string, Series*> quality_series_;  // by plan name
};

}  // namespace rankd
