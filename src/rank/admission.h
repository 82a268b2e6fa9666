// Admission: the first stage of a /rank (and every plan-running) request on a shard —
// whether it may run now, decided in a few nanoseconds before any of its work starts.
// docs/operations.md, "Overload", is the operator's account of it.
//
//  - A concurrency limit that adapts to latency (a gradient controller, after Envoy's
//    adaptive concurrency filter): every 100 ms tick, the median of the interval's
//    latency ratios (each answer's time over its plan's no-load latency) gives
//    gradient = clamp(tolerance / median, 0.5, 2); limit = limit * gradient + sqrt(limit),
//    within [min_limit, --max-inflight]. It grows only while the shard uses more than half
//    of it, and does not shrink while 95% of the interval's answers took under a quarter
//    of their request's deadline (no client is the worse for that queue). The no-load
//    latency of each plan is measured, not assumed: the median of its last 32 answers
//    to requests admitted while the shard ran nothing else. A shard under sustained load
//    has no such moments, so when a plan with traffic has had none for
//    `probe_after` (no estimate yet) or `refresh_after` (an old one) while the shard
//    refuses for its limit (only then does the estimate decide anything), it makes them:
//    it pins its limit at 1 until `probe_requests` have answered (at most `probe_max_ms`).
//    A minimum taken from loaded traffic would drift upward with the load it detects.
//    Until a plan has an estimate, answers late against their deadlines halve the limit.
//  - Priorities: sheddable requests (and shadows) may use half of the limit, default the
//    limit, critical 1.5x it (never past --max-inflight).
//  - Deadlines: a request whose remaining deadline is shorter than its plan's median
//    time to a 2xx answer (the last 200, once there are 50) cannot finish: refused.
//  - Quality: for plans with a "quality" block, a factor q in [min, 1] that falls while
//    the plan's p95 (last 200 answers) is over its target or the shard refuses for its
//    limit, and climbs back slowly otherwise (server/docs: "Quality that bends").
//
// Threads: the shard's loop thread only; the metric values in AdmissionStats are read
// by scrapes from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/rank_request.h"
#include "core/deadline.h"
#include "core/metric_value.h"
#include "metrics/admission_stats.h"
#include "plan/plan.h"
#include "rank/latency_window.h"

namespace rankd {

struct AdmissionOptions {
  bool adaptive = true;  // false: the limit is --max-inflight (the old fixed rule)
  size_t max_inflight = 1024;
  size_t min_limit = 4;
  size_t initial_limit = 128;     // until latency says otherwise: the first answers do
  double tolerance = 2.0;         // latency over no-load latency the limit accepts
  int64_t probe_after_ms = 5000;  // a plan with traffic and no no-load estimate
  // A plan with traffic whose estimate is this old. A measurement refuses all but one
  // request at a time for its ~20 answers: at 1,000 req/s and 3 ms a request, about 60
  // requests every 5 minutes under sustained load.
  int64_t refresh_after_ms = 300000;
  size_t probe_requests = 20;   // answers a measurement waits for
  int64_t probe_max_ms = 1000;  // a measurement ends after this even with fewer
};

// One plan's load statistics on one shard; they survive reloads of the plan (by name).
struct PlanLoad {
  explicit PlanLoad(std::string n) : name(std::move(n)) {}
  const std::string name;
  LatencyWindow ok_times;   // 2xx answers (deadline refusals)
  LatencyWindow all_times;  // every admitted answer (quality)
  // No-load latency: the last answers of requests admitted alone (or while measuring).
  std::array<uint32_t, 32> alone{};
  size_t alone_filled = 0, alone_next = 0;
  int64_t no_load_us = 0;  // their median; 0: none yet
  TimePoint no_load_at{};  // when the last one came (to the tick)
  TimePoint first_seen{};  // the first answer of the plan on this shard (to the tick)
  bool seen = false;       // answers since the last tick
  // The quality block of the plan last installed under this name (none: no block).
  std::optional<PlanQuality> quality;
  double q = 1.0;
  uint64_t q_seen = 0;                     // all_times.added() at the last update
  MetricValue<double>* q_gauge = nullptr;  // rankd_plan_quality, set by the owner
};
using PlanLoadPtr = std::shared_ptr<PlanLoad>;

class Admission {
 public:
  explicit Admission(AdmissionOptions opts);

  // What admission gave a request, handed back when it answers.
  struct Ticket {
    PlanLoadPtr load;
    uint32_t epoch = 0;     // the measurement epoch it was admitted in (odd: measuring)
    bool alone = false;     // admitted while the shard ran nothing else
    int64_t budget_us = 0;  // its remaining deadline when admitted
  };

  // The plan's statistics (made on first use). Plans of one name share them.
  PlanLoadPtr LoadFor(const PlanPtr& plan);
  // After a reload: statistics of plans no longer in `plans` go; quality blocks follow
  // the new plans.
  void Install(const std::vector<PlanPtr>& plans);

  // Refuses (the reason) or admits (fills `ticket`). `live`: requests the shard runs now;
  // `remaining_us`: what is left of the request's deadline.
  std::optional<Refusal> Admit(const PlanPtr& plan, size_t live, Priority p, int64_t remaining_us,
                               Ticket& ticket);
  // Whether a shadow may start (sheddable, without statistics).
  bool AdmitShadow(size_t live) const { return live < LimitFor(Priority::kSheddable); }
  // An admitted request answered after `took_us` (ok: with 2xx).
  void OnAnswer(const Ticket& t, int64_t took_us, bool ok);
  // Every 100 ms from the shard's tick.
  void OnTick(TimePoint now, size_t live);

  size_t limit() const { return static_cast<size_t>(limit_); }
  size_t LimitFor(Priority p) const;
  double QualityOf(const PlanLoad& l) const { return l.quality ? l.q : -1.0; }
  const AdmissionStats& stats() const { return stats_; }
  AdmissionStats& mutable_stats() { return stats_; }
  const std::unordered_map<std::string, PlanLoadPtr>& loads() const { return by_name_; }

 private:
  bool measuring() const { return (epoch_ & 1) != 0; }
  // 95% of the interval's answers took over a quarter of their deadlines (sorts used_).
  bool Pressed();
  bool NeedsMeasuring(TimePoint now) const;
  void StartMeasuring(TimePoint now);
  void FinishMeasuring();
  static void AddAlone(PlanLoad& l, int64_t took_us, TimePoint now);
  static void SetQuality(PlanLoad& l, const Plan& plan);
  void UpdateLimit(size_t live);
  void UpdateQuality(PlanLoad& l, bool refusing);

  const AdmissionOptions opts_;
  double limit_;
  double limit_before_measuring_ = 0;
  uint32_t epoch_ = 0;
  TimePoint tick_{};  // the last tick's time: answers are dated to it (no clock read each)
  TimePoint measure_started_{};
  size_t measured_ = 0;          // probe answers so far
  std::vector<float> ratios_;    // this interval's latency ratios
  std::vector<float> used_;      // and the fractions of their deadlines the answers took
  size_t max_live_ = 0;          // the most requests running at once this interval
  uint64_t limit_refusals_ = 0;  // this interval's, for quality
  TimePoint last_refusal_{};     // the last tick whose interval refused for the limit
  bool pressed_ = false;  // the last interval's answers took over a quarter of their deadlines
  std::unordered_map<std::string, PlanLoadPtr> by_name_;
  std::unordered_map<const Plan*, PlanLoadPtr> by_plan_;
  AdmissionStats stats_;
};

}  // namespace rankd
