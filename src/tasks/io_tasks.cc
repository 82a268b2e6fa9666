// Runs of the Redis-backed tasks (viewer, follow, recommendation, media, features,
// seen_filter); their specs are in io_specs.cc, what they make of the replies in
// io_replies.cc.
//
// Every run builds all of its commands first and sends them as one RedisClient::Batch:
// one write, one round trip, however many input rows. Error replies (WRONGTYPE) and
// replies of the wrong type become backend_error (the key and the Redis text in the
// error's detail, for the log); a lost or refused connection is unavailable; the node's
// deadline is the batch's.
//
// Threads: runs execute on the request's loop thread, the thread that owns ctx.redis.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "redis/pools.h"
#include "tasks/io_replies.h"
#include "tasks/task.h"

namespace rankd {

namespace {

// The pool of the node's `endpoint` parameter.
Result<RedisClient*> PoolFor(const TaskContext& ctx) {
  const std::string& name = ctx.args->Str("endpoint");
  if (ctx.redis == nullptr)
    return Fail(Error::Unavailable("no Redis is configured in this process"));
  RedisClient* pool = ctx.redis->Get(name);
  if (pool == nullptr)
    return Fail(Error::Unavailable("redis endpoint '" + name +
                                   "' is not configured (see --redis NAME=URL)"));
  return pool;
}

ReplySource SourceOf(RedisClient& pool) {
  return {pool.endpoint().name, pool.endpoint().Label(), pool.prefix(), &pool.mutable_stats()};
}

// Where every per-row IO task starts: the pool of the node's endpoint and the ids of
// its input rows.
struct RowIo {
  RedisClient* pool;
  InputIds ids;
};

Result<RowIo> StartRowIo(const TaskContext& ctx, const RowSet& in) {
  auto pool = PoolFor(ctx);
  if (!pool) return Fail(pool.error());
  auto ids = IdsOf(in);
  if (!ids) return Fail(ids.error());
  return RowIo{*pool, std::move(*ids)};
}

// ---- viewer -------------------------------------------------------------------------

Task<Result<RowSet>> RunViewer(const TaskContext& ctx, std::vector<RowSet>) {
  auto pool = PoolFor(ctx);
  if (!pool) co_return Fail(pool.error());
  RedisClient& p = **pool;
  RedisCommand cmd{"HGETALL"};
  cmd.Key(p.prefix(), "user:", ctx.user_id);
  std::vector<RedisCommand> cmds;
  cmds.push_back(std::move(cmd));
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return ViewerRows(SourceOf(p), ctx.user_id, replies->at(0));
}

// ---- follow, recommendation, media: one LRANGE per input row --------------------------

// LRANGE {kind}{id} 0 count-1 for every input id.
Task<Result<Expanded>> ExpandLists(const TaskContext& ctx, const RowSet& in, std::string_view kind,
                                   int64_t count) {
  auto io = StartRowIo(ctx, in);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const InputIds* ids = &io->ids;
  std::vector<RedisCommand> cmds;
  cmds.reserve(ids->ids.size());
  for (int64_t id : ids->ids) {
    RedisCommand c{"LRANGE"};
    c.Key(p.prefix(), kind, id).Arg(int64_t{0}).Arg(count - 1);
    cmds.push_back(std::move(c));
  }
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return ExpandedLists(SourceOf(p), kind, ids->ids, *replies);
}

RowSet IdRows(std::vector<int64_t> ids) {
  RowSet out;
  out.SetColumn("id", std::make_shared<const Column>(Column::I64(std::move(ids))));
  return out;
}

// follow and recommendation: the members of each input row's list, as ids.
Task<Result<RowSet>> RunList(const TaskContext& ctx, std::vector<RowSet> in, std::string kind) {
  auto e = co_await ExpandLists(ctx, in.at(0), kind, ctx.args->I64("fanout"));
  if (!e) co_return Fail(e.error());
  co_return IdRows(std::move(e->ids));
}

Task<Result<RowSet>> RunMedia(const TaskContext& ctx, std::vector<RowSet> in) {
  auto e = co_await ExpandLists(ctx, in.at(0), "media:", ctx.args->I64("per_author"));
  if (!e) co_return Fail(e.error());
  RowSet out = IdRows(std::move(e->ids));
  out.SetColumn("author", std::make_shared<const Column>(Column::I64(std::move(e->from))));
  co_return out;
}

// ---- features: one HMGET per distinct id -------------------------------------------

Task<Result<RowSet>> RunFeatures(const TaskContext& ctx, std::vector<RowSet> in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const InputIds* ids = &io->ids;
  const auto& fields = ctx.args->StrList("fields");
  // Candidates often repeat an item (before a dedupe, or from several sources): ask
  // once per distinct id and give every row with that id the same reply.
  std::vector<uint32_t> reply_of(ids->ids.size());
  std::vector<int64_t> asked;
  std::unordered_map<int64_t, uint32_t> index;
  index.reserve(ids->ids.size());
  std::vector<RedisCommand> cmds;
  cmds.reserve(ids->ids.size());
  for (size_t i = 0; i < ids->ids.size(); ++i) {
    int64_t id = ids->ids[i];
    auto [it, fresh] = index.try_emplace(id, static_cast<uint32_t>(asked.size()));
    reply_of[i] = it->second;
    if (!fresh) continue;
    asked.push_back(id);
    RedisCommand c{"HMGET"};
    c.Key(p.prefix(), "item:", id);
    for (const auto& f : fields) c.Arg(f);
    cmds.push_back(std::move(c));
  }
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return FeatureRows(SourceOf(p), input, *ids, reply_of, asked, fields, *replies);
}

// ---- seen_filter: one SMISMEMBER for all rows ---------------------------------------

Task<Result<RowSet>> RunSeenFilter(const TaskContext& ctx, std::vector<RowSet> in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const InputIds* ids = &io->ids;
  if (ids->ids.empty()) co_return input;
  RedisCommand c{"SMISMEMBER"};
  c.Key(p.prefix(), "seen:", ctx.user_id);
  for (int64_t id : ids->ids) c.Arg(id);
  std::vector<RedisCommand> cmds;
  cmds.push_back(std::move(c));
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return SeenFilterRows(SourceOf(p), ctx.user_id, input, *ids, replies->at(0));
}

}  // namespace

void RegisterIoTaskRuns(TaskRegistry& r) {
  r.SetAsyncRun("viewer", &RunViewer);
  r.SetAsyncRun("follow", [](const TaskContext& ctx, std::vector<RowSet> in) {
    return RunList(ctx, std::move(in), "follow:");
  });
  r.SetAsyncRun("recommendation", [](const TaskContext& ctx, std::vector<RowSet> in) {
    return RunList(ctx, std::move(in), "recs:");
  });
  r.SetAsyncRun("media", &RunMedia);
  r.SetAsyncRun("features", &RunFeatures);
  r.SetAsyncRun("seen_filter", &RunSeenFilter);
}

}  // namespace rankd
