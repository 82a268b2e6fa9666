// RankContext: one /rank request on its way through the path's stages (rank/stage.h):
// what every stage reads (the run, the request's id, time and deadline, the result, the
// answer's status) and one slot a stage (its `Slot`, ctx.slot<Stage>()).
//
// Threads: the shard's loop thread; owned by the request's coroutine frame.
#pragma once

#include <chrono>
#include <string>
#include <tuple>

#include "api/rank_response.h"
#include "rank/stages.h"

namespace rankd {

// A stage's Slot, or an empty one of its own.
template <class Stage>
struct NoSlot {};
template <class Stage>
struct SlotOf {
  using type = NoSlot<Stage>;
};
template <class Stage>
requires requires { typename Stage::Slot; }
struct SlotOf<Stage> {
  using type = typename Stage::Slot;
};
template <class List>
struct SlotsOf;
template <class... Stages>
struct SlotsOf<StageList<Stages...>> {
  using type = std::tuple<typename SlotOf<Stages>::type...>;
};

struct RankContext {
  explicit RankContext(http::Responder res) : res(std::move(res)) {}

  template <class Stage>
  typename SlotOf<Stage>::type& slot() {
    return std::get<typename SlotOf<Stage>::type>(slots);
  }
  template <class Stage>
  const typename SlotOf<Stage>::type& slot() const {
    return std::get<typename SlotOf<Stage>::type>(slots);
  }

  // Before the run.
  RunRequest run;  // moved into RunPlan by the path
  PlanPtr plan;    // the plan that runs (a variant's), kept after the run
  UserId user_id;
  std::string request_id;
  TimePoint t0;  // when the request was fully read
  int64_t deadline_ms = 0;
  bool explain = false;
  http::Responder res;
  bool answered = false;  // a stage answered the request itself: the path stops

  // After it.
  Result<RunResult> result = Fail(Error::Internal("not run"));
  ResponseExtras extras;  // OnResult: views into the slots
  int64_t took_us = 0;    // from t0 to the answer written
  int status = 200;

  SlotsOf<RankStages>::type slots;
};

}  // namespace rankd
