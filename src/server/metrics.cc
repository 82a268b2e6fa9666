#include "server/metrics.h"

#include <algorithm>
#include <type_traits>

#include "sched/scheduler.h"
#include "server/exposition.h"

namespace rankd {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Request latencies: 100 µs .. 10 s.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
// Node latencies start lower: many nodes take microseconds.
const prometheus::Histogram::BucketBoundaries kNodeBuckets = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
    0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   1.0};
// Loop lag: 50 µs .. 1 s.
const prometheus::Histogram::BucketBoundaries kLagBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0};

// Overlap at k: 0 .. 1 in tenths; rank correlation: -1 .. 1 in fifths.
const prometheus::Histogram::BucketBoundaries kOverlapBuckets = {0.1, 0.2, 0.3, 0.4, 0.5,
                                                                 0.6, 0.7, 0.8, 0.9, 1.0};
const prometheus::Histogram::BucketBoundaries kCorrelationBuckets = {-0.8, -0.6, -0.4, -0.2, 0.0,
                                                                     0.2,  0.4,  0.6,  0.8,  1.0};

size_t StatusIndex(int status) {
  for (size_t i = 0; i < kCountedStatuses.size; ++i)
    if (kCountedStatuses.values[i] == status) return i;
  return kCountedStatuses.size;  // "other"
}

size_t MethodIndex(std::string_view m) {
  if (m == "GET") return 0;
  if (m == "POST") return 1;
  if (m == "HEAD") return 2;
  return 3;
}

constexpr std::array<std::string_view, 4> kMethodNames = {"GET", "POST", "HEAD", "other"};

}  // namespace

std::string_view SnapshotOutcomeName(SnapshotOutcome o) {
  switch (o) {
    case SnapshotOutcome::kWritten: return "written";
    case SnapshotOutcome::kWriteFailed: return "write_failed";
    case SnapshotOutcome::kOnePage: return "one_page";
    case SnapshotOutcome::kCount: break;
  }
  return "unknown";
}

