// The shadow stage of /rank (docs/experiments.md, "Shadows"): after the answer is sent,
// each shadow plan of the request's experiment runs for its percent of requests, shed
// under load, and is measured against the answer (overlap, rank correlation).
//
// Threads: the shard's loop thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cancel.h"
#include "core/coro.h"
#include "rank/stage.h"
#include "rank/stage_experiment.h"
#include "rank/stage_served_log.h"

namespace rankd {

class ShadowStage : public StageBase {
 public:
  using StageBase::StageBase;

  void After(RankContext& ctx);
  // The primaries need the shard: the shadows running stop.
  void Cancel();

 private:
  // What a shadow run keeps of its primary.
  struct Shadow {
    ExperimentStage::Slot experiment;
    size_t index = 0;  // in the experiment's shadows
    std::string request_id;
    TimePoint t0;
    ServedLogStage::Slot served;
  };
  Coro<void> Run(RunRequest run, Shadow s, std::vector<uint64_t> primary_ids);

  size_t running_ = 0;
  // The running shadows' parent token; replaced by a fresh one each time it is cancelled.
  std::shared_ptr<CancelToken> cancel_ = std::make_shared<CancelToken>();
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
};

}  // namespace rankd
