// POST /rank on a shard: parse, admit, run the plan, answer.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "api/errors.h"
#include "api/rank_request.h"
#include "api/rank_response.h"
#include "core/block_pool.h"
#include "core/client_text.h"
#include "core/free_list.h"
#include "core/line_rate_limit.h"
#include "core/log.h"
#include "server/shard.h"

namespace rankd {

namespace {

// Counts one admitted request until the last holder of RunPlan's hold lets go, which
// may be a CPU worker finishing abandoned work.
struct LiveRequest {
  explicit LiveRequest(std::atomic<size_t>& n) : n(n) {}
  ~LiveRequest() { n.fetch_sub(1, std::memory_order_relaxed); }
  std::atomic<size_t>& n;
};

size_t OutcomeIndex(const Result<RunResult>& r) {
  return r ? 0 : 1 + static_cast<size_t>(r.error().code);
}

}  // namespace

// "total;dur=<ms with 3 decimals>", from whole microseconds (no printf on this path).
std::string Shard::ServerTiming(std::chrono::microseconds took) {
  int64_t us = std::max<int64_t>(0, took.count());
  std::string out = "total;dur=";
  AppendJsonInt(us / 1000, out);
  char frac[4] = {'.', static_cast<char>('0' + us % 1000 / 100),
                  static_cast<char>('0' + us % 100 / 10), static_cast<char>('0' + us % 10)};
  out.append(frac, sizeof frac);
  return out;
}

namespace {

// One for the whole process: the limit is per error code, whichever shard answers.
LineRateLimit<kErrorCodeCount>& WarningLimit() {
  static LineRateLimit<kErrorCodeCount> limit;
  return limit;
}

// Server errors go to the log with the request id, with the detail clients never see
// (addresses, keys, raw Redis text); so do the failures behind `degraded` that carry
// such a detail (a plain optional-node timeout is routine and only counted). Both are
// rate-limited per error code (at most a line a second: a client can cause them at
// will); Log escapes what Redis put in them.
void LogFailures(std::string_view request_id, const Plan& plan, const Result<RunResult>& r) {
  auto line = [&](std::string_view node, const Error& e) {
    if (!LogEnabled(LogLevel::kWarn)) return;
    int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
            .count();
    uint64_t suppressed = 0;
    if (!WarningLimit().Allow(static_cast<size_t>(e.code), now_ms, &suppressed)) return;
    std::string s = "request ";
    s.append(request_id).append(" plan '").append(plan.name).append("'");
    if (!node.empty()) s.append(" degraded node '").append(node).append("'");
    s.append(": ").append(ErrorCodeName(e.code)).append(": ").append(e.message);
    if (!e.detail.empty()) s.append(" [").append(e.detail).append("]");
    if (suppressed) s.append(" (").append(std::to_string(suppressed)).append(" suppressed)");
    LogWarn(s);
  };
  if (!r) {
    if (ErrorStatus(r.error().code) >= 500) line({}, r.error());
    return;
  }
  for (size_t i = 0; i < r->degraded.size() && i < r->degraded_errors.size(); ++i)
    if (!r->degraded_errors[i].detail.empty())
      line(plan.nodes[r->degraded[i]].id, r->degraded_errors[i]);
}

}  // namespace

// Admission counts requests until their work has really stopped, so abandoned CPU work
// (a 504 whose job still runs) counts against the limit.
Status Shard::Admit() {
  size_t live = stats_.live_requests.load(std::memory_order_relaxed);
  size_t limit = admission_.LimitFor(Priority::kDefault);
  if (live >= limit)
    return Fail(Error::Unavailable("shard " + std::to_string(id_) + " is at its admission limit " +
                                   std::to_string(limit) + "; retry later"));
  if (!admission_.AdmitShadow(live + 1)) CancelShadows();  // primaries first
  return {};
}

Status Shard::AdmitRun(const RunRequest& run, Priority priority, TimePoint t0, int64_t deadline_ms,
                       Admission::Ticket& ticket) {
  size_t live = stats_.live_requests.load(std::memory_order_relaxed);
  TimePoint now = Clock::now();
  int64_t remaining_us =
      deadline_ms * 1000 - std::chrono::duration_cast<std::chrono::microseconds>(now - t0).count();
  auto refused = admission_.Admit(run.plan, live, priority, remaining_us, ticket);
  if (!refused) {
    if (!admission_.AdmitShadow(live + 1)) CancelShadows();  // primaries first
    return {};
  }
  ++admission_.mutable_stats()
        .refusals[static_cast<size_t>(*refused)][static_cast<size_t>(priority)];
  if (stats_.enabled)
    stats_.admission_refusal_seconds.Observe(
        std::chrono::duration<double>(Clock::now() - t0).count());
  if (*refused == Refusal::kDeadline)
    return Fail(Error::Unavailable("plan '" + run.plan->name + "': the " +
                                   std::to_string(remaining_us / 1000) +
                                   " ms left of the deadline are less than its recent median "
                                   "time to answer; retry with a longer deadline_ms"));
  return Fail(Error::Unavailable("shard " + std::to_string(id_) + " is at its admission limit (" +
                                 std::to_string(admission_.LimitFor(priority)) + " for " +
                                 std::string(PriorityName(priority)) + " requests); retry later"));
}

void Shard::HandleRank(http::Request& req, http::Responder& res, TimePoint t0) {
  auto parsed = ParseRankRequest(req.body);
  if (!parsed) return AnswerError(req, res, Route::kRank, parsed.error(), t0);
  RankRequest& rr = *parsed;
  if (rr.cursor) return HandleNextPage(req, res, rr, t0);
  const auto& snapshot = runtime_.plans();
  auto it = snapshot->plans.find(rr.plan);
  if (it == snapshot->plans.end())
    return AnswerError(req, res, Route::kRank,
                       Error::UnknownPlan("plan: '" + ClientText(rr.plan) + "' is not loaded"), t0);
  if (auto ok = CheckUserIdType(rr.user_id, it->second->user_id_type, rr.plan); !ok)
    return AnswerError(req, res, Route::kRank, ok.error(), t0);
  RunRequest run;
  run.plan = it->second;
  run.user_id = std::move(rr.user_id);
  run.params = std::move(rr.params);
  RankTicket ticket;
  ticket.explain = rr.explain;
  ticket.page_size = rr.page_size.value_or(0);
  if (ticket.page_size > 0) ticket.plan_asked = rr.plan;
  ticket.t0 = t0;
  ticket.deadline_ms = rr.deadline_ms.value_or(opts_.deadline_ms);
  // An experiment on the requested plan may hand the request to a variant plan.
  if (auto picked = PickVariant(req, run, ticket); !picked)
    return AnswerError(req, res, Route::kRank, picked.error(), t0);
  // The request holds its plan's metric series until it has answered: a reload may
  // replace the shard's snapshot meanwhile.
  ticket.pm = stats_.enabled ? plan_metrics_.ForPlan(*run.plan) : nullptr;
  Priority priority = Priority::kDefault;
  if (rr.priority) {
    if (opts_.allow_priority)
      priority = *rr.priority;
    else
      ++admission_.mutable_stats().priority_ignored;
  }
  if (auto admitted = AdmitRun(run, priority, t0, ticket.deadline_ms, ticket.admission);
      !admitted) {
    if (ticket.pm) ticket.pm->outcomes[1 + static_cast<size_t>(admitted.error().code)]->Add();
    return AnswerError(req, res, Route::kRank, admitted.error(), t0, kRetryAfter);
  }
  if (double q = admission_.QualityOf(*ticket.admission.load); q >= 0) run.quality = q;
  if (ticket.experiment)
    experiment_series_
        .requests[static_cast<size_t>(ticket.experiment_index)]
                 [static_cast<size_t>(ticket.variant + 1)]
        ->Add();
  // The deadline counts from the moment the request was fully read (docs/api.md).
  run.deadline = t0 + std::chrono::milliseconds(ticket.deadline_ms);
  if (served_log_ && served_log_->Selected(*run.plan, rr.log)) {
    run.keep_for_log = true;
    ticket.served_id = served_log_->NewServedId();
    ticket.forced_log = served_log_->Forced(rr.log);
    ticket.ts_ms = UnixMsAt(t0);
  }
  ticket.request_id = req.request_id;
  stats_.live_requests.fetch_add(1, std::memory_order_relaxed);
  Spawn(RunRank(std::move(run), std::move(res), std::move(ticket)));
}

// The frame owns everything the request touches until it has answered: the plan (run
// and `plan`), its metric series (ticket.pm), its experiment set and its admission
// count (`live`, which RunPlan keeps until the request's last CPU job has let go).
Coro<void> Shard::RunRank(RunRequest run, http::Responder res, RankTicket ticket) {
  PlanPtr plan = run.plan;
  UserId user_id = run.user_id;
  TimePoint t0 = ticket.t0;
  PlanMetricsPtr& pm = ticket.pm;
  auto live =
      std::allocate_shared<LiveRequest>(block_pool::Allocator<LiveRequest>(), stats_.live_requests);
  // A first page still runs while its snapshot is written: it counts until then.
  std::shared_ptr<LiveRequest> paging = ticket.page_size > 0 ? live : nullptr;
  Result<RunResult> result = co_await RunPlan(runtime_.env(), std::move(run), std::move(live));
  ResponseExtras extras;
  extras.served_id = ticket.served_id;
  if (ticket.experiment) {
    extras.experiment = ticket.experiment->name;
    extras.variant = VariantName(ticket);
  }
  // With page_size, the snapshot later pages are read from is in Redis before the first
  // page goes out (or the page goes without a cursor).
  FirstPage page;
  if (result && ticket.page_size > 0) page = co_await StartPages(*result, extras, ticket, user_id);
  paging.reset();

  // The body is copied into the connection's output by Send; its buffer then serves the
  // next request of this shard (core/free_list.h).
  Recycled<std::string, 1u << 20, 64> body;
  // One clock read for the header and the metrics (the body is written after it).
  auto took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
  double took_secs = static_cast<double>(took.count()) / 1e6;
  admission_.OnAnswer(ticket.admission, took.count(), result.has_value());
  std::string timing = ServerTiming(took);
  const http::HeaderField ok_headers[] = {{"Server-Timing", timing}};
  const http::HeaderField busy_headers[] = {{"Server-Timing", timing}, kRetryAfter[0]};
  int status = 200;
  std::span<const http::HeaderField> headers = ok_headers;
  if (result && ticket.page_size > 0) {
    AppendFirstPage(page, *result, ticket, *body);
  } else if (result) {
    body->reserve(256 + result->output.size() * 48);
    AppendRankResponse(*result, ticket.explain, *body, extras);
  } else {
    status = ErrorStatus(result.error().code);
    AppendErrorBody(result.error(), *body);
    if (status == 503) headers = busy_headers;
  }
  // Counted before sending: a client that scrapes /metrics after reading its answer
  // (from any shard) finds it counted.
  if (pm) {
    pm->outcomes[OutcomeIndex(result)]->Add();
    pm->duration->Observe(took_secs);
    if (!result && result.error().code == ErrorCode::kDeadlineExceeded)
      pm->deadline_exceeded->Add();
    if (result) {
      const auto& nodes = result->nodes;
      for (size_t i = 0; i < nodes.size() && i < pm->node_duration.size(); ++i) {
        pm->node_outcomes[i][static_cast<size_t>(nodes[i].status)]->Add();
        if (nodes[i].status != NodeStatus::kSkipped)
          pm->node_duration[i]->Observe(static_cast<double>(nodes[i].took_us) / 1e6);
        if (nodes[i].status == NodeStatus::kOk && pm->model_rows[i]) {
          pm->model_rows[i]->Add(nodes[i].rows);
          pm->model_eval[i]->Observe(static_cast<double>(nodes[i].took_us) / 1e6);
        }
      }
      for (uint32_t d : result->degraded)
        if (d < pm->node_degraded.size() && pm->node_degraded[d]) pm->node_degraded[d]->Add();
    }
  }
  stats_.CountHttp(Route::kRank, "POST", status, took_secs);
  http::Response r;
  r.status = status;
  r.body = *body;
  r.headers = headers;
  res.Send(r);
  // Recorded after the answer is on its way: the served log costs the request no time.
  if (result && !ticket.served_id.empty()) {
    RecordHeader h;
    h.served_id = ticket.served_id;
    h.ts_ms = ticket.ts_ms;
    h.request_id = ticket.request_id;
    h.forced = ticket.forced;
    h.forced_log = ticket.forced_log;
    if (ticket.experiment) {
      h.experiment = ticket.experiment->name;
      h.variant = VariantName(ticket);
    }
    served_log_->Record(*result, h);
  }
  // So are the experiment's shadow runs.
  if (result && ticket.experiment && !ticket.experiment->shadows.empty())
    StartShadows(ticket, *result, user_id);
  LogFailures(ticket.request_id, *plan, result);
  if (opts_.access_log)
    AccessLog(ticket.request_id, Route::kRank, "POST", status, t0, plan.get(), user_id);
}

}  // namespace rankd
