// Shard: one thread, one libuv loop, and everything a request needs on it — the
// SO_REUSEPORT listener and its connections, the Redis pools, a slice of CPU workers,
// the plan snapshot and its counters for /metrics. A request lives on one shard from accept
// to last byte and takes no lock another shard can hold.
//
// Its loop, CPU workers, Redis pools and plan snapshot are a ShardRuntime, which also
// writes the stop order; the shard adds the listeners, the routing (tokens, cross-site
// rules, methods), the drain and the loop's tick, and hands every POST /rank to its
// RankPath (rank/path.h: the stages), every POST /events to its EventsRoute and every
// other route to its InfoRoutes.
//
// Threads: constructed and destroyed on the main thread; Start, InstallPlans, Drain,
// CloseNow and Stop are called from the main thread and post their work to the loop.
// Everything else runs on the shard's loop thread (the entry points check it in debug
// and sanitizer builds). redis_ready(), drained() and port() are atomics for any thread;
// stats() may be read from any thread once Start has returned (metrics/shard_stats.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/event_loop.h"
#include "http/listener.h"
#include "http/origin_policy.h"
#include "metrics/shard_stats.h"
#include "plan/plan.h"
#include "rank/path.h"
#include "sched/shard_runtime.h"
#include "served/shard_log.h"
#include "server/auth_tokens.h"
#include "server/events_route.h"
#include "server/info_routes.h"
#include "server/serve_options.h"
#include "server/shard_host.h"

namespace rankd {

// The extra header of every 401 (RFC 6750: the scheme the client must use).
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
  // Whether `req`'s Host and Origin may use `route` on `listener` (server/cross_site.h):
  // else it is answered here, 421, 403, or a CORS preflight's 204.
  bool CrossSiteAllowed(const http::Request& req, http::Responder& res, Route route,
                        Listener listener);
  EventLoop& loop() { return runtime_.loop(); }
  void SetPlans(std::shared_ptr<const PlanSet> plans);  // loop thread
  // Every request of both listeners: routes it by kRoutes (api/routes.h says which
  // listener serves what).
  void OnRequest(http::Request req, http::Responder res, Listener listener);
  void ExemptLogOnlyEndpoints();
  void FinishDrain();  // the listeners are drained: flush the served log, then drained()
  void StartLagTimer();
  void OnTick();  // every 100 ms: loop lag, readiness

  const int id_;
  ServeOptions opts_;
  ShardHost& host_;
  ShardStats stats_;  // before runtime_: requests count in it until the loop has stopped
  ShardRuntime runtime_;

  // The /rank path (rank/path.h) and what its stages share of the shard.
  RankShard rank_;
  RankPath path_{rank_};
  EventsRoute events_{rank_, runtime_, opts_};      // POST /events
  InfoRoutes info_{rank_, runtime_, host_, opts_};  // every other route

  // --- loop thread only ---
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
  TimerQueue::Id lag_timer_ = 0;
  uint64_t lag_expected_ns_ = 0;
  bool draining_ = false;

  std::atomic<bool> redis_ready_{false};
  std::atomic<bool> drained_{false};
  std::atomic<int> port_{0};
};

}  // namespace rankd
