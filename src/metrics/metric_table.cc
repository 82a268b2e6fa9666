#include "metrics/metric_table.h"

#include <dirent.h>
#include <prometheus/metric_family.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "ann/ann_set.h"
#include "cache/shard_cache.h"
#include "core/timeout.h"
#include "events/shard_events.h"
#include "metrics/admission_stats.h"
#include "metrics/exposition.h"
#include "plan/schema.h"
#include "redis/stats.h"
#include "served/shard_log.h"

namespace rankd {

namespace {

using Type = prometheus::MetricType;
using LabelNames = std::array<std::string_view, 4>;  // in output order; unused ones empty

// Bucket counts of one or more histograms with the same bounds, added up.
struct HistogramSum {
  explicit HistogramSum(std::span<const double> b) : bounds(b), buckets(b.size() + 1) {}
  void Add(const MetricHistogram& h) {
    for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += h.bucket(i);
    sum += h.sum();
  }
  std::span<const double> bounds;
  std::vector<uint64_t> buckets;  // not cumulative; the last is +Inf
  double sum = 0;
};

// The series of one family as its reader finds them: label values come in the order of
// the row's label names.
class FamilyOut {
 public:
  FamilyOut(const LabelNames& names, prometheus::MetricFamily& family)
      : names_(names), family_(family) {}

  // `labels`: a braced list of string_views or a vector of strings.
  template <class Labels>
  void Value(const Labels& labels, double v) {
    prometheus::ClientMetric& m = Next(labels);
    (family_.type == Type::Counter ? m.counter.value : m.gauge.value) = v;
  }
  void Value(std::initializer_list<std::string_view> labels, double v) {
    Value<decltype(labels)>(labels, v);
  }
  template <class Labels>
  void Histogram(const Labels& labels, const HistogramSum& h) {
    prometheus::ClientMetric::Histogram& out = Next(labels).histogram;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.buckets.size(); ++i) {
      cumulative += h.buckets[i];
      out.bucket.push_back({cumulative, i < h.bounds.size()
                                            ? h.bounds[i]
                                            : std::numeric_limits<double>::infinity()});
    }
    out.sample_count = cumulative;
    out.sample_sum = h.sum;
  }
  template <class Labels>
  void Histogram(const Labels& labels, const MetricHistogram& h) {
    HistogramSum one(h.bounds());
    one.Add(h);
    Histogram(labels, one);
  }
  void Histogram(std::initializer_list<std::string_view> labels, const MetricHistogram& h) {
    Histogram<decltype(labels)>(labels, h);
  }
  void Histogram(std::initializer_list<std::string_view> labels, const HistogramSum& h) {
    Histogram<decltype(labels)>(labels, h);
  }

 private:
  template <class Labels>
  prometheus::ClientMetric& Next(const Labels& values) {
    prometheus::ClientMetric& m = family_.metric.emplace_back();
    size_t i = 0;
    for (const auto& v : values) m.label.push_back({std::string(names_[i++]), std::string(v)});
    return m;
  }
  const LabelNames& names_;
  prometheus::MetricFamily& family_;
};

using Reader = void (*)(const ScrapeSources&, FamilyOut&);

struct MetricRow {
  std::string_view name;
  std::string_view help;
  Type type;
  LabelNames labels;
  Reader read;
};

// --- readers shared by several rows ---------------------------------------------------

// One series per shard: {shard="i"} value(shard).
template <auto value>
void PerShard(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards) out.Value({t->shard}, static_cast<double>(value(*t)));
}

// The same for the shards running a cache (--cache-mb).
template <auto value>
void PerCache(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    if (t->cache) out.Value({t->shard}, static_cast<double>(value(*t->cache)));
}

// Series of a shard's SeriesSet, as they are (their labels include the shard).
template <SeriesFamily family>
void ShardSeries(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards) {
    auto published = t->series.Current();
    if (!published) continue;
    for (const auto& series : (*published)[static_cast<size_t>(family)]) {
      if (series->histogram)
        out.Histogram(series->labels, *series->histogram);
      else if (family == SeriesFamily::kPlanQuality)
        out.Value(series->labels, series->gauge.value());
      else
        out.Value(series->labels, static_cast<double>(series->count.value()));
    }
  }
}

