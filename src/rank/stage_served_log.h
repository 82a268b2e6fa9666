// The served log stage of /rank (docs/served-log.md): a request its plan's sample (or
// "log": true with --allow-forced-logging) selects gets a served_id, named in its answer,
// and its record is handed to the shard's served log after the answer is sent.
//
// Threads: the shard's loop thread.
#pragma once

#include <string>

#include "rank/stage.h"
#include "served/record.h"

namespace rankd {

class ServedLogStage : public StageBase {
 public:
  struct Slot {
    std::string served_id;    // empty: not recorded
    int64_t ts_ms = 0;        // Unix ms of t0, for the record
    bool forced_log = false;  // recorded because it asked ("log": true)
  };
  using StageBase::StageBase;

  Status Before(RankContext& ctx, RankInput& in);
  void OnResult(RankContext& ctx);
  void After(RankContext& ctx);

  // Selects a shadow run of `plan` started at `t0` (its sample only): its served_id.
  void SelectShadow(RunRequest& run, TimePoint t0, Slot& slot);
  // Records a run selected before, as `h` says (served_id and ts_ms from `slot`).
  void Record(const RunResult& r, const Slot& slot, RecordHeader h);
};

}  // namespace rankd
