#include "rank/stage_served_state.h"

#include <simdjson.h>

#include <chrono>
#include <string>
#include <unordered_set>

#include "events/zset_marks.h"
#include "rank/context.h"
#include "rank/path.h"
#include "redis/shard_clients.h"

namespace rankd {

namespace {

// A write Redis has not answered by then counts as failed, and frees its place in flight.
constexpr auto kWriteTimeout = std::chrono::seconds(1);

}  // namespace

Status ServedStateStage::Before(RankContext& ctx, RankInput& in) {
  // The console (on the metrics address) and explain look at a ranking; nobody was shown it.
  Slot& slot = ctx.slot<ServedStateStage>();
  slot.writes =
      ctx.run.plan->served_state.enabled && !ctx.explain && in.listener == Listener::kMain;
  slot.ts_ms = ctx.run.ts_ms;  // what the run's seen_filter compares within_s against
  return {};
}

// The answer's items: its output's rows in order, or a first page's, which are those of
// its snapshot (rank/page_snapshot.h): the first row of each id, rows with a null id
// taking a place but naming no member.
void ServedStateStage::After(RankContext& ctx) {
  const Slot& slot = ctx.slot<ServedStateStage>();
  if (!slot.writes || !ctx.result) return;
  const RunResult& r = *ctx.result;
  const Column* id = r.output.column("id");
  if (!id) return;  // the loader requires one: never here
  const int page_size = ctx.slot<PagesStage>().page_size;
  const size_t items = page_size > 0 ? static_cast<size_t>(page_size) : r.output.size();
  Ids ids;
  std::unordered_set<int64_t> nums;
  std::unordered_set<std::string_view> strs;
  for (size_t i = 0, taken = 0; i < r.output.size() && taken < items; ++i) {
    const uint32_t row = r.output.row(i);
    if (!id->valid(row)) {
      ++taken;
    } else if (id->type == ColumnType::kStr) {
      if (strs.insert(id->str(row)).second) ids.strs.emplace_back(id->str(row)), ++taken;
    } else if (nums.insert(id->i64[row]).second) {
      ids.nums.push_back(id->i64[row]), ++taken;
    }
  }
  auto pm = ctx.slot<PlanMetricsStage>().pm;
  Start(ctx.plan, std::move(pm), ctx.user_id, std::move(ids), slot.ts_ms);
}

void ServedStateStage::LaterPage(std::string_view head, std::string_view lines, int64_t ts_ms) {
  // The head line is {"plan":...,"user_id":...,"items":[ : closed, it parses.
  simdjson::dom::parser parser;
  std::string text(head);
  text += "]}";
  simdjson::dom::object h;
  std::string_view name;
  if (parser.parse(text).get(h) || h["plan"].get_string().get(name)) return;
  PlanPtr plan = shard_.runtime->plans()->Find(name);
  if (!plan || !plan->served_state.enabled) return;
  UserId user;
  simdjson::dom::element u;
  if (h["user_id"].get(u)) return;
  if (std::string_view s; !u.get_string().get(s))
    user = UserId::Str(std::string(s));
  else if (int64_t n; !u.get_int64().get(n))
    user = n;
  else
    return;
  // The head's views die with the next parse: plan and user are copies by now.
  Ids ids;
  simdjson::padded_string padded(lines);
  simdjson::dom::document_stream items;
  if (parser.parse_many(padded).get(items)) return;
  for (auto item : items) {
    simdjson::dom::element v;
    if (item.get(v) || v["id"].get(v)) continue;
    if (std::string_view s; !v.get_string().get(s))
      ids.strs.emplace_back(s);
    else if (int64_t n; !v.get_int64().get(n))
      ids.nums.push_back(n);
  }
  Start(plan, shard_.path->stage<PlanMetricsStage>().ForPlan(*plan), std::move(user),
        std::move(ids), ts_ms);
}

void ServedStateStage::Start(PlanPtr plan, PlanMetricsPtr pm, UserId user, Ids ids, int64_t ts_ms) {
  if (ids.size() == 0) return;
  if (inflight_ >= kMaxInflight) {
    if (pm) pm->served_state[static_cast<size_t>(ServedStateOutcome::kDropped)]->Add();
    return;
  }
  ++inflight_;
  Spawn(Write(std::move(plan), std::move(pm), std::move(user), std::move(ids), ts_ms));
}

// The marks of the answer's items (events/zset_marks.h: ZADD GT, the newest max kept, the
// TTL; one batch, one round trip, not atomic: a seen_filter that reads between the
// commands sees the items, untrimmed).
Coro<void> ServedStateStage::Write(PlanPtr plan, PlanMetricsPtr pm, UserId user, Ids ids,
                                   int64_t ts_ms) {
  // Detached work: the loop lets it end before it closes the Redis handles it uses.
  WorkGate::Hold hold = shard_.runtime->env().loop->HoldWork();
  const PlanServedState& ss = plan->served_state;
  auto outcome = ServedStateOutcome::kFailed;
  RedisPools* pools = shard_.runtime->env().redis;
  RedisClient* redis = pools ? pools->Get(ss.endpoint) : nullptr;
  if (redis) {
    const ZsetMarks bounds{ss.family->name, ss.max, ss.ttl_s};
    MarkBatch marks;
    for (int64_t n : ids.nums) marks.Add(*ss.family, bounds, user, UserId(n), ts_ms);
    for (const std::string& id : ids.strs)
      marks.Add(*ss.family, bounds, user, UserId::Str(id), ts_ms);
    if (co_await WriteMarks(*redis, marks, Clock::now() + kWriteTimeout))
      outcome = ServedStateOutcome::kOk;
  }
  --inflight_;
  if (pm) pm->served_state[static_cast<size_t>(outcome)]->Add();
}

}  // namespace rankd
