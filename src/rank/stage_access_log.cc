#include "rank/stage_access_log.h"

#include <chrono>

#include "api/errors.h"
#include "api/rank_response.h"
#include "core/json_escape.h"
#include "core/line_rate_limit.h"
#include "core/log.h"
#include "rank/context.h"

namespace rankd {

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

void AccessLogStage::After(RankContext& ctx) {
  LogFailures(ctx.request_id, *ctx.plan, ctx.result);
  if (shard_.opts.access_log)
    WriteAccessLog(shard_, ctx.request_id, Route::kRank, "POST", ctx.status, ctx.t0, ctx.plan.get(),
                   ctx.user_id);
}

void WriteAccessLog(RankShard& shard, std::string_view request_id, Route route,
                    std::string_view method, int status, TimePoint t0, const Plan* plan,
                    const UserId& user_id) {
  std::string line = R"({"shard":)";
  AppendJsonInt(shard.id, line);
  line += R"(,"request_id":)";
  AppendJsonString(request_id, line);
  line += R"(,"method":)";
  AppendJsonString(method, line);
  line += R"(,"route":)";
  AppendJsonString(RouteName(route), line);
  if (plan) {
    line += R"(,"plan":)";
    AppendJsonString(plan->name, line);
    line += R"(,"user_id":)";
    AppendJsonUserId(user_id, line);
  }
  line += R"(,"status":)";
  AppendJsonInt(status, line);
  line += R"(,"took_us":)";
  AppendJsonInt(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(),
                line);
  if (!shard.access_log || !shard.access_log->TryPush(line, "}\n"))
    ++shard.stats->access_log_dropped;
}

}  // namespace rankd
