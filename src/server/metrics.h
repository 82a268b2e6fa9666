// Metrics: rankd's Prometheus families (prometheus-cpp core) and the per-shard, per-plan
// children the request path uses. Children are looked up when a shard starts or installs
// a plan snapshot — never per request — and every child that can be touched on a
// request path carries the shard's label, so no two shards share a histogram's mutex.
//
// Threads: Metrics is built on the main thread before the shards start; Family::Add
// and Family::Remove are thread-safe; a ShardMetrics and its PlanMetrics are then used,
// and a PlanMetrics released, only on their shard's loop thread. Serialize may run on
// any thread.
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

#include "api/routes.h"
#include "core/error.h"
#include "http/counters.h"
#include "plan/experiments.h"
#include "plan/plan.h"

namespace rankd {

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
  prometheus::Family<prometheus::Counter>* model_rows;
  prometheus::Family<prometheus::Histogram>* model_eval;
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
  prometheus::Family<prometheus::Gauge>* loop_timers;
  prometheus::Family<prometheus::Counter>* cpu_queue_rejects;
  prometheus::Family<prometheus::Counter>* cpu_cancelled;
  prometheus::Family<prometheus::Counter>* access_log_dropped;
  prometheus::Family<prometheus::Counter>* served_log_records;  // {sink, outcome}
  // Pages (docs/api.md, "Pages").
  prometheus::Family<prometheus::Counter>* page_snapshots;  // {shard, outcome}
  prometheus::Family<prometheus::Counter>* page_requests;   // {shard, outcome}
  // Experiments (docs/experiments.md).
  prometheus::Family<prometheus::Counter>* experiment_requests;        // {experiment, variant}
  prometheus::Family<prometheus::Counter>* experiment_forced_ignored;  // no labels
  prometheus::Family<prometheus::Counter>* shadow_runs;           // {experiment, plan, outcome}
  prometheus::Family<prometheus::Histogram>* shadow_overlap;      // {experiment, plan}
  prometheus::Family<prometheus::Histogram>* shadow_correlation;  // {experiment, plan}
  prometheus::Family<prometheus::Histogram>* shadow_duration;     // {experiment, plan}

 private:
  bool enabled_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<Collector> collectors_;
  mutable std::atomic<size_t> last_size_{0};  // sizing hint for the next scrape
};

// The children of an experiment set (plan/experiments.h), looked up when a shard
// installs a snapshot, never per request. Series of experiments a reload removed stay
// (counters are not reset).
enum class ShadowOutcome : uint8_t { kOk, kFailed, kShed, kCancelled, kCount };
struct ExperimentChildren {
  // requests[experiment][0] is control, [1 + v] variant v.
  std::vector<std::vector<prometheus::Counter*>> requests;
  struct Shadow {
    std::array<prometheus::Counter*, static_cast<size_t>(ShadowOutcome::kCount)> runs{};
    prometheus::Histogram* overlap = nullptr;
    prometheus::Histogram* correlation = nullptr;
    prometheus::Histogram* duration = nullptr;
  };
  std::vector<std::vector<Shadow>> shadows;  // [experiment][shadow]
  prometheus::Counter* forced_ignored = nullptr;
};
ExperimentChildren MakeExperimentChildren(Metrics& m, const ExperimentSet& set);

// What became of a first page's snapshot (rankd_page_snapshots_total).
enum class SnapshotOutcome : uint8_t { kWritten, kWriteFailed, kOnePage, kCount };
std::string_view SnapshotOutcomeName(SnapshotOutcome o);  // "written", ...

class ShardMetrics;

