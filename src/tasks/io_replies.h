// The reply -> rows half of the Redis-backed tasks (viewer.cc, lists.cc, features.cc,
// seen_filter.cc, through read_through.h), kept apart from the IO so that it runs without
// a Redis (tests, tests/fuzz/fuzz_redis_reply.cc).
//
// Replies are read in place (redis/resp_replies.h: a RespView into the batch's RESP bytes, no
// reply tree, no string per value) and decoded by the family's declared types
// (plan/schema.h) into the values the shard's cache holds (cache/shard_cache.h:
// CachedHash, CachedList, CachedFields), whether or not the node caches, and rows are
// built from those values: a hit and a fresh reply take the same road. Decoding fails
// with a backend_error naming the command, the key and the endpoint when a reply has the
// wrong shape. Values are parsed strictly: a field that is missing or does not parse
// becomes null and is counted when it reaches a row (missing_field, unparsable_field); a
// json value that is no object, invalid or over 1 MiB nulls the row's fields and is
// counted once when decoded (bad_json), as is a vec value of the wrong length or with a
// non-finite element (bad_vector, the cell null); a member that is no valid id is dropped
// and counted when decoded (bad_id). Counters are the family's (KeyFamily::values).
//
// Threads: any; they touch nothing but their arguments (and the counters, relaxed atomics).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/shard_cache.h"
#include "core/error.h"
#include "data/row_set.h"
#include "events/counter_layout.h"
#include "plan/schema.h"
#include "redis/endpoint.h"
#include "redis/resp_replies.h"

namespace rankd {

// Where replies came from, for messages and counters.
// Views into the endpoint and the plan, which outlive the request: building one costs nothing.
struct ReplySource {
  std::string_view endpoint;  // the endpoint's configured name: what clients are told
  std::string_view prefix;    // its key prefix
  // Its address and db, for the log only (Error::detail); nullptr: unknown (tests).
  const RedisEndpoint* address;
  const KeyFamily* family;  // REQUIRES: non-null
  FamilyValueStats& values() const { return *family->values; }
};

// The largest json value decoded; a larger one is bad_json.
inline constexpr size_t kMaxJsonValue = size_t{1} << 20;

// The input's ids in logical order, with the physical row each came from; rows whose id
// is null are skipped (they name no key), as are str ids that are no valid id
// (ValidStrId: counted as bad_id of `family`). Internal error when there is no `id`.
struct InputIds {
  ColumnType type = ColumnType::kI64;
  std::vector<int64_t> ids;            // kI64
  std::vector<std::string_view> strs;  // kStr: views into the input column's dictionary
  std::vector<uint32_t> rows;
  size_t size() const { return rows.size(); }
  IdRef at(size_t i) const {
    return type == ColumnType::kStr ? IdRef{0, strs[i]} : IdRef{ids[i], {}};
  }
};
Result<InputIds> IdsOf(const RowSet& in, const KeyFamily& family);

// ---- decoding ------------------------------------------------------------------------

// One hash field's value as Redis sent it (a bulk string, or nil when missing), typed,
// into cells' field i. A vec field's value is kept as its bytes (a str cell) when it is
// 4·D bytes of finite float32, else the cell is kBad and counts bad_vector in `stats`.
void DecodeField(RespView r, const SchemaField& field, CachedFields& cells, size_t i,
                 FamilyValueStats& stats);

// HGETALL {key} of a hash family -> every declared field f into cells first + f (missing
// when the hash lacks it); whether the key existed (held any field).
// REQUIRES: cells.size() >= first + the family's field count.
Result<bool> DecodeHashAll(const ReplySource& src, IdRef id, RespView r, CachedFields& cells,
                           size_t first);

// HMGET {key} fields... (hash) or MGET {key} (json) -> one cell per field (`fields[f]`
// the family's field index), into cells first, first + 1, ...
// REQUIRES: cells.size() >= first + fields.size().
Result<void> DecodeFields(const ReplySource& src, IdRef id, std::span<const size_t> fields,
                          RespView r, CachedFields& cells, size_t first);
// The json object `text` -> those fields; a value that is no object nulls them (kBad)
// and counts bad_json. Returns whether it was an object.
bool DecodeJsonFields(const ReplySource& src, std::string_view text, std::span<const size_t> fields,
                      CachedFields& cells, size_t first);

// HMGET {key} <the windows' blocks> of a counters family -> the blocks the windows' fields
// are summed from (CounterWindows::BlocksOfReply), viewing the reply's bytes.
// REQUIRES: blocks.size() == windows.hash_fields().size().
Result<void> DecodeCounters(const ReplySource& src, IdRef id, const CounterWindows& windows,
                            RespView r, std::span<RingBlock> blocks);

// LRANGE {key} 0 asked-1, or ZRANGE {key} 0 asked-1 REV [WITHSCORES] for a zset family
// (`scores`: the reply has WITHSCORES pairs, and the scores are kept) -> the head, its
// members typed by the family's members type.
Result<CachedList> DecodeList(const ReplySource& src, IdRef id, uint32_t asked, bool scores,
                              RespView r);

// ---- rows ----------------------------------------------------------------------------

// viewer: one row (id + the fields `fields`, family indexes, read from cells at those
// indexes), or zero rows when the key does not exist.
RowSet ViewerRows(const ReplySource& src, IdRef id, std::span<const size_t> fields, bool exists,
                  const CachedFields& cells);

// The members of list heads, appended for LRANGE 0 count-1: ids (or strings), their
// scores (when asked: null for a non-finite score), and the input index each came from.
struct ListRows {
  PoolVector<int64_t> ids;
  std::string str_bytes;       // str members' bytes
  std::vector<uint64_t> strs;  // str member i: offset << 32 | length in str_bytes
  PoolVector<double> scores;
  PoolVector<uint8_t> score_valid;
  // Rows [previous head's end, end) came from input index `input`; kept only when
  // with_from (media's source_as column).
  struct Head {
    uint32_t end;
    uint32_t input;
  };
  std::vector<Head> heads;
  bool with_from = true;