Metrics::Metrics(bool enabled)
    : enabled_(enabled), registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  http_requests = &BuildCounter()
                       .Name("rankd_http_requests_total")
                       .Help("HTTP requests answered, by route template, method and status code")
                       .Register(r);
  http_duration = &BuildHistogram()
                       .Name("rankd_http_request_duration_seconds")
                       .Help("Time from a request fully read to its response queued, by route")
                       .Register(r);
  rank_requests = &BuildCounter()
                       .Name("rankd_rank_requests_total")
                       .Help("POST /rank requests of a loaded plan, by outcome (ok or error code)")
                       .Register(r);
  rank_duration = &BuildHistogram()
                       .Name("rankd_rank_duration_seconds")
                       .Help("Time to run a plan, from request read to response ready")
                       .Register(r);
  node_duration = &BuildHistogram()
                       .Name("rankd_node_duration_seconds")
                       .Help("Time a plan node ran, by plan, node and op")
                       .Register(r);
  node_outcomes = &BuildCounter()
                       .Name("rankd_node_outcomes_total")
                       .Help("Plan node runs by status (ok, failed, timeout, skipped)")
                       .Register(r);
  model_rows = &BuildCounter()
                    .Name("rankd_model_rows_total")
                    .Help("Rows scored by `model` nodes, by model")
                    .Register(r);
  model_eval = &BuildHistogram()
                    .Name("rankd_model_eval_seconds")
                    .Help("Time a `model` node took to score its rows, by model")
                    .Register(r);
  deadline_exceeded =
      &BuildCounter()
           .Name("rankd_deadline_exceeded_total")
           .Help("Requests that ran past their deadline or a required node's timeout")
           .Register(r);
  degraded = &BuildCounter()
                  .Name("rankd_degraded_total")
                  .Help("Optional nodes that failed or timed out (the request went on)")
                  .Register(r);
  plan_reloads = &BuildCounter()
                      .Name("rankd_plan_reloads_total")
                      .Help("Plan set loads at start and on SIGHUP, by result")
                      .Register(r);
  inflight = &BuildGauge()
                  .Name("rankd_inflight_requests")
                  .Help("Requests being run by a shard")
                  .Register(r);
  open_connections = &BuildGauge()
                          .Name("rankd_open_connections")
                          .Help("Open client connections of a shard")
                          .Register(r);
  loop_lag = &BuildGauge()
                  .Name("rankd_loop_lag_seconds")
                  .Help("How late the shard loop's periodic timer fired, last tick")
                  .Register(r);
  loop_lag_hist = &BuildHistogram()
                       .Name("rankd_loop_lag_distribution_seconds")
                       .Help("How late the shard loop's periodic timer fired")
                       .Register(r);
  cpu_offloads = &BuildCounter()
                      .Name("rankd_cpu_offloads_total")
                      .Help("CPU task runs by where they ran: inline on the loop or on the pool")
                      .Register(r);
  http_rejects = &BuildCounter()
                      .Name("rankd_http_rejects_total")
                      .Help("Requests the HTTP layer refused before any route, by reason")
                      .Register(r);
  http_deferred_reads = &BuildCounter()
                             .Name("rankd_http_deferred_reads_total")
                             .Help(
                                 "Requests read after the loop turn used its budget, "
                                 "parsed in the next turn (the shard is saturated)")
                             .Register(r);
  http_limit_hits = &BuildCounter()
                         .Name("rankd_http_limit_hits_total")
                         .Help(
                             "Times the HTTP layer enforced a resource bound, by limit "
                             "(docs/operations.md, HTTP limits)")
                         .Register(r);
  http_buffered_input =
      &BuildGauge()
           .Name("rankd_http_buffered_input_bytes")
           .Help("Request bytes a shard holds unparsed (--max-buffered-input-bytes)")
           .Register(r);
  http_unsent = &BuildGauge()
                     .Name("rankd_http_unsent_bytes")
                     .Help(
                         "Response bytes a shard holds for clients that have not read them "
                         "(--max-unsent-bytes)")
                     .Register(r);
  build_info = &BuildGauge()
                    .Name("rankd_build_info")
                    .Help("Build of this rankd process (value 1)")
                    .Register(r);
  loop_timers =
      &BuildGauge()
           .Name("rankd_loop_timers")
           .Help("Live one-shot timers in the shard loop's timer queue, sampled every 100 ms")
           .Register(r);
  cpu_queue_rejects =
      &BuildCounter()
           .Name("rankd_cpu_queue_rejects_total")
           .Help("CPU jobs refused because the shard's CPU queue held --cpu-queue-max jobs")
           .Register(r);
  cpu_cancelled = &BuildCounter()
                       .Name("rankd_cpu_jobs_cancelled_total")
                       .Help(
                           "CPU jobs skipped or stopped early because their request no longer "
                           "needed them (answered, or the node timed out)")
                       .Register(r);
  access_log_dropped = &BuildCounter()
                            .Name("rankd_access_log_dropped_total")
                            .Help("Access log lines dropped because the shard's log ring was full")
                            .Register(r);
  served_log_records =
      &BuildCounter()
           .Name("rankd_served_log_records_total")
           .Help(
               "Served-log records by sink and outcome: written, dropped_full (the shard's "
               "buffer), dropped_error (the sink failed), dropped_no_sink, dropped_too_large")
           .Register(r);
  page_snapshots =
      &BuildCounter()
           .Name("rankd_page_snapshots_total")
           .Help(
               "First pages of /rank requests with page_size, by outcome: written (the "
               "snapshot is in Redis, a cursor went out), write_failed (answered without "
               "cursor), one_page (everything fit in the first page: nothing written)")
           .Register(r);
  page_requests = &BuildCounter()
                       .Name("rankd_page_requests_total")
                       .Help(
                           "Later pages (/rank requests with a cursor), by outcome: ok or the "
                           "API error code")
                       .Register(r);
  experiment_requests =
      &BuildCounter()
           .Name("rankd_experiment_requests_total")
           .Help(
               "/rank requests an experiment applied to, by experiment and variant (control "
               "included)")
           .Register(r);
  experiment_forced_ignored = &BuildCounter()
                                   .Name("rankd_experiment_forced_ignored_total")
                                   .Help(
                                       "X-Rankd-Variant headers ignored because rankd runs without "
                                       "--allow-forced-variants")
                                   .Register(r);
  shadow_runs = &BuildCounter()
                     .Name("rankd_shadow_runs_total")
                     .Help(
                         "Shadow plan runs by experiment, plan and outcome: ok, failed, shed "
                         "(not started: overload or --shadow-max-inflight), cancelled")
                     .Register(r);
  shadow_overlap = &BuildHistogram()
                        .Name("rankd_shadow_overlap_at_k")
                        .Help(
                            "|A_k n B_k| / min(k, |A|, |B|) of a shadow's answer B against the "
                            "primary's A, k = compare_top")
                        .Register(r);
  shadow_correlation = &BuildHistogram()
                            .Name("rankd_shadow_rank_correlation")
                            .Help(
                                "Kendall's tau-a of the order of the items both the primary "
                                "and the shadow returned")
                            .Register(r);
  shadow_duration = &BuildHistogram()
                         .Name("rankd_shadow_duration_seconds")
                         .Help("Shadow plan run time")
                         .Register(r);
  build_info->Add({{"version", RANKD_VERSION}}).Set(1);
  plan_reloads->Add({{"result", "ok"}});
  plan_reloads->Add({{"result", "error"}});
}

