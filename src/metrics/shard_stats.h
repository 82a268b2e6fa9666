// ShardStats: what one shard counts for /metrics itself, and where the scrape finds what
// the shard's other layers count (its listeners, scheduler, timers, Redis pools, cache and
// served log keep their own counters). metrics/metric_table.cc reads it at scrape time;
// nothing is copied between the two.
//
// Threads: the shard's loop thread writes (CPU workers too, into the two std::atomic
// fields); any thread reads. The Server hands a shard's stats to scrapes once
// Shard::Start has returned: the pointers to the other layers' counters are set before
// that and never change, and the shard outlives every scrape (Server::Shutdown ends the
// scrapes before it stops the shards).
#pragma once

#include <array>
#include <atomic>
#include <bitset>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/errors.h"
#include "api/routes.h"
#include "core/metric_value.h"
#include "core/timer_queue.h"
#include "http/counters.h"
#include "metrics/metric_buckets.h"
#include "metrics/series_set.h"
#include "sched/scheduler.h"

namespace rankd {

struct AdmissionStats;
struct EventWriteStats;
struct CacheStats;
struct RedisStats;
class ShardServedLog;

// What became of a first page's snapshot (rankd_page_snapshots_total).
enum class SnapshotOutcome : uint8_t { kWritten, kWriteFailed, kOnePage, kRateLimited, kCount };
std::string_view SnapshotOutcomeName(SnapshotOutcome o);  // "written", ...

struct ShardStats {
  // enabled: false with --no-metrics (the request path counts nothing). tokens: rankd
  // runs with --auth-token-file (the routes that need a token may answer 401).
  ShardStats(int shard, bool enabled, bool tokens);

  // An answer, in rankd_http_requests_total and rankd_http_request_duration_seconds.
  void CountHttp(Route route, std::string_view method, int status, double seconds);

  const std::string shard;  // the value of the `shard` label
  const bool enabled;

  // rankd_http_requests_total by (route, method, status): every answer a route lists is
  // shown from start at 0; any other (a bug's status) once it has been given.
  static constexpr size_t kMethods = 4;                           // GET, POST, HEAD, other
  static constexpr size_t kStatuses = kCountedStatuses.size + 1;  // + "other"
  static constexpr size_t kHttpAnswers = static_cast<size_t>(Route::kCount) * kMethods * kStatuses;
  struct HttpAnswer {
    std::string_view route, method;
    std::string code;
  };
  static HttpAnswer HttpAnswerOf(size_t i);  // the labels of http_requests[i]
  std::array<MetricValue<uint64_t>, kHttpAnswers> http_requests{};
  std::bitset<kHttpAnswers> http_listed;       // shown at 0 (constant after construction)
  std::vector<MetricHistogram> http_duration;  // by Route

  MetricValue<double> loop_lag;  // seconds, the last tick's
  MetricHistogram loop_lag_distribution{kLagBuckets};
  CpuOffloadCounts offloads;               // counted by the scheduler
  std::atomic<uint64_t> cpu_cancelled{0};  // ExecEnv::cpu_cancelled (CPU workers count)
  // Requests admitted and not yet finished with, counted until their last piece of work
  // (a CPU job still queued or running after the answer) has let go (RunPlan's hold).
  std::atomic<size_t> live_requests{0};
  MetricValue<uint64_t> access_log_dropped;
  MetricValue<uint64_t> scrapes_refused;  // 503 for --max-queued-scrapes
  // Cross-site refusals at routing (rankd_http_rejects_total, with the HTTP layer's).
  MetricValue<uint64_t> forbidden_origins;  // 403 forbidden_origin
  MetricValue<uint64_t> misdirected;        // 421 misdirected_request
  std::array<MetricValue<uint64_t>, static_cast<size_t>(SnapshotOutcome::kCount)> page_snapshots{};
  // Chains ended by a newer one of their (plan, user) past --page-max-snapshots.
  MetricValue<uint64_t> page_chains_ended;
  // Later pages by outcome: 0 = "ok", 1 + ErrorCode = that error's code name.
  std::array<MetricValue<uint64_t>, 1 + kErrorCodeCount> page_requests{};
  MetricValue<uint64_t> forced_variants_ignored;
  // Admission (rank/admission.h): its limit and refusals, and the server-side time from a
  // request read to its refusal queued.
  const AdmissionStats* admission = nullptr;
  // POST /events' writes (events/shard_events.h).
  const EventWriteStats* events = nullptr;
  MetricHistogram admission_refusal_seconds{
      kRefusalBuckets};  // X-Rankd-Variant without --allow-forced-variants
  SeriesSet series;      // of plans and experiments (rank/plan_metrics.h)

  // The other layers' counters, set on the loop thread while the shard starts.
  const http::HttpCounters* http = nullptr;          // the client listener's
  const http::HttpCounters* metrics_http = nullptr;  // --metrics-port's (shard 0), or null
  const TimerQueue* timers = nullptr;
  std::vector<std::pair<std::string, std::shared_ptr<const RedisStats>>> redis;  // by endpoint
  std::shared_ptr<const CacheStats> cache;  // null without --cache-mb
  const ShardServedLog* served_log = nullptr;
};

}  // namespace rankd
