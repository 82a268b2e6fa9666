// The reply -> rows half of the Redis-backed tasks (io_tasks.cc), kept apart from the IO
// so that it runs without a Redis (tests, tests/fuzz/fuzz_redis_reply.cc): each function
// takes the replies of one batch, in command order, and builds the task's output, or a
// backend_error naming the command, the key and the endpoint when a reply has the wrong
// shape. Values are parsed strictly: a field that is missing or does not parse becomes
// null and is counted (fields_missing, fields_unparsable); a list member that is not an
// id is dropped and counted (bad_ids).
//
// Threads: any; they touch nothing but their arguments (and `stats`, relaxed atomics).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/row_set.h"
#include "redis/reply.h"
#include "redis/stats.h"

namespace rankd {

// Where replies came from, for messages and counters.
struct ReplySource {
  std::string endpoint;  // the endpoint's configured name: what clients are told
  std::string label;     // its address and db: for the log only (Error::detail)
  std::string prefix;    // its key prefix
  RedisStats* stats;     // REQUIRES: non-null
};

// The input's ids in logical order, with the physical row each came from; rows whose id
// is null are skipped (they name no key). Internal error when there is no i64 `id`.
struct InputIds {
  std::vector<int64_t> ids;
  std::vector<uint32_t> rows;
};
Result<InputIds> IdsOf(const RowSet& in);

// viewer: the HGETALL user:{user_id} reply -> one row (id + typed user fields), or zero
// rows when the user is missing.
Result<RowSet> ViewerRows(const ReplySource& src, int64_t user_id, const RedisReply& r);

// follow / recommendation / media: LRANGE {kind}{id} replies, one per id -> the members'
// ids, and for each the input id it came from.
struct Expanded {
  std::vector<int64_t> ids;
  std::vector<int64_t> from;
};
Result<Expanded> ExpandedLists(const ReplySource& src, std::string_view kind,
                               std::span<const int64_t> ids, std::span<const RedisReply> replies);

// features: HMGET item:{asked[k]} fields... replies (one per distinct id, `reply_of[i]`
// the reply of ids.ids[i]) -> the input plus one typed column per field.
// REQUIRES: every field is an item field; reply_of[i] < asked.size() == replies.size().
Result<RowSet> FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                           std::span<const uint32_t> reply_of, std::span<const int64_t> asked,
                           const std::vector<std::string>& fields,
                           std::span<const RedisReply> replies);

// seen_filter: the SMISMEMBER seen:{user_id} ids... reply -> the input without the seen
// rows (rows with a null id stay).
Result<RowSet> SeenFilterRows(const ReplySource& src, int64_t user_id, const RowSet& input,
                              const InputIds& ids, const RedisReply& r);

}  // namespace rankd
