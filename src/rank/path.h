// RankPath: POST /rank on one shard, as the stages of RankStages (rank/stages.h) run it:
// every stage's hook before the run, the run (sched/scheduler.h RunPlan), the hooks after
// the result, the answer (one buffer, one write, Server-Timing) and the hooks after it.
// A Shard owns one and hands it every /rank request it routes.
//
// Threads: the shard's loop thread (constructed before the loop runs).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <tuple>

#include "api/routes.h"
#include "core/coro.h"
#include "rank/context.h"
#include "rank/stage.h"
#include "rank/stages.h"

namespace rankd {

template <class List>
struct StageTuple;
template <class... Stages>
struct StageTuple<StageList<Stages...>> : std::tuple<Stages...> {
  template <class>
  static RankShard& Shard(RankShard& s) {
    return s;
  }
  explicit StageTuple(RankShard& s) : std::tuple<Stages...>(Shard<Stages>(s)...) {}
  std::tuple<Stages...>& all() { return *this; }
};

class RankPath {
 public:
  // `shard` outlives the path; its `path` is set to this.
  explicit RankPath(RankShard& shard);

  // A POST /rank the shard routed here from `listener`, read at `t0`.
  void Handle(const http::Request& req, http::Responder res, TimePoint t0, Listener listener);
  void Install(const PlanSet& plans);  // a new plan snapshot
  void Tick(TimePoint now);            // every 100 ms

  template <class Stage>
  Stage& stage() {
    return std::get<Stage>(stages_.all());
  }

 private:
  // Calls f(stage) for every stage, in the list's order.
  template <class F>
  void Each(F f) {
    std::apply([&](auto&... s) { (f(s), ...); }, stages_.all());
  }
  Coro<void> Run(RankContext ctx);
  void Refuse(RankContext& ctx, const http::Request& req, const Error& e);

  RankShard& shard_;
  StageTuple<RankStages> stages_;
};

// Sends an answer of `route` and counts it (rankd_http_requests_total, the access log
// without plan): what every answer of a shard but a plan run's does.
void SendAnswer(RankShard& shard, http::Responder& res, std::string_view method,
                std::string_view request_id, Route route, const http::Response& r, TimePoint t0);
// The Server-Timing header of a /rank answer: "total;dur=<ms, 3 decimals>".
std::string ServerTiming(std::chrono::microseconds took);
// Unix ms of `t`, a time of the steady clock.
int64_t UnixMsAt(TimePoint t);

}  // namespace rankd
