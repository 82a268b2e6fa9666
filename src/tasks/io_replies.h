// The reply -> rows half of the Redis-backed tasks (io_tasks.cc), kept apart from the IO
// so that it runs without a Redis (tests, tests/fuzz/fuzz_redis_reply.cc).
//
// Replies are read in place (redis/resp.h: a RespView into the batch's RESP bytes, no
// reply tree, no string per value) and decoded into the values the shard's cache holds
// (cache/shard_cache.h: CachedHash, CachedList, CachedField, CachedFields), whether or not the node
// caches, and rows are built from those values: a hit and a fresh reply take the same road.
// Decoding fails with a backend_error naming the command, the key and the endpoint when a reply has
// the wrong shape. Values are parsed strictly: a field that is missing or does not parse
// becomes null and is counted when it reaches a row (fields_missing,
// fields_unparsable); a list member that is not an id is dropped and counted when it is
// decoded (bad_ids).
//
// Threads: any; they touch nothing but their arguments (and `stats`, relaxed atomics).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/shard_cache.h"
#include "core/error.h"
#include "data/row_set.h"
#include "redis/endpoint.h"
#include "redis/resp.h"
#include "redis/stats.h"

namespace rankd {

// Where replies came from, for messages and counters.
// Views into the endpoint, which outlives the request: building one costs nothing.
struct ReplySource {
  std::string_view endpoint;  // the endpoint's configured name: what clients are told
  std::string_view prefix;    // its key prefix
  // Its address and db, for the log only (Error::detail); nullptr: unknown (tests).
  const RedisEndpoint* address;
  RedisStats* stats;  // REQUIRES: non-null
};

// The input's ids in logical order, with the physical row each came from; rows whose id
// is null are skipped (they name no key). Internal error when there is no i64 `id`.
struct InputIds {
  std::vector<int64_t> ids;
  std::vector<uint32_t> rows;
};
Result<InputIds> IdsOf(const RowSet& in);

// ---- decoding ------------------------------------------------------------------------

// One hash field's value as Redis sent it (a bulk string, or nil when missing), typed,
// into cells' field i.
void DecodeField(RespView r, ColumnType type, CachedFields& cells, size_t i);

// HGETALL user:{user_id} -> the user's fields by UserFields() index (all known).
Result<CachedHash> DecodeUser(const ReplySource& src, int64_t user_id, RespView r);

// HMGET item:{id} fields... -> one cell per field (`types[f]` its type), into cells
// first, first + 1, ... REQUIRES: cells.size() >= first + types.size().
Result<void> DecodeItem(const ReplySource& src, int64_t id, std::span<const ColumnType> types,
                        RespView r, CachedFields& cells, size_t first);

// LRANGE {kind}{id} 0 asked-1 -> the list's head.
Result<CachedList> DecodeList(const ReplySource& src, std::string_view kind, int64_t id,
                              uint32_t asked, RespView r);

// ---- rows ----------------------------------------------------------------------------

// viewer: one row (id + typed user fields), or zero rows when the user does not exist.
RowSet UserRows(const ReplySource& src, int64_t user_id, const CachedHash& user);

// The ids of LRANGE 0 count-1 of a list head (its members that are ids: `bad` holds the
// positions of those that are not, ascending; REQUIRES: the head covers count).
void AppendListIds(std::span<const int64_t> members, std::span<const uint32_t> bad, uint32_t count,
                   PoolVector<int64_t>& out);
inline void AppendListIds(ListRef list, uint32_t count, PoolVector<int64_t>& out) {
  AppendListIds(list.members(), list.bad(), count, out);
}
inline void AppendListIds(const CachedList& list, uint32_t count, PoolVector<int64_t>& out) {
  AppendListIds(std::span<const int64_t>(list.members.data(), list.members.size()), list.bad, count,
                out);
}
// The same straight from an LRANGE {kind}{id} 0 asked-1 reply, for a list that is not
// going to the cache: DecodeList then AppendListIds, without the CachedList.
Result<void> AppendListIds(const ReplySource& src, std::string_view kind, int64_t id,
                           uint32_t asked, RespView r, PoolVector<int64_t>& out);

// features: the input plus one typed column per field. `cells` holds, for each distinct
// id k (`reply_of[i]` the k of ids.ids[i]), its fields' cells at [k * fields.size() + f].
// REQUIRES: every field is an item field.
RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   const CachedFields& cells);
// The same from the cache's entries, when every distinct id hit: found[k] is distinct id
// k's entry and field f of the node is the entry's field_index[f]. REQUIRES: the entries
// hold every field asked and the cache has not changed since they were found.
RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const HashRef> found, std::span<const size_t> field_index);

// seen_filter: the SMISMEMBER seen:{user_id} ids... reply -> the input without the seen
// rows (rows with a null id stay).
Result<RowSet> SeenFilterRows(const ReplySource& src, int64_t user_id, const RowSet& input,
                              const InputIds& ids, RespView r);

}  // namespace rankd