  size_t size() const { return strs.empty() ? ids.size() : strs.size(); }
  std::string_view str(size_t i) const {
    return std::string_view(str_bytes).substr(strs[i] >> 32, strs[i] & 0xffffffffu);
  }
  void AddStr(std::string_view s) {
    strs.push_back((uint64_t{str_bytes.size()} << 32) | s.size());
    str_bytes.append(s);
  }
  // The rows appended since the last call came from input index `input` (with_from).
  void FromUpTo(uint32_t input) {
    if (with_from) heads.push_back({static_cast<uint32_t>(size()), input});
  }
  // Rows [b, e) of `o`, as coming from input index `from`.
  void AppendRange(const ListRows& o, size_t b, size_t e, uint32_t from);
};
// A head's bad positions are skipped; `scores`: append its scores too.
void AppendList(const CachedList& list, uint32_t count, uint32_t from, bool scores, ListRows& out);
void AppendList(ListRef list, uint32_t count, uint32_t from, bool scores, ListRows& out);
// The same straight from an LRANGE / ZRANGE reply of the family, for a head that is not
// going to the cache: DecodeList then AppendList, without the CachedList.
Result<void> AppendList(const ReplySource& src, IdRef id, uint32_t count, uint32_t from,
                        bool scores, RespView r, ListRows& out);

// features: the input plus one typed column per field (the node's field f is the family's
// field_index[f], named fields[f]). `cells` holds, for each distinct id k (`reply_of[i]`
// the k of the i-th input id), its fields' cells at [k * fields.size() + f].
RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const size_t> field_index, const CachedFields& cells);
// The same from the cache's entries, when every distinct id hit: found[k] is distinct id
// k's entry. REQUIRES: the entries hold every field asked and the cache has not changed
// since they were found.
RowSet FeatureRows(const ReplySource& src, const RowSet& input, const InputIds& ids,
                   std::span<const uint32_t> reply_of, const std::vector<std::string>& fields,
                   std::span<const size_t> field_index, std::span<const HashRef> found);

// How seen_filter reads its reply: SMISMEMBER's of a set family (1: seen), or ZMSCORE's of
// a zset family (a score: seen; with `after_ms`, only a score above it).
struct SeenReply {
  bool zset = false;
  std::optional<double> after_ms;  // zset only: members scored at or before it are not seen
};

// seen_filter: the SMISMEMBER (or ZMSCORE) {key of user_id} ids... reply -> the input
// without the seen rows (rows with a null id stay).
Result<RowSet> SeenFilterRows(const ReplySource& src, IdRef user_id, const RowSet& input,
                              const InputIds& ids, RespView r, SeenReply how = {});

}  // namespace rankd
