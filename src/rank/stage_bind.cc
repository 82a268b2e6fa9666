#include "rank/stage_bind.h"

#include "core/client_text.h"
#include "rank/context.h"
#include "rank/path.h"

namespace rankd {

Status ParseStage::Before(RankContext& ctx, RankInput& in) {
  auto parsed = ParseRankRequest(in.req.body);
  if (!parsed) return Fail(parsed.error());
  in.rr = std::move(*parsed);
  ctx.explain = in.rr.explain;
  ctx.deadline_ms = in.rr.deadline_ms.value_or(shard_.opts.deadline_ms);
  return {};
}

Status BindStage::Before(RankContext& ctx, RankInput& in) {
  RankRequest& rr = in.rr;
  const auto& snapshot = shard_.runtime->plans();
  auto it = snapshot->plans.find(rr.plan);
  if (it == snapshot->plans.end())
    return Fail(Error::UnknownPlan("plan: '" + ClientText(rr.plan) + "' is not loaded"));
  if (auto ok = CheckUserIdType(rr.user_id, it->second->user_id_type, rr.plan); !ok) return ok;
  ctx.run.plan = it->second;
  ctx.run.user_id = std::move(rr.user_id);
  ctx.run.params = std::move(rr.params);
  // The deadline counts from the moment the request was fully read (docs/api.md).
  ctx.run.deadline = ctx.t0 + std::chrono::milliseconds(ctx.deadline_ms);
  ctx.run.ts_ms = UnixMsAt(ctx.t0);  // the served log's ts_ms: counters' `now`
  return {};
}

}  // namespace rankd
