// Shard: one thread, one libuv loop, and everything a request needs on it — the
// SO_REUSEPORT listener and its connections, the Redis pools, a slice of CPU workers,
// the plan snapshot and its counters for /metrics. A request lives on one shard from accept
// to last byte and takes no lock another shard can hold.
//
// Its loop, CPU workers, Redis pools and plan snapshot are a ShardRuntime, which also
// writes the stop order; the shard adds the listeners, the routes and the metrics.
//
// Threads: constructed and destroyed on the main thread; Start, InstallPlans, Drain,
// CloseNow and Stop are called from the main thread and post their work to the loop.
// Everything else runs on the shard's loop thread (the entry points check it in debug
// and sanitizer builds). redis_ready(), drained() and port() are atomics for any thread;
// stats() may be read from any thread once Start has returned (server/shard_stats.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "api/rank_request.h"
#include "core/event_loop.h"
#include "core/rate_budget.h"
#include "core/spsc_ring.h"
#include "http/listener.h"
#include "http/origin_policy.h"
#include "plan/plan.h"
#include "rank/admission.h"
#include "sched/scheduler.h"
#include "sched/shard_runtime.h"
#include "served/shard_log.h"
#include "server/auth_tokens.h"
#include "server/page_snapshot.h"
#include "server/plan_metrics.h"
#include "server/serve_options.h"
#include "server/shard_host.h"
#include "server/shard_stats.h"

namespace rankd {

// The extra header of every 503 a shard answers (overload, not ready, no Redis).
inline constexpr http::HeaderField kRetryAfter[] = {{"Retry-After", "1"}};
// ... and of every 401 (RFC 6750: the scheme the client must use).
inline constexpr http::HeaderField kWwwAuthenticate[] = {{"WWW-Authenticate", "Bearer"}};

class Shard {
 public:
  // `host`: what the shard asks of its process (the Server); it outlives the shard.
  Shard(int id, const ServeOptions& opts, ShardHost& host);
  ~Shard();

  // Starts the loop, the listener (on `port`; 0 = any) and the Redis pools; returns the
  // listener's error. `tokens`: those of --auth-token-file (null: none needed).
  Status Start(std::shared_ptr<const PlanSet> plans, std::shared_ptr<const AuthTokens> tokens,
               int port);
  // Posts a new plan snapshot; requests already running keep the one they started with.
  void InstallPlans(std::shared_ptr<const PlanSet> plans);
  // Posts the tokens re-read from --auth-token-file; requests read after it need one of them.
  void InstallAuthTokens(std::shared_ptr<const AuthTokens> tokens);
  // Stops accepting, finishes requests already read (answering with Connection: close),
  // then sets drained().
  void Drain();
  void CloseNow();  // the drain timeout passed
  void Stop();      // after Drain: ShardRuntime::Stop, then the listeners are freed

  int id() const { return id_; }
  bool redis_ready() const { return redis_ready_.load(std::memory_order_relaxed); }
  bool drained() const { return drained_.load(std::memory_order_acquire); }
  int port() const { return port_.load(); }
  // What the shard counts, for /metrics: complete once Start has returned.
  const ShardStats& stats() const { return stats_; }