std::string Metrics::Serialize() const {
  auto families = registry_->Collect();
  for (const auto& c : collectors_) c(families);
  std::string out;
  out.reserve(last_size_ + last_size_ / 8);
  WriteExposition(families, out);
  last_size_ = out.size();
  return out;
}

ShardMetrics::ShardMetrics(Metrics& m, int shard, bool tokens)
    : m_(m), shard_(std::to_string(shard)), enabled_(m.enabled()) {
  inflight = &m.inflight->Add({{"shard", shard_}});
  open_connections = &m.open_connections->Add({{"shard", shard_}});
  loop_lag = &m.loop_lag->Add({{"shard", shard_}});
  loop_lag_hist = &m.loop_lag_hist->Add({{"shard", shard_}}, kLagBuckets);
  offload_inline = &m.cpu_offloads->Add({{"shard", shard_}, {"mode", "inline"}});
  offload_pool = &m.cpu_offloads->Add({{"shard", shard_}, {"mode", "pool"}});
  for (size_t k = 0; k < http_rejects.size(); ++k)
    http_rejects[k] = &m.http_rejects->Add(
        {{"shard", shard_},
         {"reason", std::string(http::RejectKindName(static_cast<http::RejectKind>(k)))}});
  http_deferred_reads = &m.http_deferred_reads->Add({{"shard", shard_}});
  for (size_t k = 0; k < http_limits.size(); ++k) {
    std::string name = k < static_cast<size_t>(http::LimitKind::kCount)
                           ? std::string(http::LimitKindName(static_cast<http::LimitKind>(k)))
                           : std::string("scrape_queue");
    http_limits[k] = &m.http_limit_hits->Add({{"shard", shard_}, {"limit", name}});
  }
  http_buffered_input = &m.http_buffered_input->Add({{"shard", shard_}});
  http_unsent = &m.http_unsent->Add({{"shard", shard_}});
  loop_timers = &m.loop_timers->Add({{"shard", shard_}});
  cpu_queue_rejects = &m.cpu_queue_rejects->Add({{"shard", shard_}});
  cpu_cancelled = &m.cpu_cancelled->Add({{"shard", shard_}});
  access_log_dropped = &m.access_log_dropped->Add({{"shard", shard_}});
  for (size_t k = 0; k < page_snapshots.size(); ++k)
    page_snapshots[k] = &m.page_snapshots->Add(
        {{"shard", shard_},
         {"outcome", std::string(SnapshotOutcomeName(static_cast<SnapshotOutcome>(k)))}});
  for (size_t k = 0; k < page_requests.size(); ++k)
    page_requests[k] = &m.page_requests->Add(
        {{"shard", shard_},
         {"outcome",
          k == 0 ? std::string("ok") : std::string(ErrorCodeName(static_cast<ErrorCode>(k - 1)))}});
  // Every answer a route can give, so that they show as 0 until used and the request
  // path never looks a label set up. The HTTP layer's own refusals are not here: they
  // count in rankd_http_rejects_total.
  const int unauthorized = ErrorStatus(ErrorCode::kUnauthorized);
  for (size_t m = 0; m < kMethods; ++m) {
    for (size_t r = 0; tokens && r < static_cast<size_t>(Route::kCount); ++r)
      if (NeedsToken(static_cast<Route>(r))) HttpChild(static_cast<Route>(r), m, unauthorized);
    for (const auto& route : kRoutes) {
      if (!AcceptsMethod(route, kMethodNames[m])) {
        HttpChild(route.route, m, ErrorStatus(ErrorCode::kMethodNotAllowed));
        continue;
      }
      for (int status : route.statuses)
        if (status != 0) HttpChild(route.route, m, status);
    }
    HttpChild(Route::kOther, m, ErrorStatus(ErrorCode::kNotFound));
  }
  for (size_t i = 0; i < http_duration_.size(); ++i)
    http_duration_[i] = &m.http_duration->Add(
        {{"route", std::string(RouteName(static_cast<Route>(i)))}, {"shard", shard_}},
        kLatencyBuckets);
}

