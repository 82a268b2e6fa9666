// Runs of the Redis-backed tasks (viewer, follow, recommendation, media, features,
// seen_filter); their specs are in io_specs.cc. Owner: the Redis engineer.
//
// Shape: for each op, r.SetAsyncRun("op", fn) with
//   fn(const TaskContext& ctx, std::vector<RowSet> inputs) -> Task<Result<RowSet>>
// ctx.redis, ctx.args (ctx.args->Str("endpoint"), ->I64("fanout"), ->StrList("fields")),
// ctx.user_id and ctx.deadline are valid until the returned task finishes.
#include "tasks/task.h"

namespace rankd {

void RegisterIoTaskRuns(TaskRegistry&) {
  // Not built yet: io_specs.cc installed runs that answer `unavailable`.
}

}  // namespace rankd
