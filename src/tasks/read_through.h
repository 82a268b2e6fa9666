// Reading a schema family through the shard's cache: what every Redis-backed op
// (viewer.cc, lists.cc, features.cc, seen_filter.cc) shares.
//
// Every node reads one schema family (plan/schema.h) through one mechanism, ReadHashes
// for hash and json families, ReadLists for list and zset families and ReadCounters for
// counters families: look the keys up in the shard's cache (a node with `cache: true` in
// a process with a cache), send one pipelined batch for the misses (one write, one round
// trip however many rows), decode the replies by the family's declared types
// (io_replies.h), store what was read. Hits are copied out before the batch is sent (the
// cache may change while it is out). When the endpoint's tracking is ready each missed
// key's PTTL is asked too and the value is stored, unless an invalidation of that key
// arrived meanwhile (ReadTicket). A counters family is cached only with its `cache_ms`,
// untracked: its entries are its keys' ring fields as read, kept cache_ms (docs/cache.md).
//
// Error replies (WRONGTYPE) and replies of the wrong type become backend_error (the key
// and the Redis text in the error's detail, for the log); a lost or refused connection
// is unavailable; the node's deadline is the batch's.
//
// Threads: the request's loop thread, the thread that owns ctx.redis and ctx.cache.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/shard_cache.h"
#include "redis/shard_clients.h"
#include "tasks/io_replies.h"
#include "tasks/task.h"

namespace rankd {

// How a node reads through the shard's cache; inactive (cache == nullptr) when the node
// does not cache or the process has no cache.
struct CacheUse {
  ShardCache* cache = nullptr;
  uint16_t endpoint = 0;
  uint32_t family = 0;
  bool store = false;  // the endpoint's tracking is ready: reads may be stored
  CacheLookups* lookups = nullptr;

  explicit operator bool() const { return cache != nullptr; }
  CacheKey Key(IdRef id, bool str) const {
    return {endpoint, family, str ? StrIdKey(id.str) : id.num};
  }
  void Record(uint64_t hits, uint64_t misses) const {
    cache->RecordLookups(hits, misses);
    if (lookups) lookups->hits += hits, lookups->misses += misses;
  }
  // Starts the read of `keys` (stored later if nothing invalidated them meanwhile).
  ReadTicket Begin(std::span<const CacheKey> keys) const {
    return store ? cache->BeginRead(keys) : ReadTicket{};
  }
};

// What every node starts with: the pool of its `endpoint`, its family, and how it uses
// the cache.
struct FamilyIo {
  RedisClient* pool = nullptr;
  const KeyFamily* family = nullptr;
  ReplySource src;
  KeyTemplate key;
  CacheUse cu;
  bool str_ids() const { return family->id_type == ColumnType::kStr; }
  CacheKey CacheKeyOf(IdRef id) const { return cu.Key(id, str_ids()); }
  // The key of `id` as one argument of the current command.
  void AddKey(RedisCommands& cmds, IdRef id) const {
    if (str_ids())
      cmds.Key(pool->prefix(), key, id.str);
    else
      cmds.Key(pool->prefix(), key, id.num);
  }
  void AddKeyed(RedisCommands& cmds, const RedisCommands::Shape& shape, IdRef id) const {
    if (str_ids())
      cmds.Keyed(shape, pool->prefix(), key, id.str);
    else
      cmds.Keyed(shape, pool->prefix(), key, id.num);
  }
};

// `cacheable`: whether the node may use the cache at all (a features node asking a field
// the cache cannot hold may not).
Result<FamilyIo> StartIo(const TaskContext& ctx, bool cacheable = true);

// The distinct ids of `ids` (candidates often repeat an item: before a dedupe, or from
// several sources): each is looked up and asked once, and every row with that id gets the
// same cells. reply_of[i]: the distinct index of ids.at(i).
struct Distinct {
  std::vector<IdRef> ids;
  std::vector<uint32_t> reply_of;
};
Distinct DistinctIds(const InputIds& ids);

// What ReadHashes read: for distinct id k, fields[f] in cells[k * nf + f] and whether its
// key exists; or, when every id hit (all_hit), the cache's entries themselves in `found`.
struct HashReads {
  CachedFields cells;
  std::vector<uint8_t> exists;
  std::vector<HashRef> found;
  bool all_hit = false;
};

// Reads `fields` (the family's field indexes) of every id of `ids`: HMGET for a hash
// family, MGET for a json one; `whole`: the viewer's read of every declared field of one
// key (HGETALL for a hash, so that a key without fields is told from a missing one).
Coro<Result<HashReads>> ReadHashes(const TaskContext& ctx, const FamilyIo& io,
                                   std::span<const IdRef> ids, std::span<const size_t> fields,
                                   bool whole);

// The values of `fields` (the family's field indexes: sums and rates) of every id of `ids`
// at the request's time (ctx.now_ms), for distinct id k at cells[k * fields.size() + f]:
// one HMGET of the windows' blocks per id (events/counter_layout.h), one batch. With the
// cache, an id whose entry (read at most cache_ms ago) holds the blocks of these windows
// is summed from it; a read to be stored asks the blocks of every field of the family.
// REQUIRES: io.family is a counters family.
Coro<Result<CachedFields>> ReadCounters(const TaskContext& ctx, const FamilyIo& io,
                                        std::span<const IdRef> ids, std::span<const size_t> fields);

// Whether a node's fields can be held by the cache (CacheEntry::kMaxFields).
bool CacheableFields(std::span<const size_t> fields);

// The head of every input id's list or zset (from the cache where it holds one),
// appended in input order.
Coro<Result<ListRows>> ReadLists(const TaskContext& ctx, const FamilyIo& io, const InputIds& ids,
                                 int64_t count, bool scores, bool with_from);

// The members of `rows` as an id column of `type` (the family's members type).
ColumnPtr IdColumn(ListRows& rows, ColumnType type);

}  // namespace rankd
