// seen_filter: the input without the rows whose id is a member of the viewer's set, or of
// its zset (with within_s: scored, in Unix ms, within the last within_s seconds of the
// request's time). One SMISMEMBER or ZMSCORE for all rows; never cached.
// Threads: the run executes on the request's loop thread.
#include "tasks/read_through.h"
#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

namespace {

Result<ColumnTypes> SeenFilterSchema(const SchemaArgs& a) {
  if (auto ok =
          NeedType(a, {FamilyType::kSet, FamilyType::kZset}, "seen_filter reads a set or a zset");
      !ok)
    return Fail(ok.error());
  if (a.args.I64("within_s") > 0 && a.family->type != FamilyType::kZset)
    return Fail(Error::BadRequest("params.within_s: needs a zset family (scored by time), but " +
                                  Types(*a.family) + " is not one"));
  if (auto ok = NeedInputIds(a, a.family->members_type, "holds"); !ok) return Fail(ok.error());
  return a.inputs[0];
}

Coro<Result<RowSet>> RunSeenFilter(const TaskContext& ctx, RowSets in) {
  const RowSet& input = in.at(0);
  auto io = StartIo(ctx, false);
  if (!io) co_return Fail(io.error());
  auto ids = IdsOf(input, *io->family);
  if (!ids) co_return Fail(ids.error());
  if (ids->size() == 0) co_return input;
  const IdRef user = ctx.user_id;
  RedisCommands cmds;
  size_t bytes = 64 + io->pool->prefix().size() + io->key.before.size() + io->key.after.size() +
                 user.str.size();
  for (std::string_view s : ids->strs) bytes += 16 + s.size();
  cmds.Reserve(1, bytes + 24 * ids->ids.size());
  SeenReply how;
  how.zset = io->family->type == FamilyType::kZset;
  if (int64_t within_s = ctx.args->I64("within_s"); within_s > 0)
    how.after_ms = static_cast<double>(ctx.now_ms - within_s * 1000);
  cmds.Add(2 + static_cast<int>(ids->size())).Arg(how.zset ? "ZMSCORE" : "SMISMEMBER");
  io->AddKey(cmds, user);
  if (ids->type == ColumnType::kI64)
    cmds.Args(ids->ids);
  else
    cmds.Args(std::span<const std::string_view>(ids->strs));
  auto replies = co_await io->pool->Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return SeenFilterRows(io->src, user, input, *ids, (*replies)[0], how);
}

}  // namespace

void RegisterOps_seen_filter(TaskRegistry& r) {
  // Ten years: a bound that keeps within_s * 1000 far from overflow.
  TaskParamSpec within_s =
      TaskParamSpec::Optional("within_s", ParamKind::kI64, int64_t{0}).Bounds(0, 315360000);
  r.Add(TaskSpec::Async("seen_filter", 1, 1, {Endpoint(), FamilyParam("seen"), std::move(within_s)},
                        &SeenFilterSchema, &RunSeenFilter)
            .Doc("The input without the rows whose id the viewer has seen: a member of the "
                 "user_id's set, or of its zset (with within_s > 0, scored in Unix ms within the "
                 "last within_s seconds of the request's time).")
            .Reads({FamilyType::kSet, FamilyType::kZset}, /*by_user=*/true));
}

}  // namespace rankd