// Series of shards' SeriesSets without a shard label: summed over shards by labels.
template <SeriesFamily family>
void SummedSeries(const ScrapeSources& s, FamilyOut& out) {
  std::map<std::vector<std::string>, uint64_t> counts;
  std::map<std::vector<std::string>, HistogramSum> histograms;
  for (const ShardStats* t : s.shards) {
    auto published = t->series.Current();
    if (!published) continue;
    for (const auto& series : (*published)[static_cast<size_t>(family)]) {
      if (series->histogram)
        histograms.try_emplace(series->labels, series->histogram->bounds())
            .first->second.Add(*series->histogram);
      else
        counts[series->labels] += series->count.value();
    }
  }
  for (const auto& [labels, n] : counts) out.Value(labels, static_cast<double>(n));
  for (const auto& [labels, h] : histograms) out.Histogram(labels, h);
}

// A counter of both listeners of a shard (the metrics address's too), summed.
template <class F>
uint64_t BothListeners(const ShardStats& t, F value) {
  return value(*t.http) + (t.metrics_http ? value(*t.metrics_http) : 0);
}

void HttpRequests(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t i = 0; i < ShardStats::kHttpAnswers; ++i) {
      uint64_t n = t->http_requests[i];
      if (n == 0 && !t->http_listed[i]) continue;
      ShardStats::HttpAnswer a = ShardStats::HttpAnswerOf(i);
      out.Value({a.code, a.method, a.route, t->shard}, static_cast<double>(n));
    }
}

void HttpDuration(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t r = 0; r < t->http_duration.size(); ++r)
      out.Histogram({RouteName(static_cast<Route>(r)), t->shard}, t->http_duration[r]);
}

void HttpRejects(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t k = 0; k < static_cast<size_t>(http::RejectKind::kCount); ++k) {
      uint64_t n =
          BothListeners(*t, [k](const http::HttpCounters& c) { return c.rejects[k].value(); });
      out.Value({http::RejectKindName(static_cast<http::RejectKind>(k)), t->shard},
                static_cast<double>(n));
    }
  // The router's refusals (Shard::CrossSiteAllowed).
  for (const ShardStats* t : s.shards) {
    out.Value({"forbidden_origin", t->shard}, static_cast<double>(t->forbidden_origins.value()));
    out.Value({"misdirected_host", t->shard}, static_cast<double>(t->misdirected.value()));
  }
}

void HttpLimitHits(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards) {
    for (size_t k = 0; k < static_cast<size_t>(http::LimitKind::kCount); ++k) {
      uint64_t n =
          BothListeners(*t, [k](const http::HttpCounters& c) { return c.limits[k].value(); });
      out.Value({http::LimitKindName(static_cast<http::LimitKind>(k)), t->shard},
                static_cast<double>(n));
    }
    out.Value({"scrape_queue", t->shard}, static_cast<double>(t->scrapes_refused.value()));
  }
}

void CpuOffloads(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards) {
    out.Value({"inline", t->shard}, static_cast<double>(t->offloads.inline_runs.value()));
    out.Value({"pool", t->shard}, static_cast<double>(t->offloads.pool_runs.value()));
  }
}

void PageSnapshots(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t o = 0; o < t->page_snapshots.size(); ++o)
      out.Value({SnapshotOutcomeName(static_cast<SnapshotOutcome>(o)), t->shard},
                static_cast<double>(t->page_snapshots[o].value()));
}

void PageRequests(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t o = 0; o < t->page_requests.size(); ++o)
      out.Value({o == 0 ? std::string_view("ok") : ErrorCodeName(static_cast<ErrorCode>(o - 1)),
                 t->shard},
                static_cast<double>(t->page_requests[o].value()));
}

// The records of one log (served or events) by sink and outcome, summed over shards.
template <LogKind kKind>
void LogRecords(const ScrapeSources& s, FamilyOut& out) {
  std::map<std::pair<std::string, ServedOutcome>, uint64_t> sums;  // (sink, outcome)
  for (const ShardStats* t : s.shards)
    if (t->served_log)
      t->served_log->ForEachCount(
          [&](std::string_view sink, LogKind k, ServedOutcome o, uint64_t n) {
            if (n && k == kKind) sums[{std::string(sink), o}] += n;
          });
  for (const auto& [key, n] : sums)
    out.Value({ServedOutcomeName(key.second), key.first}, static_cast<double>(n));
}

void AdmissionRefusals(const ScrapeSources& s, FamilyOut& out) {
  for (const ShardStats* t : s.shards)
    for (size_t r = 0; r < static_cast<size_t>(Refusal::kCount); ++r)
      for (size_t p = 0; p < static_cast<size_t>(Priority::kCount); ++p)
        out.Value({PriorityName(static_cast<Priority>(p)), RefusalName(static_cast<Refusal>(r)),
                   std::string_view(t->shard)},
                  static_cast<double>(t->admission->refusals[r][p].value()));
}