prometheus::Counter& ShardMetrics::HttpChild(Route route, size_t method, int status) {
  size_t s = StatusIndex(status);
  auto*& c = http_requests_[(static_cast<size_t>(route) * kMethods + method) * kStatuses + s];
  if (!c) {
    c = &m_.http_requests->Add(
        {{"route", std::string(RouteName(route))},
         {"method", std::string(kMethodNames[method])},
         {"code", s < kCountedStatuses.size ? std::to_string(status) : std::string("other")},
         {"shard", shard_}});
  }
  return *c;
}

void ShardMetrics::CountHttp(Route route, std::string_view method, int status, double seconds) {
  if (!enabled_) return;
  // Created at start for every answer a route lists; anything else (a bug's
  // status) is created here once and cached, rather than lost.
  HttpChild(route, MethodIndex(method), status).Increment();
  http_duration_[static_cast<size_t>(route)]->Observe(seconds);
}

void ShardMetrics::PreparePlans(const std::vector<PlanPtr>& plans) {
  // The new snapshot's children first, so that a label set both snapshots use is never
  // released in between (its count would drop to zero and the series reset).
  std::unordered_map<const Plan*, PlanMetricsPtr> next;
  for (const auto& p : plans) next.emplace(p.get(), MakePlanMetrics(*p));
  plans_.swap(next);
}

PlanMetricsPtr ShardMetrics::ForPlan(const Plan& plan) const {
  auto it = plans_.find(&plan);
  return it == plans_.end() ? nullptr : it->second;
}

template <class T>
T* ShardMetrics::Retain(prometheus::Family<T>& family, const prometheus::Labels& labels,
                        const std::vector<double>* buckets) {
  T* child;
  if constexpr (std::is_same_v<T, prometheus::Histogram>)
    child = &family.Add(labels, *buckets);
  else
    child = &family.Add(labels);
  Retained& r = retained_[child];
  if (r.refs++ == 0) r.remove = [&family, child] { family.Remove(child); };
  return child;
}

void ShardMetrics::Release(const void* child) {
  auto it = retained_.find(child);
  if (it == retained_.end()) return;
  if (--it->second.refs == 0) {
    it->second.remove();
    retained_.erase(it);
  }
}