// One plan snapshot's children on one shard. Shared: the shard's current plan set holds
// one per plan, and every request of that plan holds its own until it has answered, so
// a reload never frees children a request is about to touch. Children are shared by
// label set with other snapshots (a plan name that survives a reload keeps counting);
// the destructor removes from the registry the children no other snapshot uses any
// more (a removed plan's series go). REQUIRES: destroyed on the shard's loop thread.
struct PlanMetrics {
  explicit PlanMetrics(ShardMetrics& owner) : owner(owner) {}
  ~PlanMetrics();
  PlanMetrics(const PlanMetrics&) = delete;
  PlanMetrics& operator=(const PlanMetrics&) = delete;

  ShardMetrics& owner;
  // By outcome: 0 = "ok", 1 + ErrorCode = that error's code name.
  std::array<prometheus::Counter*, 1 + kErrorCodeCount> outcomes{};
  prometheus::Histogram* duration = nullptr;
  prometheus::Counter* deadline_exceeded = nullptr;
  // By node index.
  std::vector<prometheus::Histogram*> node_duration;
  std::vector<std::array<prometheus::Counter*, 4>> node_outcomes;  // by NodeStatus
  std::vector<prometheus::Counter*> node_degraded;
  // `model` nodes: rows scored and the node's run time, by model (null for other nodes).
  // Shared with every plan node of any snapshot that uses a model of that name.
  std::vector<prometheus::Counter*> model_rows;
  std::vector<prometheus::Histogram*> model_eval;
};
using PlanMetricsPtr = std::shared_ptr<PlanMetrics>;

class ShardMetrics {
 public:
  // tokens: rankd runs with --auth-token-file (the routes that need a token may answer 401).
  ShardMetrics(Metrics& m, int shard, bool tokens);

  bool enabled() const { return enabled_; }
  void CountHttp(Route route, std::string_view method, int status, double seconds);
  // The children of a plan of the installed snapshot (null if it is not in it).
  PlanMetricsPtr ForPlan(const Plan& plan) const;
  // Creates the children of a new snapshot, then lets go of the previous snapshot's:
  // children of a surviving label set live on, the others are removed once the last
  // request holding them has answered.
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
  prometheus::Gauge* loop_timers;
  prometheus::Counter* cpu_queue_rejects;
  prometheus::Counter* cpu_cancelled;
  prometheus::Counter* access_log_dropped;
  std::array<prometheus::Counter*, static_cast<size_t>(SnapshotOutcome::kCount)> page_snapshots{};
  // Later pages by outcome: 0 = "ok", 1 + ErrorCode = that error's code name.
  std::array<prometheus::Counter*, 1 + kErrorCodeCount> page_requests{};

 private:
  friend struct PlanMetrics;
  // Label sets shared by PlanMetrics of several snapshots are counted here (children
  // are identified by address: Family::Add returns the same child for the same labels).
  template <class T>
  T* Retain(prometheus::Family<T>& family, const prometheus::Labels& labels,
            const std::vector<double>* buckets = nullptr);
  void Release(const void* child);
  PlanMetricsPtr MakePlanMetrics(const Plan& plan);
  struct Retained {
    size_t refs = 0;
    std::function<void()> remove;  // Family::Remove of this child
  };
  std::unordered_map<const void*, Retained> retained_;

  Metrics& m_;
  std::string shard_;
  bool enabled_;
  prometheus::Counter& HttpChild(Route route, size_t method, int status);

  // http_requests children by (route, method, status), in a flat table: the answers a
  // route can give are created at start (from kRoutes, api/routes.h).
  static constexpr size_t kMethods = 4;                           // GET, POST, HEAD, other
  static constexpr size_t kStatuses = kCountedStatuses.size + 1;  // + "other"
  std::array<prometheus::Counter*, static_cast<size_t>(Route::kCount) * kMethods * kStatuses>
      http_requests_{};
  std::array<prometheus::Histogram*, static_cast<size_t>(Route::kCount)> http_duration_{};
  // The installed snapshot's plans (by identity). Declared after retained_: destroyed
  // first, while the counts they release still exist.
  std::unordered_map<const Plan*, PlanMetricsPtr> plans_;
};

}  // namespace rankd