void ForcedLogsIgnored(const ScrapeSources& s, FamilyOut& out) {
  if (s.shards.empty()) return;
  uint64_t n = 0;
  for (const ShardStats* t : s.shards)
    if (t->served_log) n += t->served_log->forced_ignored();
  out.Value({}, static_cast<double>(n));
}

void ForcedIgnored(const ScrapeSources& s, FamilyOut& out) {
  if (s.shards.empty()) return;
  uint64_t n = 0;
  for (const ShardStats* t : s.shards) n += t->forced_variants_ignored;
  out.Value({}, static_cast<double>(n));
}

// --- Redis: the pools' counters, summed over shards per endpoint ----------------------

struct Endpoint {
  std::string_view name;
  std::vector<const RedisStats*> shards;  // its pool's stats on each shard
  bool cluster = false;
};

// Every endpoint, in order of first appearance.
std::vector<Endpoint> Endpoints(const ScrapeSources& s) {
  std::vector<Endpoint> eps;
  for (const ShardStats* t : s.shards)
    for (const auto& [name, st] : t->redis) {
      auto it =
          std::find_if(eps.begin(), eps.end(), [&](const Endpoint& e) { return e.name == name; });
      if (it == eps.end()) it = eps.insert(eps.end(), Endpoint{name, {}, false});
      it->shards.push_back(st.get());
      it->cluster = it->cluster || st->cluster;
    }
  return eps;
}

template <auto field>
double Sum(const Endpoint& e) {
  double n = 0;
  for (const RedisStats* st : e.shards) n += static_cast<double>(Read(st->*field));
  return n;
}

template <auto field>
void PerEndpoint(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s)) out.Value({e.name}, Sum<field>(e));
}

template <auto field>
void PerClusterEndpoint(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s))
    if (e.cluster) out.Value({e.name}, Sum<field>(e));
}

void RedisErrors(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s)) {
    const std::pair<std::string_view, double> kinds[] = {
        {"error_reply", Sum<&RedisStats::error_replies>(e)},
        {"unavailable", Sum<&RedisStats::failed_unavailable>(e)},
        {"deadline", Sum<&RedisStats::failed_deadline>(e)},
        {"backend", Sum<&RedisStats::failed_backend>(e)},
        {"bad_reply", Sum<&RedisStats::bad_replies>(e)},
        {"connect_failed", Sum<&RedisStats::connect_failures>(e)},
        {"disconnect", Sum<&RedisStats::disconnects>(e)},
        {"unknown_redirect", Sum<&RedisStats::unknown_redirects>(e)}};
    for (const auto& [kind, v] : kinds) out.Value({e.name, kind}, v);
  }
}

void RedisConnections(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s)) {
    double live = 0;
    for (const RedisStats* st : e.shards)
      live += static_cast<double>(st->connections_live.load(std::memory_order_relaxed));
    out.Value({e.name, "live"}, live);
  }
}

constexpr auto kRedisLatencyBounds = [] {
  std::array<double, RedisStats::kLatencyBoundsUs.size()> b{};
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<double>(RedisStats::kLatencyBoundsUs[i]) / 1e6;
  return b;
}();

void RedisBatchDuration(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s)) {
    HistogramSum h(kRedisLatencyBounds);
    for (const RedisStats* st : e.shards) {
      for (size_t i = 0; i < h.buckets.size(); ++i) h.buckets[i] += Read(st->latency_buckets[i]);
      h.sum += static_cast<double>(Read(st->latency_sum_us)) / 1e6;
    }
    out.Histogram({e.name}, h);
  }
}

void RedisClusterRedirects(const ScrapeSources& s, FamilyOut& out) {
  for (const Endpoint& e : Endpoints(s)) {
    if (!e.cluster) continue;
    out.Value({e.name, "moved"}, Sum<&RedisStats::moved>(e));
    out.Value({e.name, "ask"}, Sum<&RedisStats::asked>(e));
    out.Value({e.name, "retry"}, Sum<&RedisStats::cluster_retries>(e));
  }
}

// A cluster node's counters, summed over the shards whose slot map still has it.
struct NodeSums {
  std::string node;
  double commands = 0, errors = 0, moved = 0, asked = 0, retries = 0, refreshes = 0;
};

