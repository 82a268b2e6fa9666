#include "rank/stage_served_log.h"

#include "rank/context.h"
#include "rank/path.h"
#include "served/shard_log.h"

namespace rankd {

Status ServedLogStage::Before(RankContext& ctx, RankInput& in) {
  ShardServedLog* log = shard_.served_log;
  if (!log->Selected(*ctx.run.plan, in.rr.log)) return {};
  Slot& slot = ctx.slot<ServedLogStage>();
  ctx.run.keep_for_log = true;
  slot.served_id = log->NewServedId();
  slot.forced_log = log->Forced(in.rr.log);
  slot.ts_ms = UnixMsAt(ctx.t0);
  return {};
}

void ServedLogStage::OnResult(RankContext& ctx) {
  ctx.extras.served_id = ctx.slot<ServedLogStage>().served_id;
}

// Recorded after the answer is on its way: the served log costs the request no time.
void ServedLogStage::After(RankContext& ctx) {
  const Slot& slot = ctx.slot<ServedLogStage>();
  if (!ctx.result || slot.served_id.empty()) return;
  const auto& experiment = ctx.slot<ExperimentStage>();
  RecordHeader h;
  h.request_id = ctx.request_id;
  h.forced = experiment.forced;
  h.forced_log = slot.forced_log;
  if (experiment.experiment) {
    h.experiment = experiment.experiment->name;
    h.variant = VariantName(experiment);
  }
  Record(*ctx.result, slot, h);
}

void ServedLogStage::SelectShadow(RunRequest& run, TimePoint t0, Slot& slot) {
  if (!shard_.served_log->Selected(*run.plan, false)) return;
  run.keep_for_log = true;
  slot.served_id = shard_.served_log->NewServedId();
  slot.ts_ms = UnixMsAt(t0);
}

void ServedLogStage::Record(const RunResult& r, const Slot& slot, RecordHeader h) {
  h.served_id = slot.served_id;
  h.ts_ms = slot.ts_ms;
  shard_.served_log->Record(r, h);
}

}  // namespace rankd