PlanMetrics::~PlanMetrics() {
  for (auto* c : outcomes) owner.Release(c);
  owner.Release(duration);
  owner.Release(deadline_exceeded);
  for (auto* h : node_duration) owner.Release(h);
  for (const auto& st : node_outcomes)
    for (auto* c : st) owner.Release(c);
  for (auto* c : node_degraded)
    if (c) owner.Release(c);
  for (auto* c : model_rows)
    if (c) owner.Release(c);
  for (auto* h : model_eval)
    if (h) owner.Release(h);
}

PlanMetricsPtr ShardMetrics::MakePlanMetrics(const Plan& plan) {
  auto pm = std::make_shared<PlanMetrics>(*this);
  const std::string& name = plan.name;
  pm->outcomes[0] =
      Retain(*m_.rank_requests, {{"plan", name}, {"outcome", "ok"}, {"shard", shard_}});
  for (const auto& e : kApiErrors)
    pm->outcomes[1 + static_cast<size_t>(e.code)] = Retain(
        *m_.rank_requests, {{"plan", name}, {"outcome", std::string(e.name)}, {"shard", shard_}});
  pm->duration = Retain(*m_.rank_duration, {{"plan", name}, {"shard", shard_}}, &kLatencyBuckets);
  pm->deadline_exceeded = Retain(*m_.deadline_exceeded, {{"plan", name}, {"shard", shard_}});
  for (const auto& n : plan.nodes) {
    pm->node_duration.push_back(
        Retain(*m_.node_duration, {{"plan", name}, {"node", n.id}, {"op", n.op}, {"shard", shard_}},
               &kNodeBuckets));
    std::array<prometheus::Counter*, 4> st{};
    for (int s = 0; s < 4; ++s)
      st[s] = Retain(*m_.node_outcomes,
                     {{"plan", name},
                      {"node", n.id},
                      {"status", std::string(NodeStatusName(static_cast<NodeStatus>(s)))},
                      {"shard", shard_}});
    pm->node_outcomes.push_back(st);
    pm->node_degraded.push_back(
        n.optional ? Retain(*m_.degraded, {{"plan", name}, {"node", n.id}, {"shard", shard_}})
                   : nullptr);
    const ModelPtr& model = n.model.model;
    pm->model_rows.push_back(
        model ? Retain(*m_.model_rows, {{"model", model->name()}, {"shard", shard_}}) : nullptr);
    pm->model_eval.push_back(
        model ? Retain(*m_.model_eval, {{"model", model->name()}, {"shard", shard_}}, &kNodeBuckets)
              : nullptr);
  }
  return pm;
}

ExperimentChildren MakeExperimentChildren(Metrics& m, const ExperimentSet& set) {
  static constexpr std::string_view kOutcomes[] = {"ok", "failed", "shed", "cancelled"};
  ExperimentChildren c;
  c.forced_ignored = &m.experiment_forced_ignored->Add({});
  for (const Experiment& e : set.experiments) {
    auto& req = c.requests.emplace_back();
    req.push_back(&m.experiment_requests->Add(
        {{"experiment", e.name}, {"variant", std::string(kControlVariant)}}));
    for (const auto& v : e.variants)
      req.push_back(&m.experiment_requests->Add({{"experiment", e.name}, {"variant", v.name}}));
    auto& shadows = c.shadows.emplace_back();
    for (const auto& sh : e.shadows) {
      prometheus::Labels labels{{"experiment", e.name}, {"plan", sh.plan->name}};
      ExperimentChildren::Shadow& out = shadows.emplace_back();
      for (size_t o = 0; o < out.runs.size(); ++o) {
        prometheus::Labels l = labels;
        l.emplace("outcome", std::string(kOutcomes[o]));
        out.runs[o] = &m.shadow_runs->Add(l);
      }
      out.overlap = &m.shadow_overlap->Add(labels, kOverlapBuckets);
      out.correlation = &m.shadow_correlation->Add(labels, kCorrelationBuckets);
      out.duration = &m.shadow_duration->Add(labels, kLatencyBuckets);
    }
  }
  return c;
}

}  // namespace rankd