// Every node of every cluster endpoint, in order of first appearance.
std::vector<std::pair<std::string_view, NodeSums>> ClusterNodes(const ScrapeSources& s) {
  std::vector<std::pair<std::string_view, NodeSums>> out;
  for (const Endpoint& e : Endpoints(s)) {
    if (!e.cluster) continue;
    size_t first = out.size();
    for (const RedisStats* st : e.shards)
      for (const auto& n : st->Nodes()) {
        auto it = std::find_if(out.begin() + static_cast<ptrdiff_t>(first), out.end(),
                               [&](const auto& x) { return x.second.node == n->node; });
        if (it == out.end()) it = out.insert(out.end(), {e.name, NodeSums{n->node}});
        NodeSums& sum = it->second;
        sum.commands += static_cast<double>(Read(n->commands));
        sum.errors += static_cast<double>(Read(n->errors));
        sum.moved += static_cast<double>(Read(n->moved));
        sum.asked += static_cast<double>(Read(n->asked));
        sum.retries += static_cast<double>(Read(n->retries));
        sum.refreshes += static_cast<double>(Read(n->slot_map_refreshes));
      }
  }
  return out;
}

template <auto field>
void PerClusterNode(const ScrapeSources& s, FamilyOut& out) {
  for (const auto& [ep, n] : ClusterNodes(s)) out.Value({ep, n.node}, n.*field);
}

void ClusterNodeRedirects(const ScrapeSources& s, FamilyOut& out) {
  for (const auto& [ep, n] : ClusterNodes(s)) {
    out.Value({ep, n.node, "moved"}, n.moved);
    out.Value({ep, n.node, "ask"}, n.asked);
    out.Value({ep, n.node, "retry"}, n.retries);
  }
}

void RedisBadValues(const ScrapeSources&, FamilyOut& out) {
  ForEachFamilyValueStats([&](const std::string& family, const FamilyValueStats& v) {
    out.Value({family, "missing_field"}, static_cast<double>(Read(v.missing_field)));
    out.Value({family, "unparsable_field"}, static_cast<double>(Read(v.unparsable_field)));
    out.Value({family, "bad_id"}, static_cast<double>(Read(v.bad_id)));
    out.Value({family, "bad_json"}, static_cast<double>(Read(v.bad_json)));
    out.Value({family, "bad_vector"}, static_cast<double>(Read(v.bad_vector)));
  });
}

// --- indexes (schema.json `indexes`: ann/ann_set.h AnnIndexStats) ------------------------

template <auto field>
void PerIndex(const ScrapeSources&, FamilyOut& out) {
  ForEachAnnIndexStats([&](const std::string& index, const AnnIndexStats& s) {
    out.Value({index}, static_cast<double>((s.*field).value()));
  });
}

void IndexBuilds(const ScrapeSources&, FamilyOut& out) {
  ForEachAnnIndexStats([&](const std::string& index, const AnnIndexStats& s) {
    out.Value({index, "ok"}, static_cast<double>(s.builds_ok.value()));
    out.Value({index, "loaded"}, static_cast<double>(s.builds_loaded.value()));
    out.Value({index, "over_max_items"}, static_cast<double>(s.builds_over_max_items.value()));
    out.Value({index, "over_max_bytes"}, static_cast<double>(s.builds_over_max_bytes.value()));
    out.Value({index, "failed"}, static_cast<double>(s.builds_failed.value()));
  });
}

void IndexSkipped(const ScrapeSources&, FamilyOut& out) {
  ForEachAnnIndexStats([&](const std::string& index, const AnnIndexStats& s) {
    out.Value({index, "bad_vector"}, static_cast<double>(s.bad_vectors.value()));
    out.Value({index, "bad_id"}, static_cast<double>(s.bad_ids.value()));
  });
}

// --- process_* (the Prometheus conventions), read from /proc ---------------------------

void ProcessResidentMemory(const ScrapeSources&, FamilyOut& out) {
  long size = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  out.Value({}, static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)));
}

void ProcessCpu(const ScrapeSources&, FamilyOut& out) {
  char line[1024];
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return;
  size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  line[n] = '\0';
  // The fields after the ")" that closes the command name: utime is the 12th, stime the 13th.
  const char* close = std::strrchr(line, ')');
  unsigned long utime = 0, stime = 0;
  if (!close || std::sscanf(close + 2, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %lu",
                            &utime, &stime) != 2)
    return;
  out.Value({}, static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK)));
}

void ProcessOpenFds(const ScrapeSources&, FamilyOut& out) {
  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++fds;
    closedir(d);
    --fds;  // the directory stream's own fd
  }
  out.Value({}, fds);
}

// --- the table ----------------------------------------------------------------------

