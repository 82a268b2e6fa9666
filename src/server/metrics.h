// Metrics: rankd's Prometheus families (prometheus-cpp core) and the per-shard, per-plan
// children the request path uses. Children are looked up when a shard starts or installs
// a plan snapshot — never per request — and every child that can be touched on a
// request path carries the shard's label, so no two shards share a histogram's mutex.
//
// Threads: Metrics is built on the main thread before the shards start; Family::Add
// (inside ShardMetrics / PlanMetrics construction) is thread-safe; a ShardMetrics and
// its PlanMetrics are then used only on their shard's loop thread. Serialize may run
// on any thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "http/counters.h"
#include "plan/plan.h"

namespace rankd {

// Route templates: bounded label values (never raw paths).
enum class Route : uint8_t { kRank, kHealthz, kReadyz, kMetrics, kPlans, kPlan, kOther, kCount };
std::string_view RouteName(Route r);

class Metrics {
 public:
  explicit Metrics(bool enabled);

  bool enabled() const { return enabled_; }
  prometheus::Registry& registry() { return *registry_; }

  // The text exposition (format 0.0.4) of every family plus the extra collectors.
  std::string Serialize() const;
  // Families computed at scrape time (process, Redis, HTTP layer counters).
  using Collector = std::function<void(std::vector<prometheus::MetricFamily>&)>;
  void AddCollector(Collector c) { collectors_.push_back(std::move(c)); }

  prometheus::Family<prometheus::Counter>* http_requests;
  prometheus::Family<prometheus::Histogram>* http_duration;
  prometheus::Family<prometheus::Counter>* rank_requests;
  prometheus::Family<prometheus::Histogram>* rank_duration;
  prometheus::Family<prometheus::Histogram>* node_duration;
  prometheus::Family<prometheus::Counter>* node_outcomes;
  prometheus::Family<prometheus::Counter>* deadline_exceeded;
  prometheus::Family<prometheus::Counter>* degraded;
  prometheus::Family<prometheus::Counter>* plan_reloads;
  prometheus::Family<prometheus::Gauge>* inflight;
  prometheus::Family<prometheus::Gauge>* open_connections;
  prometheus::Family<prometheus::Gauge>* loop_lag;
  prometheus::Family<prometheus::Histogram>* loop_lag_hist;
  prometheus::Family<prometheus::Counter>* cpu_offloads;
  prometheus::Family<prometheus::Counter>* http_rejects;
  prometheus::Family<prometheus::Counter>* http_deferred_reads;
  prometheus::Family<prometheus::Counter>* http_limit_hits;
  prometheus::Family<prometheus::Gauge>* http_buffered_input;
  prometheus::Family<prometheus::Gauge>* http_unsent;
  prometheus::Family<prometheus::Gauge>* build_info;

 private:
  bool enabled_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<Collector> collectors_;
  mutable std::atomic<size_t> last_size_{0};  // sizing hint for the next scrape
};

// One plan's children on one shard.
struct PlanMetrics {
  // By outcome: 0 = "ok", 1 + ErrorCode = that error's code name.
  std::array<prometheus::Counter*, 1 + static_cast<size_t>(ErrorCode::kInternal) + 1> outcomes{};
  prometheus::Histogram* duration = nullptr;
  prometheus::Counter* deadline_exceeded = nullptr;
  // By node index.
  std::vector<prometheus::Histogram*> node_duration;
  std::vector<std::array<prometheus::Counter*, 4>> node_outcomes;  // by NodeStatus
  std::vector<prometheus::Counter*> node_degraded;
};

class ShardMetrics {
 public:
  ShardMetrics(Metrics& m, int shard);

  bool enabled() const { return enabled_; }
  void CountHttp(Route route, std::string_view method, int status, double seconds);
  // The children of `plan`, created on first use after a snapshot install (call
  // PreparePlans on install so the request path only finds them).
  PlanMetrics* ForPlan(const Plan& plan);
  void PreparePlans(const std::vector<PlanPtr>& plans);

  prometheus::Gauge* inflight;
  prometheus::Gauge* open_connections;
  prometheus::Gauge* loop_lag;
  prometheus::Histogram* loop_lag_hist;
  prometheus::Counter* offload_inline;
  prometheus::Counter* offload_pool;
  std::array<prometheus::Counter*, static_cast<size_t>(http::RejectKind::kCount)> http_rejects{};
  prometheus::Counter* http_deferred_reads;
  // By http::LimitKind, then one more: "scrape_queue" (/metrics refused, 503).
  std::array<prometheus::Counter*, static_cast<size_t>(http::LimitKind::kCount) + 1> http_limits{};
  prometheus::Gauge* http_buffered_input;
  prometheus::Gauge* http_unsent;

 private:
  Metrics& m_;
  std::string shard_;
  bool enabled_;
  prometheus::Counter& HttpChild(Route route, size_t method, int status);

  // http_requests children by (route, method, status), in a flat table: the answers a
  // route can give are created at start (ReachableAnswers in metrics.cc).
  static constexpr size_t kMethods = 4;  // GET, POST, HEAD, other
  static constexpr size_t kStatuses = 13;
  std::array<prometheus::Counter*, static_cast<size_t>(Route::kCount) * kMethods * kStatuses>
      http_requests_{};
  std::array<prometheus::Histogram*, static_cast<size_t>(Route::kCount)> http_duration_{};
  // Keyed by plan identity: a reloaded plan gets fresh children lookups (same labels
  // map to the same children, so counts continue).
  std::unordered_map<const Plan*, std::unique_ptr<PlanMetrics>> plans_;
};

}  // namespace rankd