 private:
  Status StartOnLoop(std::shared_ptr<const PlanSet> plans, int port);
  // With --auth-token-file, whether `req` may ask `route` on `listener`: else it is
  // answered 401 here.
  bool Admitted(const http::Request& req, http::Responder& res, Route route, Listener listener);
  // Whether `req`'s Host and Origin may use `route` on `listener` (--allowed-hosts,
  // --allowed-origins): else it is answered here, 421, 403, or a CORS preflight's 204.
  // A listed origin's answer gets its CORS headers through `res`.
  bool CrossSiteAllowed(const http::Request& req, http::Responder& res, Route route,
                        Listener listener);
  void AnswerPreflight(const http::Request& req, http::Responder& res, Route route);
  EventLoop& loop() { return runtime_.loop(); }
  // What RunRank needs besides the run: how to answer, count and record it.
  struct RankTicket {
    bool explain = false;
    std::string request_id;
    PlanMetricsPtr pm;  // the series of the plan that runs (a variant's own)
    TimePoint t0;       // when the request was fully read
    int64_t deadline_ms = 0;
    std::string served_id;  // empty: not recorded in the served log
    int64_t ts_ms = 0;      // Unix ms of t0, for the record
    // The experiment that applied (null: none), kept alive by `experiments`.
    ExperimentSetPtr experiments;
    const Experiment* experiment = nullptr;
    int experiment_index = -1;
    int variant = -1;         // -1: control
    bool forced = false;      // by X-Rankd-Variant
    bool forced_log = false;  // recorded because it asked ("log": true)
    GivenParams params;       // as the request gave them, for the shadows
    // With "page_size" (0: none): the first page's size, and the plan as asked, which
    // its cursor is bound to (run.plan may be an experiment's variant).
    int page_size = 0;
    std::string plan_asked;
    Admission::Ticket admission;  // its plan's load statistics, for its answer's sample
  };
  Coro<void> RunRank(RunRequest run, http::Responder res, RankTicket ticket);
  // --- experiments (shard_experiment.cc) ---
  // Applies the experiment on run.plan, if one is active: buckets the user (or takes the
  // forced variant), hands run to the variant's plan with its parameters, fills the
  // ticket's experiment fields. Errors: a bad X-Rankd-Variant (400), the request's
  // params against the requested plan (invalid_param).
  Status PickVariant(const http::Request& req, RunRequest& run, RankTicket& ticket);
  static std::string_view VariantName(const RankTicket& t);
  // After the primary answered: the experiment's shadow plans, each for its percent.
  void StartShadows(const RankTicket& t, const RunResult& primary, const UserId& user);
  Coro<void> RunShadow(RunRequest run, size_t experiment, size_t shadow, RankTicket t,
                       std::vector<uint64_t> primary_ids);
  void CancelShadows();  // the primaries need the shard: shadows running stop
  int64_t UnixMsAt(TimePoint t) const;
  // The Server-Timing header of a /rank answer: "total;dur=<ms, 3 decimals>".
  static std::string ServerTiming(std::chrono::microseconds took);
  // --- pages (shard_pages.cc; docs/api.md, "Pages") ---
  // A first page: the run's items as the snapshot later pages are read from, and the
  // cursor of the second page (empty: everything fit, or the snapshot was not written).
  struct FirstPage {
    PageSnapshot snapshot;
    std::string cursor;
  };
  // Builds the snapshot and, when more than a page's worth, writes it to
  // --page-endpoint and waits for Redis to acknowledge it.
  Coro<FirstPage> StartPages(const RunResult& r, const ResponseExtras& extras, const RankTicket& t,
                             const UserId& user);
  // Appends the first page's answer.
  static void AppendFirstPage(const FirstPage& page, const RunResult& r, const RankTicket& t,
                              std::string& out);
  // A request with "cursor": checked here, then read from its snapshot, no plan run.
  void HandleNextPage(http::Request& req, http::Responder& res, RankRequest& rr, TimePoint t0);
  struct NextPage {
    PageCursor cursor;
    size_t page_size = 0;
    std::string plan;  // as asked: the next cursor is bound to it too
    UserId user_id;
    std::string request_id;
    TimePoint t0;
    int64_t deadline_ms = 0;
  };
  Coro<void> RunNextPage(http::Responder res, NextPage p);
  // Answers and counts a later page's error (before its Redis read, or after it).
  void AnswerPageError(http::Responder& res, const Error& e, TimePoint t0,
                       std::string_view request_id);
  // A later page (no plan run): 503 unavailable when the shard runs its admission limit
  // of requests already; cancels the shadows past the sheddable share of it.
  Status Admit();
  // A plan run: the admission stage (rank/admission.h). Refused: 503 unavailable with
  // the reason, counted, and the time to the refusal observed.
  Status AdmitRun(const RunRequest& run, Priority priority, TimePoint t0, int64_t deadline_ms,
                  Admission::Ticket& ticket);
  // The quality gauges of the installed snapshot's plans with a quality block.
  void PrepareQualitySeries();
  void SetPlans(std::shared_ptr<const PlanSet> plans);  // loop thread
  // Every request of both listeners: routes it by kRoutes (api/routes.h says which
  // listener serves what).
  void OnRequest(http::Request req, http::Responder res, Listener listener);
  void HandleRank(http::Request& req, http::Responder& res, TimePoint t0);
  void HandleSchema(http::Request& req, http::Responder& res);
  void HandlePlans(http::Request& req, http::Responder& res, Route route);
  void HandleReadyz(const http::Request& req, http::Responder& res);
  // /metrics and /console/api/metrics (`route`), written off the loop by the host;
  // `listener`'s queue bounds the scrapes waiting.
  void HandleScrape(const http::Request& req, http::Responder& res, Route route, Listener listener);
  // /console/{file}: a file compiled in (api/console_files.h).
  void HandleConsoleFile(const http::Request& req, http::Responder& res);
  // Sends the answer and counts it (metrics, access log). A console route's answers
  // also carry kConsoleHeaders.
  void Answer(const http::Request& req, http::Responder& res, Route route, int status,
              std::string_view body, TimePoint t0, std::span<const http::HeaderField> extra = {},
              std::string_view content_type = "application/json");
  // The same for an answer sent after its request is gone (a scrape's).
  void AnswerAs(std::string_view method, std::string_view request_id, http::Responder& res,
                Route route, int status, std::string_view body, TimePoint t0,
                std::span<const http::HeaderField> extra, std::string_view content_type);
  void AnswerError(const http::Request& req, http::Responder& res, Route route, const Error& e,
                   TimePoint t0, std::span<const http::HeaderField> extra = {});
  void ExemptLogOnlyEndpoints();
  void FinishDrain();  // the listeners are drained: flush the served log, then drained()
  void StartLagTimer();
  void OnTick();  // every 100 ms: loop lag, readiness
  // One JSON line into the shard's access log ring (--access-log), written to stdout by
  // the server's writer thread; dropped and counted when the ring is full. plan is null
  // outside /rank.
  void AccessLog(std::string_view request_id, Route route, std::string_view method, int status,
                 TimePoint t0, const Plan* plan, const UserId& user_id);