constexpr MetricRow kMetricTable[] = {
    {"rankd_http_requests_total",
     "HTTP requests answered, by route template, method and status code",
     Type::Counter,
     {"code", "method", "route", "shard"},
     HttpRequests},
    {"rankd_http_request_duration_seconds",
     "Time from a request fully read to its response queued, by route",
     Type::Histogram,
     {"route", "shard"},
     HttpDuration},
    {"rankd_rank_requests_total",
     "POST /rank requests of a loaded plan, by outcome (ok or error code)",
     Type::Counter,
     {"outcome", "plan", "shard"},
     ShardSeries<SeriesFamily::kRankRequests>},
    {"rankd_rank_duration_seconds",
     "Time to run a plan, from request read to response ready",
     Type::Histogram,
     {"plan", "shard"},
     ShardSeries<SeriesFamily::kRankDuration>},
    {"rankd_node_duration_seconds",
     "Time a plan node ran, by plan, node and op",
     Type::Histogram,
     {"node", "op", "plan", "shard"},
     ShardSeries<SeriesFamily::kNodeDuration>},
    {"rankd_node_outcomes_total",
     "Plan node runs by status (ok, failed, timeout, skipped)",
     Type::Counter,
     {"node", "plan", "shard", "status"},
     ShardSeries<SeriesFamily::kNodeOutcomes>},
    {"rankd_model_rows_total",
     "Rows scored by `model` nodes, by model",
     Type::Counter,
     {"model", "shard"},
     ShardSeries<SeriesFamily::kModelRows>},
    {"rankd_model_eval_seconds",
     "Time a `model` node took to score its rows, by model",
     Type::Histogram,
     {"model", "shard"},
     ShardSeries<SeriesFamily::kModelEval>},
    {"rankd_model_null_rows_total",
     "Rows a `model` node left without a score (a missing input without fill, a bad "
     "embedding index), by model",
     Type::Counter,
     {"model", "shard"},
     ShardSeries<SeriesFamily::kModelNullRows>},
    {"rankd_deadline_exceeded_total",
     "Requests that ran past their deadline or a required node's timeout",
     Type::Counter,
     {"plan", "shard"},
     ShardSeries<SeriesFamily::kDeadlineExceeded>},
    {"rankd_degraded_total",
     "Optional nodes that failed or timed out (the request went on)",
     Type::Counter,
     {"node", "plan", "shard"},
     ShardSeries<SeriesFamily::kDegraded>},
    {"rankd_plan_reloads_total",
     "Plan set loads at start and on SIGHUP, by result",
     Type::Counter,
     {"result"},
     [](const ScrapeSources& s, FamilyOut& out) {
       out.Value({"ok"}, static_cast<double>(s.server->plan_reloads_ok.value()));
       out.Value({"error"}, static_cast<double>(s.server->plan_reloads_error.value()));
     }},
    {"rankd_inflight_requests",
     "Requests being run by a shard",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.live_requests.load(std::memory_order_relaxed); }>},
    {"rankd_admission_limit",
     "The shard's concurrency limit: adaptive, within --max-inflight (docs/operations.md, "
     "Overload)",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.admission->limit.value(); }>},
    {"rankd_admission_refusals_total",
     "Plan runs refused before they started (503), by reason (limit, deadline) and priority",
     Type::Counter,
     {"priority", "reason", "shard"},
     AdmissionRefusals},
    {"rankd_admission_refusal_seconds",
     "Time from a request read to its admission refusal queued",
     Type::Histogram,
     {"shard"},
     [](const ScrapeSources& s, FamilyOut& out) {
       for (const ShardStats* t : s.shards) out.Histogram({t->shard}, t->admission_refusal_seconds);
     }},
    {"rankd_admission_probes_total",
     "Times a shard pinned its limit low to measure its plans' no-load latency",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.admission->probes.value(); }>},
    {"rankd_priority_ignored_total",
     "/rank requests whose \"priority\" was ignored (no --allow-priority)",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.admission->priority_ignored.value(); }>},
    {"rankd_plan_quality",
     "The quality factor a plan with a quality block runs at (1 = full work)",
     Type::Gauge,
     {"plan", "shard"},
     ShardSeries<SeriesFamily::kPlanQuality>},
    {"rankd_events_total",
     "Events of POST /events by type and outcome: accepted (Redis acknowledged them), failed "
     "(Redis unavailable or erring: 503/502/504); a rejected request (400) counts none",
     Type::Counter,
     {"outcome", "type"},
     SummedSeries<SeriesFamily::kEvents>},
    {"rankd_events_flush_increments",
     "Distinct counter increments (key, type, bucket) of one flush of a shard's events",
     Type::Histogram,
     {"shard"},
     [](const ScrapeSources& s, FamilyOut& out) {
       for (const ShardStats* t : s.shards) out.Histogram({t->shard}, t->events->flush_increments);
     }},
    {"rankd_events_flush_seconds",
     "Time from a flush of a shard's events to Redis's last reply",
     Type::Histogram,
     {"shard"},
     [](const ScrapeSources& s, FamilyOut& out) {
       for (const ShardStats* t : s.shards) out.Histogram({t->shard}, t->events->flush_seconds);
     }},
    {"rankd_events_flushes_failed_total",
     "Flushes of a shard's events that Redis did not acknowledge (their requests got an error)",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.events->flushes_failed.value(); }>},
    {"rankd_events_too_old_total",
     "Counts of an event a counters family skipped: the event older than its keep_s",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.events->too_old.value(); }>},
    {"rankd_open_connections",
     "Open client connections of a shard",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.http->connections_open.value(); }>},
    {"rankd_loop_lag_seconds",
     "How late the shard loop's periodic timer fired, last tick",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.loop_lag.value(); }>},
    {"rankd_loop_lag_distribution_seconds",
     "How late the shard loop's periodic timer fired",
     Type::Histogram,
     {"shard"},
     [](const ScrapeSources& s, FamilyOut& out) {
       for (const ShardStats* t : s.shards) out.Histogram({t->shard}, t->loop_lag_distribution);
     }},
    {"rankd_cpu_offloads_total",
     "CPU task runs by where they ran: inline on the loop or on the pool",
     Type::Counter,
     {"mode", "shard"},
     CpuOffloads},
    {"rankd_http_rejects_total",
     "Requests and connections refused before any handler ran, by reason",
     Type::Counter,
     {"reason", "shard"},
     HttpRejects},
    {"rankd_http_limit_hits_total",
     "Times the HTTP layer enforced a resource bound, by limit (docs/operations.md, HTTP limits)",
     Type::Counter,
     {"limit", "shard"},
     HttpLimitHits},
    {"rankd_http_buffered_input_bytes",
     "Request bytes a shard holds unparsed (--max-buffered-input-bytes)",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.http->buffered_input.value(); }>},
    {"rankd_http_input_allocated_bytes",
     "Heap bytes a shard's HTTP input buffers have allocated, used or not (unparsed input "
     "buffers, request heads and bodies being read)",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.http->input_allocated.value(); }>},
    {"rankd_http_unsent_bytes",
     "Response bytes a shard holds for clients that have not read them (--max-unsent-bytes)",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.http->unsent.value(); }>},
    {"rankd_http_deferred_reads_total",
     "Requests read after the loop turn used its budget, parsed in the next turn (the shard is "
     "saturated)",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) {
       return BothListeners(t, [](const http::HttpCounters& c) { return c.parked_reads.value(); });
     }>},
    {"rankd_late_completions_total",
     "Work that finished after its timeout race was lost (result discarded)",
     Type::Counter,
     {},
     [](const ScrapeSources&, FamilyOut& out) {
       out.Value({}, static_cast<double>(LateCompletions().load(std::memory_order_relaxed)));
     }},
    {"rankd_loop_timers",
     "Live one-shot timers in the shard loop's timer queue",
     Type::Gauge,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.timers->pending(); }>},
    {"rankd_cpu_queue_rejects_total",
     "CPU jobs refused because the shard's CPU queue held --cpu-queue-max jobs",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.offloads.queue_rejects.value(); }>},
    {"rankd_cpu_jobs_cancelled_total",
     "CPU jobs skipped or stopped early because their request no longer needed them (answered, "
     "or the node timed out)",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.cpu_cancelled.load(std::memory_order_relaxed); }>},
    {"rankd_access_log_dropped_total",
     "Access log lines dropped because the shard's log ring was full",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.access_log_dropped.value(); }>},
    {"rankd_served_log_records_total",
     "Served-log records by sink and outcome: written, dropped_full (the shard's buffer), "
     "dropped_error (the sink failed), dropped_no_sink, dropped_too_large",
     Type::Counter,
     {"outcome", "sink"},
     LogRecords<LogKind::kServed>},
    {"rankd_event_log_records_total",
     "Event-log records (one per event /events accepted, docs/events.md) by sink and outcome: "
     "written, dropped_full (the shard's buffer), dropped_error (the sink failed), "
     "dropped_no_sink (the schema's event_log names a sink rankd was not started with), "
     "dropped_too_large",
     Type::Counter,
     {"outcome", "sink"},
     LogRecords<LogKind::kEvents>},
    {"rankd_served_log_forced_ignored_total",
     "/rank requests whose \"log\": true was ignored because rankd runs without "
     "--allow-forced-logging",
     Type::Counter,
     {},
     ForcedLogsIgnored},
    {"rankd_page_snapshots_total",
     "First pages of /rank requests with page_size, by outcome: written (the snapshot is in "
     "Redis, a cursor went out), write_failed (answered without cursor), one_page (everything "
     "fit in the first page: nothing written), rate_limited (over --page-write-bytes-per-s: "
     "answered without cursor)",
     Type::Counter,
     {"outcome", "shard"},
     PageSnapshots},
    {"rankd_page_chains_ended_total",
     "Page chains ended by a newer first page of the same plan and user past "
     "--page-max-snapshots (their cursors then answer 410)",
     Type::Counter,
     {"shard"},
     PerShard<[](const ShardStats& t) { return t.page_chains_ended.value(); }>},
    {"rankd_page_requests_total",
     "Later pages (/rank requests with a cursor), by outcome: ok or the API error code",
     Type::Counter,
     {"outcome", "shard"},
     PageRequests},
    {"rankd_experiment_requests_total",
     "/rank requests an experiment applied to, by experiment and variant (control included)",
     Type::Counter,
     {"experiment", "variant"},
     SummedSeries<SeriesFamily::kExperimentRequests>},
    {"rankd_experiment_forced_ignored_total",
     "X-Rankd-Variant headers ignored because rankd runs without --allow-forced-variants",
     Type::Counter,
     {},
     ForcedIgnored},
    {"rankd_served_state_writes_total",
     "Writes of answers' items to their user's served-state zset (a plan's served_state), by "
     "outcome: ok (Redis acknowledged it), failed (an error, no connection, or no answer "
     "within 1 s), dropped (not sent: too many in flight on the shard)",
     Type::Counter,
     {"outcome", "plan"},
     SummedSeries<SeriesFamily::kServedStateWrites>},
    {"rankd_shadow_runs_total",
     "Shadow plan runs by experiment, plan and outcome: ok, failed, shed (not started: overload "
     "or --shadow-max-inflight), cancelled",
     Type::Counter,
     {"experiment", "outcome", "plan"},
     SummedSeries<SeriesFamily::kShadowRuns>},
    {"rankd_shadow_overlap_at_k",
     "|A_k n B_k| / min(k, |A|, |B|) of a shadow's answer B against the primary's A, k = "
     "compare_top",
     Type::Histogram,
     {"experiment", "plan"},
     SummedSeries<SeriesFamily::kShadowOverlap>},
    {"rankd_shadow_rank_correlation",
     "Kendall's tau-a of the order of the items both the primary and the shadow returned",
     Type::Histogram,
     {"experiment", "plan"},
     SummedSeries<SeriesFamily::kShadowCorrelation>},
    {"rankd_shadow_duration_seconds",
     "Shadow plan run time",
     Type::Histogram,
     {"experiment", "plan"},
     SummedSeries<SeriesFamily::kShadowDuration>},
    {"rankd_cache_hits_total",
     "Keys served from the shard's cache",
     Type::Counter,
     {"shard"},
     PerCache<[](const CacheStats& c) { return Read(c.hits); }>},
    {"rankd_cache_misses_total",
     "Keys of caching nodes asked of Redis",
     Type::Counter,
     {"shard"},
     PerCache<[](const CacheStats& c) { return Read(c.misses); }>},
    {"rankd_cache_evictions_total",
     "Cache entries dropped for the byte budget",
     Type::Counter,
     {"shard"},
     PerCache<[](const CacheStats& c) { return Read(c.evictions); }>},
    {"rankd_cache_invalidations_total",
     "Keys Redis invalidated, plus one per flush of the whole cache",
     Type::Counter,
     {"shard"},
     PerCache<[](const CacheStats& c) { return Read(c.invalidations); }>},
    {"rankd_cache_expirations_total",
     "Cache entries dropped past their TTL",
     Type::Counter,
     {"shard"},
     PerCache<[](const CacheStats& c) { return Read(c.expirations); }>},
    {"rankd_cache_entries",
     "Entries in the shard's cache",
     Type::Gauge,
     {"shard"},
     PerCache<[](const CacheStats& c) { return c.entries.load(std::memory_order_relaxed); }>},
    {"rankd_cache_bytes",
     "Bytes the shard's cache charges against its budget",
     Type::Gauge,
     {"shard"},
     PerCache<[](const CacheStats& c) { return c.bytes.load(std::memory_order_relaxed); }>},
    {"rankd_redis_commands_total",
     "Redis commands sent",
     Type::Counter,
     {"endpoint"},
     PerEndpoint<&RedisStats::commands>},
    {"rankd_redis_batches_total",
     "Pipelined Redis batches (one round trip each)",
     Type::Counter,
     {"endpoint"},
     PerEndpoint<&RedisStats::batches>},
    {"rankd_redis_batch_duration_seconds",
     "Time from sending a batch to its last reply",
     Type::Histogram,
     {"endpoint"},
     RedisBatchDuration},
    {"rankd_redis_errors_total",
     "Redis failures by kind",
     Type::Counter,
     {"endpoint", "kind"},
     RedisErrors},
    {"rankd_redis_batches_unsent_total",
     "Batches never written to Redis: their request's deadline had passed (also in errors' "
     "deadline)",
     Type::Counter,
     {"endpoint"},
     PerEndpoint<&RedisStats::expired_unsent>},
    {"rankd_redis_late_replies_total",
     "Replies that came after their deadline",
     Type::Counter,
     {"endpoint"},
     PerEndpoint<&RedisStats::late_replies>},
    {"rankd_redis_cluster_redirects_total",
     "Redis Cluster replies that sent a command elsewhere or again, by kind",
     Type::Counter,
     {"endpoint", "kind"},
     RedisClusterRedirects},
    {"rankd_redis_cluster_slot_map_refreshes_total",
     "Redis Cluster slot maps fetched and installed",
     Type::Counter,
     {"endpoint"},
     PerClusterEndpoint<&RedisStats::slot_map_refreshes>},
    {"rankd_redis_cluster_node_commands_total",
     "Redis commands sent to each cluster node",
     Type::Counter,
     {"endpoint", "node"},
     PerClusterNode<&NodeSums::commands>},
    {"rankd_redis_cluster_node_errors_total",
     "Failed batches and error replies (not redirects) of each cluster node",
     Type::Counter,
     {"endpoint", "node"},
     PerClusterNode<&NodeSums::errors>},
    {"rankd_redis_cluster_node_redirects_total",
     "Redirect and retry replies of each cluster node, by kind",
     Type::Counter,
     {"endpoint", "node", "kind"},
     ClusterNodeRedirects},
    {"rankd_redis_cluster_node_slot_map_refreshes_total",
     "Redis Cluster slot maps fetched from each node and installed",
     Type::Counter,
     {"endpoint", "node"},
     PerClusterNode<&NodeSums::refreshes>},
    {"rankd_redis_bad_values_total",
     "Values read from Redis that became null or were dropped, by family and kind",
     Type::Counter,
     {"family", "kind"},
     RedisBadValues},
    {"rankd_index_items",
     "Items in the index in use (schema.json indexes)",
     Type::Gauge,
     {"index"},
     PerIndex<&AnnIndexStats::items>},
    {"rankd_index_bytes",
     "Bytes the index in use holds (vectors, graph, id map; --index-max-bytes bounds their sum)",
     Type::Gauge,
     {"index"},
     PerIndex<&AnnIndexStats::bytes>},
    {"rankd_index_build_seconds",
     "Seconds the index's last build took (Redis reads and faiss), ok or not",
     Type::Gauge,
     {"index"},
     PerIndex<&AnnIndexStats::build_seconds>},
    {"rankd_index_builds_total",
     "Index builds by outcome: ok, loaded (from --index-dir), over_max_items, over_max_bytes, "
     "failed (the index built before stays)",
     Type::Counter,
     {"index", "outcome"},
     IndexBuilds},
    {"rankd_index_skipped_total",
     "Keys an index build skipped: a vector of the wrong length or not finite (bad_vector), an "
     "id that does not parse (bad_id)",
     Type::Counter,
     {"index", "kind"},
     IndexSkipped},
    {"rankd_redis_connections",
     "Redis connections by state",
     Type::Gauge,
     {"endpoint", "state"},
     RedisConnections},
    {"rankd_build_info",
     "Build of this rankd process (value 1)",
     Type::Gauge,
     {"version"},
     [](const ScrapeSources&, FamilyOut& out) { out.Value({RANKD_VERSION}, 1); }},
    {"process_resident_memory_bytes",
     "Resident memory size in bytes.",
     Type::Gauge,
     {},
     ProcessResidentMemory},
    {"process_cpu_seconds_total",
     "Total user and system CPU time spent in seconds.",
     Type::Counter,
     {},
     ProcessCpu},
    {"process_open_fds", "Number of open file descriptors.", Type::Gauge, {}, ProcessOpenFds},
};

}  // namespace

void WriteMetrics(const ScrapeSources& sources, std::string& out) {
  prometheus::MetricFamily family;
  for (const MetricRow& row : kMetricTable) {
    family.name = row.name;
    family.help = row.help;
    family.type = row.type;
    family.metric.clear();
    FamilyOut series(row.labels, family);
    row.read(sources, series);
    WriteFamily(family, out);
  }
}

}  // namespace rankd
