#include "server/shard.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "api/errors.h"
#include "core/log.h"
#include "redis/shard_clients.h"
#include "server/answer.h"
#include "server/cross_site.h"

namespace rankd {

namespace {

constexpr uint64_t kLagTickMs = 100;

}  // namespace

Shard::Shard(int id, const ServeOptions& opts, ShardHost& host)
    : id_(id),
      opts_(opts),
      host_(host),
      stats_(id, opts.metrics, !opts.auth_token_file.empty()),
      runtime_("shard-" + std::to_string(id), static_cast<size_t>(opts.cpu_threads),
               opts.cpu_queue_max),
      rank_{.id = id,
            .opts = opts.rank,
            .runtime = &runtime_,
            .stats = &stats_,
            .cursor_key = &host.cursor_key()} {
  stats_.admission = &path_.stage<AdmissionStage>().stats();
  stats_.events = &events_.stats();
  // A CPU backlog older than a quarter of the default deadline is served newest first
  // (ThreadPool::set_lifo_after; docs/operations.md, "Overload").
  runtime_.cpu().set_lifo_after(
      std::chrono::milliseconds(std::max<int64_t>(1, opts.rank.deadline_ms / 4)));
}

Shard::~Shard() { Stop(); }

Status Shard::Start(std::shared_ptr<const PlanSet> plans, std::shared_ptr<const AuthTokens> tokens,
                    int port) {
  runtime_.Start();
  return runtime_.OnLoop([&] {
    auth_ = std::move(tokens);
    return StartOnLoop(std::move(plans), port);
  });
}

Status Shard::StartOnLoop(std::shared_ptr<const PlanSet> plans, int port) {
  loop().AssertInLoopThread();
  SetPlans(std::move(plans));

  RedisClientOptions ropts;
  ropts.connections_per_endpoint = opts_.redis_conns;
  ropts.reply_limits = opts_.redis_reply_limits;
  ropts.max_redirects = opts_.redis_max_redirects;
  ropts.max_cluster_nodes = static_cast<size_t>(opts_.redis_max_cluster_nodes);
  RedisPools& redis = runtime_.OpenRedis(opts_.redis, ropts);
  redis.ForEachStats([this](const std::string& ep, std::shared_ptr<const RedisStats> st) {
    stats_.redis.emplace_back(ep, std::move(st));
  });
  if (opts_.cache_mb > 0) {
    ShardCache::Options co;
    co.budget_bytes = (opts_.cache_mb << 20) / static_cast<uint64_t>(std::max(1, opts_.shards));
    co.ttl_cap_ms = opts_.cache_ttl_ms;
    stats_.cache = runtime_.OpenCache(co, opts_.cache_tracking).shared_stats();
  }
  ExecEnv& env = runtime_.env();
  env.node_timeout_ms = static_cast<uint64_t>(opts_.node_timeout_ms);
  env.offloads = &stats_.offloads;
  env.cpu_cancelled = &stats_.cpu_cancelled;
  env.ann = host_.ann_indexes();
  rank_.access_log = host_.access_log_ring(id_);
  served_log_ =
      std::make_unique<ShardServedLog>(loop(), &redis, opts_.served_log, host_.file_sinks(),
                                       opts_.served_log_buffer_bytes, opts_.allow_forced_logging);
  stats_.served_log = served_log_.get();
  rank_.served_log = served_log_.get();
  stats_.timers = &loop().timers();
  rank_.page_redis = redis.Get(opts_.rank.page_endpoint);
  events_.Start();
  ExemptLogOnlyEndpoints();

  auto main_origins = http::OriginPolicy::Make(opts_.allowed_origins, opts_.allowed_hosts,
                                               http::IsLoopbackAddress(opts_.http.host));
  auto metrics_origins = http::OriginPolicy::Make(opts_.allowed_origins, opts_.allowed_hosts,
                                                  http::IsLoopbackAddress(opts_.metrics_host));
  if (!main_origins) return Fail(main_origins.error());
  if (!metrics_origins) return Fail(metrics_origins.error());
  main_origins_ = std::move(*main_origins);
  metrics_origins_ = std::move(*metrics_origins);

  http::HttpOptions h = opts_.http;
  h.port = port;
  h.shard_id = static_cast<uint32_t>(id_);
  auto l = http::Listener::Start(
      loop(), h,
      [this](http::Request req, http::Responder res) {
        OnRequest(std::move(req), std::move(res), Listener::kMain);
      },
      RenderError);
  if (!l) return Fail(l.error());
  listener_ = *l;
  if (opts_.metrics_port != 0 && id_ == 0) {
    // One shard is enough for scrapes (and the console); its own listener, so that its
    // connections and budgets are apart from the clients'. The same limits otherwise:
    // a request the main port refuses, this one refuses too.
    http::HttpOptions mh = h;
    mh.host = opts_.metrics_host;
    mh.port = opts_.metrics_port;
    // Few connections, and at the cap the idlest makes room: whoever holds them idle
    // cannot keep the probes and Prometheus out.
    mh.max_connections = opts_.metrics_max_connections;
    mh.evict_idle_at_cap = true;
    auto ml = http::Listener::Start(
        loop(), mh,
        [this](http::Request req, http::Responder res) {
          OnRequest(std::move(req), std::move(res), Listener::kMetrics);
        },
        RenderError);
    if (!ml) return Fail(Error::Internal("--metrics-port: " + ml.error().message));
    metrics_listener_ = *ml;
  }
  stats_.http = &listener_->counters();
  if (metrics_listener_) stats_.metrics_http = &metrics_listener_->counters();
  port_.store(listener_->port());
  StartLagTimer();
  // Registered after the Redis pools: closers run newest first, so the tick stops first.
  runtime_.AtStop([this] {
    loop().timers().Cancel(lag_timer_);
    lag_timer_ = 0;
    served_log_->Close();
  });
  redis_ready_.store(redis.Ready(), std::memory_order_relaxed);
  return {};
}

void Shard::InstallPlans(std::shared_ptr<const PlanSet> plans) {
  loop().Post([this, plans = std::move(plans)]() mutable { SetPlans(std::move(plans)); });
}

void Shard::InstallAuthTokens(std::shared_ptr<const AuthTokens> tokens) {
  loop().Post([this, tokens = std::move(tokens)]() mutable { auth_ = std::move(tokens); });
}

void Shard::SetPlans(std::shared_ptr<const PlanSet> plans) {
  loop().AssertInLoopThread();
  runtime_.InstallPlans(std::move(plans));
  path_.Install(*runtime_.plans());
  events_.Install(*runtime_.plans());
  ExemptLogOnlyEndpoints();
}

// Log-only endpoints do not gate readiness (served/sink_config.h).
void Shard::ExemptLogOnlyEndpoints() {
  if (runtime_.redis() && !opts_.served_log.empty())
    runtime_.redis()->SetReadyExempt(LogOnlyEndpoints(opts_.served_log, *runtime_.plans()));
}

void Shard::Drain() {
  bool posted = loop().Post([this] {
    draining_ = true;
    if (!listener_) {
      drained_.store(true, std::memory_order_release);
      return;
    }
    // Drained when every listener of the shard is, and the served log is flushed.
    auto left = std::make_shared<int>(metrics_listener_ ? 2 : 1);
    auto one_drained = [this, left] {
      if (--*left == 0) FinishDrain();
    };
    listener_->Drain(one_drained);
    if (metrics_listener_) metrics_listener_->Drain(one_drained);
  });
  if (!posted) drained_.store(true, std::memory_order_release);  // never started
}

void Shard::FinishDrain() {
  if (!served_log_) {
    drained_.store(true, std::memory_order_release);
    return;
  }
  served_log_->Flush([this] { drained_.store(true, std::memory_order_release); });
}

void Shard::CloseNow() {
  loop().Post([this] {
    if (served_log_) served_log_->Abandon();
    if (listener_) listener_->CloseNow();
    if (metrics_listener_) metrics_listener_->CloseNow();
  });
}

void Shard::Stop() {
  runtime_.Stop();
  // The loop has stopped and closed their handles.
  listener_.reset();
  metrics_listener_.reset();
}

// --- periodic tick: loop lag, readiness -------------------------------------------

void Shard::StartLagTimer() {
  // A one-shot timer re-armed every tick: the lag is how much later than asked it fired,
  // on the high-resolution clock. (libuv's loop time is in whole milliseconds and
  // truncated, so a timer never fires late because of rounding; it may fire early, which
  // counts as no lag.)
  lag_expected_ns_ = uv_hrtime() + kLagTickMs * 1'000'000;
  lag_timer_ = loop().timers().Start(kLagTickMs, [this] { OnTick(); });
}

void Shard::OnTick() {
  loop().AssertInLoopThread();
  uint64_t now = uv_hrtime();
  double lag = now > lag_expected_ns_ ? static_cast<double>(now - lag_expected_ns_) / 1e9 : 0.0;
  stats_.loop_lag = lag;
  stats_.loop_lag_distribution.Observe(lag);
  redis_ready_.store(runtime_.redis() && runtime_.redis()->Ready(), std::memory_order_relaxed);
  path_.Tick(Clock::now());
  StartLagTimer();
}

// --- routes -----------------------------------------------------------------------

void Shard::OnRequest(http::Request req, http::Responder res, Listener listener) {
  TimePoint t0 = req.read_done;
  std::string_view path = req.path();
  Route route = MatchRoute(path);
  if (!ServedOn(route, listener, opts_.console)) route = Route::kOther;
  if (!CrossSiteAllowed(req, res, route, listener)) return;
  if (!Admitted(req, res, route, listener)) return;
  if (route == Route::kOther) {
    // The metrics address is for Prometheus and probes (and, with --console, the
    // console): a NetworkPolicy or firewall decides who reaches it.
    if (listener == Listener::kMetrics && !opts_.console)
      return AnswerError(
          rank_, req, res, route,
          Error::NotFound("the metrics address serves only /metrics, /healthz and /readyz"), t0);
    return AnswerError(rank_, req, res, route, Error::NotFound("no route for " + std::string(path)),
                       t0);
  }
  const RouteSpec& spec = SpecOf(route);
  if (!AcceptsMethod(spec, req.method)) {
    const http::HeaderField allow[] = {{"Allow", spec.allow}};
    return AnswerError(rank_, req, res, route, MethodNotAllowed(spec, path, req.method), t0, allow);
  }
  if (route == Route::kRank) return path_.Handle(req, std::move(res), t0, listener);
  if (route == Route::kEvents) return events_.Handle(req, std::move(res), t0);
  info_.Handle(req, res, route, listener);
}

bool Shard::Admitted(const http::Request& req, http::Responder& res, Route route,
                     Listener listener) {
  if (!auth_ || !NeedsToken(route, listener)) return true;
  auto ok = auth_->Check(req.header("authorization"));
  if (ok) return true;
  AnswerError(rank_, req, res, route, ok.error(), req.read_done, kWwwAuthenticate);
  return false;
}

bool Shard::CrossSiteAllowed(const http::Request& req, http::Responder& res, Route route,
                             Listener listener) {
  const http::OriginPolicy& policy = listener == Listener::kMain ? main_origins_ : metrics_origins_;
  CrossSite verdict = CheckCrossSite(policy, req, res, route);
  switch (verdict) {
    case CrossSite::kAllowed: return true;
    case CrossSite::kPreflight:
      AddPreflightHeaders(res, route);
      Answer(rank_, req, res, route, kPreflightStatus, {}, req.read_done, {}, {});
      return false;
    case CrossSite::kMisdirected: ++stats_.misdirected; break;
    case CrossSite::kForbidden: ++stats_.forbidden_origins; break;
  }
  AnswerError(rank_, req, res, route, CrossSiteError(verdict, req), req.read_done);
  return false;
}

}  // namespace rankd
