#include "rank/path.h"

#include <algorithm>
#include <array>
#include <optional>

#include "api/errors.h"
#include "core/block_pool.h"
#include "core/free_list.h"
#include "core/json_escape.h"
#include "rank/stage_access_log.h"

namespace rankd {

namespace {

// Counts one admitted request until the last holder of RunPlan's hold lets go, which
// may be a CPU worker finishing abandoned work.
struct LiveRequest {
  explicit LiveRequest(std::atomic<size_t>& n) : n(n) {}
  ~LiveRequest() { n.fetch_sub(1, std::memory_order_relaxed); }
  std::atomic<size_t>& n;
};

template <class S>
bool BeforeOf(S& s, RankContext& ctx, RankInput& in, Status& refused) {
  if constexpr (requires { s.Before(ctx, in); }) {
    refused = s.Before(ctx, in);
    return refused && !ctx.answered;
  }
  return true;
}

template <class S>
bool WriteBodyOf(S& s, RankContext& ctx, std::string& out) {
  if constexpr (requires { s.WriteBody(ctx, out); })
    return s.WriteBody(ctx, out);
  else
    return false;
}

}  // namespace

RankPath::RankPath(RankShard& shard) : shard_(shard), stages_(shard) { shard.path = this; }

void RankPath::Handle(const http::Request& req, http::Responder res, TimePoint t0,
                      Listener listener) {
  RankContext ctx(std::move(res));
  ctx.t0 = t0;
  RankInput in{req, listener, {}};
  Status refused;
  bool go =
      std::apply([&](auto&... s) { return (BeforeOf(s, ctx, in, refused) && ...); }, stages_.all());
  if (ctx.answered) return;
  if (!go) return Refuse(ctx, req, refused.error());
  ctx.plan = ctx.run.plan;
  ctx.user_id = ctx.run.user_id;
  ctx.request_id = req.request_id;
  shard_.stats->live_requests.fetch_add(1, std::memory_order_relaxed);
  Spawn(Run(std::move(ctx)));
}

void RankPath::Refuse(RankContext& ctx, const http::Request& req, const Error& e) {
  Each([&](auto& s) {
    if constexpr (requires { s.Refused(ctx, e); }) s.Refused(ctx, e);
  });
  http::Response r;
  r.status = ErrorStatus(e.code);
  std::string body = ErrorBody(e);
  r.body = body;
  if (r.status == 503) r.headers = kRetryAfter;
  SendAnswer(shard_, ctx.res, req.method, req.request_id, Route::kRank, r, ctx.t0);
}

// The frame owns everything the request touches until it has answered: the plan (run
// and ctx.plan), the stages' slots (its metric series, its experiment set) and its
// admission count (`live`, which RunPlan keeps until the request's last CPU job has let go).
Coro<void> RankPath::Run(RankContext ctx) {
  auto live = std::allocate_shared<LiveRequest>(block_pool::Allocator<LiveRequest>(),
                                                shard_.stats->live_requests);
  // Work the answer waits for after the run (Settle) runs as part of the request.
  std::array<std::optional<Coro<void>>, kStageCount<RankStages>> settling;
  size_t n_settling = 0;
  Each([&](auto& s) {
    if constexpr (requires { s.Settle(ctx); })
      if (s.Settles(ctx)) settling[n_settling++].emplace(s.Settle(ctx));
  });
  std::shared_ptr<LiveRequest> hold = n_settling > 0 ? live : nullptr;
  ctx.result = co_await RunPlan(shard_.runtime->env(), std::move(ctx.run), std::move(live));
  Each([&](auto& s) {
    if constexpr (requires { s.OnResult(ctx); }) s.OnResult(ctx);
  });
  for (size_t i = 0; i < n_settling; ++i) co_await std::move(*settling[i]);
  hold.reset();

  // The body is copied into the connection's output by Send; its buffer then serves the
  // next request of this shard (core/free_list.h).
  Recycled<std::string, 1u << 20, 64> body;
  // One clock read for the header and the metrics (the body is written after it).
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ctx.t0);
  ctx.took_us = took.count();
  std::string timing = ServerTiming(took);
  const http::HeaderField ok_headers[] = {{"Server-Timing", timing}};
  const http::HeaderField busy_headers[] = {{"Server-Timing", timing}, kRetryAfter[0]};
  std::span<const http::HeaderField> headers = ok_headers;
  bool written =
      std::apply([&](auto&... s) { return (WriteBodyOf(s, ctx, *body) || ...); }, stages_.all());
  if (!written && ctx.result) {
    body->reserve(256 + ctx.result->output.size() * 48);
    AppendRankResponse(*ctx.result, ctx.explain, *body, ctx.extras);
  } else if (!written) {
    ctx.status = ErrorStatus(ctx.result.error().code);
    AppendErrorBody(ctx.result.error(), *body);
    if (ctx.status == 503) headers = busy_headers;
  }
  // Counted before sending: a client that scrapes /metrics after reading its answer
  // (from any shard) finds it counted.
  Each([&](auto& s) {
    if constexpr (requires { s.Count(ctx); }) s.Count(ctx);
  });
  shard_.stats->CountHttp(Route::kRank, "POST", ctx.status, static_cast<double>(ctx.took_us) / 1e6);
  http::Response r;
  r.status = ctx.status;
  r.body = *body;
  r.headers = headers;
  ctx.res.Send(r);
  Each([&](auto& s) {
    if constexpr (requires { s.After(ctx); }) s.After(ctx);
  });
}

void RankPath::Install(const PlanSet& plans) {
  Each([&](auto& s) {
    if constexpr (requires { s.Install(plans); }) s.Install(plans);
  });
}

void RankPath::Tick(TimePoint now) {
  Each([&](auto& s) {
    if constexpr (requires { s.Tick(now); }) s.Tick(now);
  });
}

void SendAnswer(RankShard& shard, http::Responder& res, std::string_view method,
                std::string_view request_id, Route route, const http::Response& r, TimePoint t0) {
  // Counted before sending: a client that scrapes /metrics after reading its answer
  // (from any shard) finds it counted.
  shard.stats->CountHttp(route, method, r.status,
                         std::chrono::duration<double>(Clock::now() - t0).count());
  res.Send(r);
  if (shard.opts.access_log)
    WriteAccessLog(shard, request_id, route, method, r.status, t0, nullptr, {});
}

// "total;dur=<ms with 3 decimals>", from whole microseconds (no printf on this path).
std::string ServerTiming(std::chrono::microseconds took) {
  int64_t us = std::max<int64_t>(0, took.count());
  std::string out = "total;dur=";
  AppendJsonInt(us / 1000, out);
  char frac[4] = {'.', static_cast<char>('0' + us % 1000 / 100),
                  static_cast<char>('0' + us % 100 / 10), static_cast<char>('0' + us % 10)};
  out.append(frac, sizeof frac);
  return out;
}

int64_t UnixMsAt(TimePoint t) {
  auto since = Clock::now() - t;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             (std::chrono::system_clock::now() - since).time_since_epoch())
      .count();
}

}  // namespace rankd
