#include "rank/admission.h"

#include <algorithm>
#include <cmath>

namespace rankd {

namespace {

// The share of its deadline under which an answer shows no pressure worth refusing for.
constexpr float kRelaxedDeadlineShare = 0.25f;
constexpr size_t kMaxRatiosPerInterval = 1024;  // a uniform enough sample of one 100 ms
// Deadline refusals need this many 2xx answers of the plan before they trust its median.
constexpr size_t kMinTimesForDeadline = 50;
// Quality: how far one tick moves q (down fast, up slowly: a load spike is met within a
// few ticks, and q does not climb back into the latency it just left).
constexpr double kQualityStepDown = 0.05;
constexpr double kQualityStepUp = 0.02;
constexpr uint64_t kQualityMinNewSamples = 10;

}  // namespace

Admission::Admission(AdmissionOptions opts)
    : opts_(opts),
      limit_(opts.adaptive ? static_cast<double>(
                                 std::clamp(opts.initial_limit, opts.min_limit, opts.max_inflight))
                           : static_cast<double>(opts.max_inflight)),
      tick_(Clock::now()) {
  ratios_.reserve(kMaxRatiosPerInterval);
  used_.reserve(kMaxRatiosPerInterval);
  stats_.limit = limit_;
}

PlanLoadPtr Admission::LoadFor(const PlanPtr& plan) {
  auto it = by_plan_.find(plan.get());
  if (it != by_plan_.end()) return it->second;
  PlanLoadPtr& load = by_name_[plan->name];
  if (!load) load = std::make_shared<PlanLoad>(plan->name);
  if (plan->quality.enabled) SetQuality(*load, *plan);
  by_plan_[plan.get()] = load;
  return load;
}

void Admission::Install(const std::vector<PlanPtr>& plans) {
  std::unordered_map<std::string, PlanLoadPtr> names;
  by_plan_.clear();
  for (const PlanPtr& p : plans) {
    auto it = by_name_.find(p->name);
    PlanLoadPtr load = it != by_name_.end() ? it->second : std::make_shared<PlanLoad>(p->name);
    SetQuality(*load, *p);
    names[p->name] = load;
    by_plan_[p.get()] = load;
  }
  by_name_ = std::move(names);  // a request still running keeps its own PlanLoadPtr
}

void Admission::SetQuality(PlanLoad& l, const Plan& plan) {
  if (plan.quality.enabled) {
    l.quality = plan.quality;
  } else {
    l.quality.reset();
    l.q = 1.0;
  }
}

size_t Admission::LimitFor(Priority p) const {
  double l = limit_;
  switch (p) {
    case Priority::kCritical: l *= 1.5; break;
    case Priority::kSheddable: l *= 0.5; break;
    default: break;
  }
  return std::clamp<size_t>(static_cast<size_t>(l), 1, opts_.max_inflight);
}

std::optional<Refusal> Admission::Admit(const PlanPtr& plan, size_t live, Priority p,
                                        int64_t remaining_us, Ticket& ticket) {
  if (live >= LimitFor(p)) {
    ++limit_refusals_;
    return Refusal::kLimit;
  }
  PlanLoadPtr load = LoadFor(plan);
  if (load->ok_times.size() >= kMinTimesForDeadline && remaining_us < load->ok_times.Median())
    return Refusal::kDeadline;
  ticket.load = std::move(load);
  ticket.epoch = epoch_;
  ticket.alone = live == 0;
  ticket.budget_us = remaining_us;
  max_live_ = std::max(max_live_, live + 1);
  return std::nullopt;
}

void Admission::OnAnswer(const Ticket& t, int64_t took_us, bool ok) {
  PlanLoad& l = *t.load;
  l.all_times.Add(took_us);
  if (ok) l.ok_times.Add(took_us);
  if (!opts_.adaptive) return;
  if (l.first_seen == TimePoint{}) l.first_seen = tick_;
  l.seen = true;
  bool probe = measuring() && t.epoch == epoch_;
  if (ok && (t.alone || probe)) AddAlone(l, took_us, tick_);
  if (probe) ++measured_;
  if (measuring()) return;
  // Only answers that came in time say how much of its deadline a request needs: a client
  // asking for impossible deadlines (every answer a 504) must not move the shard's limit.
  if (ok && used_.size() < kMaxRatiosPerInterval)
    used_.push_back(static_cast<float>(static_cast<double>(took_us) /
                                       static_cast<double>(std::max<int64_t>(1, t.budget_us))));
  if (l.no_load_us > 0 && ratios_.size() < kMaxRatiosPerInterval)
    ratios_.push_back(
        static_cast<float>(static_cast<double>(took_us) / static_cast<double>(l.no_load_us)));
}

void Admission::AddAlone(PlanLoad& l, int64_t took_us, TimePoint now) {
  l.alone[l.alone_next] = static_cast<uint32_t>(std::clamp<int64_t>(took_us, 1, UINT32_MAX));
  l.alone_next = (l.alone_next + 1) % l.alone.size();
  l.alone_filled = std::min(l.alone_filled + 1, l.alone.size());
  auto copy = l.alone;
  auto end = copy.begin() + static_cast<std::ptrdiff_t>(l.alone_filled);
  auto mid = copy.begin() + static_cast<std::ptrdiff_t>(l.alone_filled / 2);
  std::nth_element(copy.begin(), mid, end);
  l.no_load_us = *mid;
  l.no_load_at = now;
}

void Admission::OnTick(TimePoint now, size_t live) {
  tick_ = now;
  bool refusing = limit_refusals_ > 0;
  pressed_ = Pressed();
  if (refusing) last_refusal_ = now;
  for (auto& [name, l] : by_name_)
    if (l->quality) UpdateQuality(*l, refusing);
  limit_refusals_ = 0;
  if (opts_.adaptive) {
    if (measuring()) {
      if (measured_ >= opts_.probe_requests ||
          now - measure_started_ >= std::chrono::milliseconds(opts_.probe_max_ms))
        FinishMeasuring();
    } else if (NeedsMeasuring(now)) {
      StartMeasuring(now);
    } else {
      UpdateLimit(live);
    }
  }
  for (auto& [name, l] : by_name_) l->seen = false;
  ratios_.clear();
  used_.clear();
  max_live_ = live;
}

// Admission is there so that requests keep their deadlines. While 95% of the answers
// take under a quarter of their deadline (the quarter past which the CPU queue turns
// LIFO, whose fast newest answers would make a median look well), a longer queue costs
// the clients nothing they asked for: the limit holds where the latency rule would
// shrink it. A latency target alone would refuse a closed-loop client (wrk -c16) with
// more requests outstanding than a few per shard, continuously, though every answer came
// in time, and its immediate retries would cost the shard more than the answers.
bool Admission::Pressed() {
  if (used_.empty()) return false;
  auto p95 = used_.begin() + static_cast<std::ptrdiff_t>(used_.size() * 95 / 100);
  std::nth_element(used_.begin(), p95, used_.end());
  return *p95 >= kRelaxedDeadlineShare;
}

// The shard refused for its limit within the last second (the estimates then decide who
// is served), and a plan answered since the last tick lacks a no-load estimate it could
// have had by now: none after probe_after of traffic, or one older than refresh_after.
bool Admission::NeedsMeasuring(TimePoint now) const {
  if (last_refusal_ == TimePoint{} || now - last_refusal_ > std::chrono::seconds(1)) return false;
  for (const auto& [name, l] : by_name_) {
    if (!l->seen) continue;
    if (l->no_load_us == 0
            ? now - l->first_seen >= std::chrono::milliseconds(opts_.probe_after_ms)
            : now - l->no_load_at >= std::chrono::milliseconds(opts_.refresh_after_ms))
      return true;
  }
  return false;
}

void Admission::StartMeasuring(TimePoint now) {
  ++epoch_;  // odd: measuring
  measure_started_ = now;
  measured_ = 0;
  limit_before_measuring_ = limit_;
  limit_ = 1;
  stats_.limit = limit_;
}

void Admission::FinishMeasuring() {
  ++epoch_;  // even: controlling
  ++stats_.probes;
  limit_ = std::max(limit_before_measuring_, static_cast<double>(opts_.min_limit));
  stats_.limit = limit_;
}

void Admission::UpdateLimit(size_t live) {
  if (ratios_.empty()) {
    // No no-load estimate to steer by (no request was ever alone), but answers late
    // against their deadlines: halve, and refusing will then measure one.
    if (pressed_) limit_ = std::max(limit_ / 2, static_cast<double>(opts_.min_limit));
    stats_.limit = limit_;
    return;
  }
  auto mid = ratios_.begin() + static_cast<std::ptrdiff_t>(ratios_.size() / 2);
  std::nth_element(ratios_.begin(), mid, ratios_.end());
  double median = std::max(1e-3, static_cast<double>(*mid));
  double gradient = std::clamp(opts_.tolerance / median, 0.5, 2.0);
  double next = limit_ * gradient + std::sqrt(limit_);
  if (!pressed_ && next < limit_) next = limit_;  // Pressed(): no client is the worse
  // A limit the shard does not use is not evidence that it could carry it: grow only
  // while more than half of it is in use.
  if (next > limit_ && static_cast<double>(std::max(max_live_, live)) * 2 < limit_) next = limit_;
  limit_ = std::clamp(next, static_cast<double>(opts_.min_limit),
                      static_cast<double>(opts_.max_inflight));
  stats_.limit = limit_;
}

void Admission::UpdateQuality(PlanLoad& l, bool refusing) {
  uint64_t added = l.all_times.added();
  bool fresh = added - l.q_seen >= kQualityMinNewSamples;
  double target_us = l.quality->target_p95_ms * 1000.0;
  double q = l.q;
  if (refusing) q -= kQualityStepDown;
  if (fresh) {
    l.q_seen = added;
    double p95 = static_cast<double>(l.all_times.P95());
    if (p95 > target_us)
      q -= kQualityStepDown;
    else if (!refusing && p95 < 0.8 * target_us)
      q += kQualityStepUp;
  }
  // On a grid of 0.01, so answers and records show 0.65, not 0.6499999999999999.
  l.q = std::clamp(std::round(q * 100) / 100, l.quality->min, 1.0);
  if (l.q_gauge) *l.q_gauge = l.q;
}

}  // namespace rankd