  const int id_;
  ServeOptions opts_;
  ShardHost& host_;
  ShardStats stats_;  // before runtime_: requests count in it until the loop has stopped
  ShardRuntime runtime_;

  // --- loop thread only ---
  ShardPlanMetrics plan_metrics_{stats_.series, id_};
  // The tokens of --auth-token-file this shard was last given (null: none needed). Each
  // shard holds its own reference, so a check takes no lock another shard can hold.
  std::shared_ptr<const AuthTokens> auth_;
  std::shared_ptr<http::Listener> listener_;
  std::shared_ptr<http::Listener> metrics_listener_;  // --metrics-port, shard 0 only
  // --allowed-hosts and --allowed-origins as each listener applies them (the default
  // Host list depends on its address).
  http::OriginPolicy main_origins_;
  http::OriginPolicy metrics_origins_;
  std::unique_ptr<ShardServedLog> served_log_;
  // --page-endpoint's client: never null once started (ParseServeArgs checks the name).
  RedisClient* page_redis_ = nullptr;
  RateBudget page_write_budget_{opts_.page_write_bytes_per_s};  // --page-write-bytes-per-s
  ExperimentSeries experiment_series_;  // of the installed snapshot's experiments
  Admission admission_;
  std::unordered_map<std::string, Series*> quality_series_;  // by plan name
  size_t shadows_running_ = 0;
  // The running shadows' parent token; replaced by a fresh one each time it is cancelled.
  std::shared_ptr<CancelToken> shadow_cancel_ = std::make_shared<CancelToken>();
  uint64_t shadow_rng_ = 0x9e3779b97f4a7c15ull;
  SpscRing* access_log_ = nullptr;  // producer side; null without --access-log
  TimerQueue::Id lag_timer_ = 0;
  uint64_t lag_expected_ns_ = 0;
  bool draining_ = false;

  std::atomic<bool> redis_ready_{false};
  std::atomic<bool> drained_{false};
  std::atomic<int> port_{0};
};

}  // namespace rankd
