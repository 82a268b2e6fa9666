#include "metrics/console_metrics.h"

#include <cmath>
#include <map>
#include <vector>

#include "api/rank_response.h"
#include "core/json_escape.h"
#include "metrics/metric_buckets.h"

namespace rankd {

namespace {

// One plan's counters, summed over shards.
struct PlanSums {
  std::map<std::string, uint64_t> outcomes;  // by outcome label ("ok", error codes)
  // The bounds (seconds) of every plan's duration series (plan_metrics.cc), and the
  // observations in each bucket alone; the last is +Inf.
  std::span<const double> bounds = kLatencyBuckets;
  std::vector<uint64_t> buckets = std::vector<uint64_t>(kLatencyBuckets.size() + 1);
};

// POST /events' events, every type, summed over shards.
struct EventSums {
  uint64_t accepted = 0;
  uint64_t failed = 0;
};

// The series' labels, as plan_metrics.cc makes them: requests {outcome, plan, shard},
// duration {plan, shard}; as events_route.cc makes them: events {outcome, type}.
void AddShard(const SeriesSet::Snapshot& set, std::map<std::string, PlanSums>& plans,
              EventSums& events) {
  for (const auto& s : set[static_cast<size_t>(SeriesFamily::kEvents)])
    (s->labels[0] == "accepted" ? events.accepted : events.failed) += s->count.value();
  for (const auto& s : set[static_cast<size_t>(SeriesFamily::kRankRequests)])
    plans[s->labels[1]].outcomes[s->labels[0]] += s->count.value();
  for (const auto& s : set[static_cast<size_t>(SeriesFamily::kRankDuration)]) {
    PlanSums& p = plans[s->labels[0]];
    const MetricHistogram& h = *s->histogram;
    for (size_t i = 0; i < p.buckets.size() && i <= h.bounds().size(); ++i)
      p.buckets[i] += h.bucket(i);
  }
}

void AppendPlan(const PlanSums& p, std::string& out) {
  uint64_t requests = 0;
  for (const auto& [outcome, n] : p.outcomes) requests += n;
  auto ok = p.outcomes.find("ok");
  out += R"({"requests":)";
  AppendJsonInt(static_cast<int64_t>(requests), out);
  out += R"(,"errors":)";
  AppendJsonInt(static_cast<int64_t>(requests - (ok == p.outcomes.end() ? 0 : ok->second)), out);
  out += R"(,"outcomes":{)";
  bool first = true;
  for (const auto& [outcome, n] : p.outcomes) {
    if (n == 0) continue;
    if (!first) out += ',';
    first = false;
    AppendJsonString(outcome, out);
    out += ':';
    AppendJsonInt(static_cast<int64_t>(n), out);
  }
  out += R"(},"duration_ms":{"le":[)";
  for (size_t i = 0; i < p.bounds.size(); ++i) {
    if (i) out += ',';
    // Seconds to ms, rounded to the ns so that 0.00025 s reads 0.25, not 0.25000000000000006.
    AppendJsonDouble(std::round(p.bounds[i] * 1e9) / 1e6, out);
  }
  out += R"(],"counts":[)";
  uint64_t cumulative = 0;  // as Prometheus's buckets: counts[i] = observations <= le[i]
  for (size_t i = 0; i < p.buckets.size(); ++i) {
    if (i) out += ',';
    cumulative += p.buckets[i];
    AppendJsonInt(static_cast<int64_t>(cumulative), out);
  }
  out += "]}}";
}

}  // namespace

void WriteConsoleMetrics(const ScrapeSources& sources, int64_t now_ms, std::string& out) {
  std::map<std::string, PlanSums> plans;
  EventSums events;
  for (const ShardStats* t : sources.shards)
    if (auto set = t->series.Current()) AddShard(*set, plans, events);
  out += R"({"plans":{)";
  bool first = true;
  for (const auto& [name, sums] : plans) {
    if (!first) out += ',';
    first = false;
    AppendJsonString(name, out);
    out += ':';
    AppendPlan(sums, out);
  }
  out += R"(},"events":{"accepted":)";
  AppendJsonInt(static_cast<int64_t>(events.accepted), out);
  out += R"(,"failed":)";
  AppendJsonInt(static_cast<int64_t>(events.failed), out);
  out += R"(},"now_ms":)";
  AppendJsonInt(now_ms, out);
  out += '}';
}

}  // namespace rankd
