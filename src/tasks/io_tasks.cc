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
// A node with `cache: true` in a process with a cache (docs/cache.md) first looks its
// keys up in the shard's cache, copies what it found (the cache may change while the
// batch is out), and sends commands only for the keys it missed, still as one batch.
// When the endpoint's tracking is ready it also asks each missed key's PTTL and stores
// what came back, unless an invalidation of that key arrived meanwhile (ReadTicket).
//
// Threads: runs execute on the request's loop thread, the thread that owns ctx.redis
// and ctx.cache.
#include <uv.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/shard_cache.h"
#include "core/distinct_keys.h"
#include "redis/pools.h"
#include "tasks/io_replies.h"
#include "tasks/schemas.h"
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
  return {pool.endpoint().name, pool.prefix(), &pool.endpoint(), &pool.mutable_stats()};
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

// The members' ids of each input row's list, and for each the input id it came from.
struct Expanded {
  PoolVector<int64_t> ids;
  PoolVector<int64_t> from;
};

// ---- the cache ----------------------------------------------------------------------

// How a node reads through the shard's cache; inactive (cache == nullptr) when the node
// does not cache or the process has no cache.
struct CacheUse {
  ShardCache* cache = nullptr;
  uint16_t endpoint = 0;
  bool store = false;  // the endpoint's tracking is ready: reads may be stored
  CacheLookups* lookups = nullptr;

  explicit operator bool() const { return cache != nullptr; }
  CacheKey Key(CacheKind kind, int64_t id) const { return {endpoint, kind, id}; }
  void Record(uint64_t hits, uint64_t misses) const {
    cache->RecordLookups(hits, misses);
    if (lookups) lookups->hits += hits, lookups->misses += misses;
  }
  // Starts the read of `keys` (stored later if nothing invalidated them meanwhile).
  ReadTicket Begin(std::span<const CacheKey> keys) const {
    return store ? cache->BeginRead(keys) : ReadTicket{};
  }
};

CacheUse CacheFor(const TaskContext& ctx, RedisClient& pool) {
  CacheUse u;
  if (ctx.cache == nullptr || ctx.cache->budget_bytes() == 0 || !ctx.args->Bool("cache")) return u;
  int index = ctx.redis->IndexOf(ctx.args->Str("endpoint"));
  if (index < 0) return u;
  u.cache = ctx.cache;
  u.endpoint = static_cast<uint16_t>(index);
  u.store = pool.tracking_ready();
  u.lookups = ctx.cache_lookups;
  if (u.lookups) u.lookups->used = true;
  return u;
}

// The key's remaining TTL from a PTTL reply, when it has one, counted from when the
// batch was sent (Redis's clock started before the reply reached us): the entry then
// expires no later than the key.
std::optional<uint64_t> KeyTtl(RespView pttl, uint64_t sent_ms) {
  if (!pttl.is_integer() || pttl.integer() < 0) return std::nullopt;
  uint64_t elapsed = uv_hrtime() / 1000000 - sent_ms;
  auto ttl = static_cast<uint64_t>(pttl.integer());
  return ttl > elapsed ? ttl - elapsed : 0;
}

uint64_t NowMs() { return uv_hrtime() / 1000000; }

// ---- viewer -------------------------------------------------------------------------

Task<Result<RowSet>> RunViewer(const TaskContext& ctx, RowSets) {
  auto pool = PoolFor(ctx);
  if (!pool) co_return Fail(pool.error());
  RedisClient& p = **pool;
  ReplySource src = SourceOf(p);
  CacheUse cu = CacheFor(ctx, p);
  const CacheKey key = cu.Key(CacheKind::kUser, ctx.user_id);
  if (cu) {
    if (HashRef h = cu.cache->FindHash(key)) {
      cu.Record(1, 0);
      co_return UserRows(src, ctx.user_id, h.ToHash());
    }
    cu.Record(0, 1);
  }
  ReadTicket ticket = cu ? cu.Begin(std::span<const CacheKey>(&key, 1)) : ReadTicket{};
  RedisCommands cmds;
  cmds.Add(2).Arg("HGETALL").Key(p.prefix(), "user:", ctx.user_id);
  if (cu.store) cmds.Add(2).Arg("PTTL").Key(p.prefix(), "user:", ctx.user_id);
  const uint64_t sent_ms = NowMs();
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  auto user = DecodeUser(src, ctx.user_id, (*replies)[0]);
  if (!user) co_return Fail(std::move(user.error()));
  RowSet rows = UserRows(src, ctx.user_id, *user);
  if (cu.store && ticket.Storable(key))
    cu.cache->PutHash(ticket, key, std::move(*user), KeyTtl((*replies)[1], sent_ms));
  co_return rows;
}

// ---- follow, recommendation, media: one LRANGE per input row --------------------------

// LRANGE {kind}{id} 0 count-1 for every input id (from the cache where it holds one).
Task<Result<Expanded>> ExpandLists(const TaskContext& ctx, const RowSet& in, CacheKind kind,
                                   int64_t count) {
  auto io = StartRowIo(ctx, in);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const std::vector<int64_t>& ids = io->ids.ids;
  const std::string_view prefix = CacheKindPrefix(kind);
  const auto asked = static_cast<uint32_t>(count);
  ReplySource src = SourceOf(p);
  CacheUse cu = CacheFor(ctx, p);

  // Hits are copied out now, into hit_ids[hit_span[i]]; misses go to Redis.
  constexpr uint32_t kMiss = UINT32_MAX;
  std::vector<std::pair<uint32_t, uint32_t>> hit_span(ids.size(), {kMiss, kMiss});
  PoolVector<int64_t> hit_ids;
  std::vector<uint32_t> missed;  // input indexes
  std::vector<CacheKey> keys;    // of the misses
  missed.reserve(ids.size());
  std::vector<ListRef> found;
  if (cu) {
    std::vector<CacheKey> all(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) all[i] = cu.Key(kind, ids[i]);
    found.resize(ids.size());
    cu.cache->FindLists(all, found);
    keys = std::move(all);  // the misses' keys, compacted below
  }
  size_t nkeys = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (cu) {
      if (ListRef l = found[i]; l && l.Covers(asked)) {
        auto begin = static_cast<uint32_t>(hit_ids.size());
        AppendListIds(l, asked, hit_ids);
        hit_span[i] = {begin, static_cast<uint32_t>(hit_ids.size())};
        continue;
      }
      keys[nkeys++] = keys[i];
    }
    missed.push_back(static_cast<uint32_t>(i));
  }
  keys.resize(nkeys);
  if (cu) cu.Record(ids.size() - missed.size(), missed.size());
  ReadTicket ticket = cu ? cu.Begin(keys) : ReadTicket{};
  const size_t per = cu.store ? 2 : 1;  // LRANGE (+ PTTL)
  RedisCommands cmds;
  cmds.Reserve(missed.size() * per, missed.size() * per * (48 + p.prefix().size()));
  for (uint32_t i : missed) {
    cmds.Add(4).Arg("LRANGE").Key(p.prefix(), prefix, ids[i]).Arg(int64_t{0}).Arg(count - 1);
    if (cu.store) cmds.Add(2).Arg("PTTL").Key(p.prefix(), prefix, ids[i]);
  }
  RespReplies replies;
  const uint64_t sent_ms = NowMs();
  if (!cmds.empty()) {
    auto r = co_await p.Batch(std::move(cmds), ctx.deadline);
    if (!r)
      co_return Fail(std::move(r.error()));  // names the endpoint; the scheduler adds the node
    replies = std::move(*r);
  }
  // Lists that go to the cache are decoded into entries; the others straight into ids.
  std::vector<CachedList> lists;
  if (cu.store) {
    lists.reserve(missed.size());
    for (size_t m = 0; m < missed.size(); ++m) {
      auto l = DecodeList(src, prefix, ids[missed[m]], asked, replies[m * per]);
      if (!l) co_return Fail(std::move(l.error()));
      lists.push_back(std::move(*l));
    }
  }
  Expanded out;
  size_t m = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (hit_span[i].first != kMiss) {
      out.ids.insert(out.ids.end(), hit_ids.begin() + hit_span[i].first,
                     hit_ids.begin() + hit_span[i].second);
    } else if (cu.store) {
      AppendListIds(lists[m++], asked, out.ids);
    } else {
      auto ok = AppendListIds(src, prefix, ids[i], asked, replies[m++ * per], out.ids);
      if (!ok) co_return Fail(std::move(ok.error()));
    }
    out.from.resize(out.ids.size(), ids[i]);
  }
  if (cu.store) {
    for (size_t k = 0; k < missed.size(); ++k)
      if (ticket.Storable(keys[k]))
        cu.cache->PutList(ticket, keys[k], std::move(lists[k]),
                          KeyTtl(replies[k * per + 1], sent_ms));
  }
  co_return out;
}

RowSet IdRows(PoolVector<int64_t> ids) {
  RowSet out;
  out.SetColumn("id", Share(Column::I64(std::move(ids))));
  return out;
}

// follow and recommendation: the members of each input row's list, as ids.
Task<Result<RowSet>> RunList(const TaskContext& ctx, RowSets in, CacheKind kind) {
  auto e = co_await ExpandLists(ctx, in.at(0), kind, ctx.args->I64("fanout"));
  if (!e) co_return Fail(e.error());
  co_return IdRows(std::move(e->ids));
}

Task<Result<RowSet>> RunMedia(const TaskContext& ctx, RowSets in) {
  auto e = co_await ExpandLists(ctx, in.at(0), CacheKind::kMedia, ctx.args->I64("per_author"));
  if (!e) co_return Fail(e.error());
  RowSet out = IdRows(std::move(e->ids));
  out.SetColumn("author", Share(Column::I64(std::move(e->from))));
  co_return out;
}

// ---- features: one HMGET per distinct id -------------------------------------------

Task<Result<RowSet>> RunFeatures(const TaskContext& ctx, RowSets in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const InputIds* ids = &io->ids;
  const auto& fields = ctx.args->StrList("fields");
  const size_t nf = fields.size();
  ReplySource src = SourceOf(p);
  CacheUse cu = CacheFor(ctx, p);
  // The fields by their index in the item hash's field list (the cache's), their types
  // and the mask a cached entry must know.
  std::vector<size_t> field_index(nf);
  std::vector<ColumnType> types(nf);
  uint64_t need = 0;
  for (size_t f = 0; f < nf; ++f) {
    field_index[f] = *ItemFieldIndex(fields[f]);
    types[f] = *ItemFieldType(fields[f]);
    need |= uint64_t{1} << field_index[f];
  }
  // Candidates often repeat an item (before a dedupe, or from several sources): look up
  // and ask once per distinct id and give every row with that id the same cells.
  std::vector<uint32_t> reply_of(ids->ids.size());
  std::vector<int64_t> distinct;
  {
    DistinctKeys<int64_t> seen(ids->ids.size());
    for (size_t i = 0; i < ids->ids.size(); ++i) reply_of[i] = seen.Add(ids->ids[i]).index;
    distinct = std::move(seen.keys());
  }
  std::vector<uint32_t> missed;  // indexes into distinct
  std::vector<CacheKey> keys;    // of the misses
  missed.reserve(distinct.size());
  std::vector<HashRef> found;
  if (cu) {
    std::vector<CacheKey> all(distinct.size());
    for (size_t k = 0; k < distinct.size(); ++k) all[k] = cu.Key(CacheKind::kItem, distinct[k]);
    found.resize(distinct.size());
    cu.cache->FindHashes(all, found);
    keys = std::move(all);  // the misses' keys, compacted below
  }
  size_t nkeys = 0;
  for (size_t k = 0; k < distinct.size(); ++k) {
    if (cu) {
      if (HashRef h = found[k]; h && (h.known() & need) == need) continue;
      keys[nkeys++] = keys[k];
    }
    missed.push_back(static_cast<uint32_t>(k));
  }
  keys.resize(nkeys);
  if (cu) cu.Record(distinct.size() - missed.size(), missed.size());
  // Every id hit: the columns are read from the entries (nothing suspends before).
  if (missed.empty() && cu)
    co_return FeatureRows(src, input, *ids, reply_of, fields, found, field_index);
  // cells[k * nf + f]: field f of distinct[k]. The hits are copied in now: the cache may
  // change while the batch is out.
  CachedFields cells;
  cells.resize(distinct.size() * nf);
  for (size_t k = 0, m = 0; k < distinct.size(); ++k) {
    if (m < missed.size() && missed[m] == k) {
      ++m;
      continue;
    }
    for (size_t f = 0; f < nf; ++f) found[k].CopyField(field_index[f], cells, k * nf + f);
  }
  ReadTicket ticket = cu ? cu.Begin(keys) : ReadTicket{};
  const size_t per = cu.store ? 2 : 1;  // HMGET (+ PTTL)
  RedisCommands cmds;
  cmds.Reserve(missed.size() * per, missed.size() * per * (48 + p.prefix().size() + 16 * nf));
  if (!missed.empty()) {
    const RedisCommands::Shape hmget = RedisCommands::MakeShape("HMGET", fields);
    const RedisCommands::Shape pttl = RedisCommands::MakeShape("PTTL", {});
    for (uint32_t k : missed) {
      cmds.Keyed(hmget, p.prefix(), "item:", distinct[k]);
      if (cu.store) cmds.Keyed(pttl, p.prefix(), "item:", distinct[k]);
    }
  }
  if (!cmds.empty()) {
    const uint64_t sent_ms = NowMs();
    auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
    if (!replies)
      co_return Fail(
          std::move(replies.error()));  // names the endpoint; the scheduler adds the node
    for (size_t m = 0; m < missed.size(); ++m) {
      const uint32_t k = missed[m];
      if (auto ok = DecodeItem(src, distinct[k], types, (*replies)[m * per], cells, k * nf); !ok)
        co_return Fail(std::move(ok.error()));
    }
    if (cu.store) {
      for (size_t m = 0; m < missed.size(); ++m) {
        if (!ticket.Storable(keys[m])) continue;
        CachedHash h;
        h.fields.resize(ItemFields().size());
        for (size_t f = 0; f < nf; ++f) h.fields.Set(field_index[f], cells, missed[m] * nf + f);
        h.known = need;
        cu.cache->PutHash(ticket, keys[m], std::move(h), KeyTtl((*replies)[m * per + 1], sent_ms));
      }
    }
  }
  co_return FeatureRows(src, input, *ids, reply_of, fields, cells);
}

// ---- seen_filter: one SMISMEMBER for all rows ---------------------------------------

Task<Result<RowSet>> RunSeenFilter(const TaskContext& ctx, RowSets in) {
  const RowSet& input = in.at(0);
  auto io = StartRowIo(ctx, input);
  if (!io) co_return Fail(io.error());
  RedisClient& p = *io->pool;
  const InputIds* ids = &io->ids;
  if (ids->ids.empty()) co_return input;
  RedisCommands cmds;
  cmds.Reserve(1, 64 + p.prefix().size() + 24 * ids->ids.size());
  cmds.Add(2 + static_cast<int>(ids->ids.size())).Arg("SMISMEMBER");
  cmds.Key(p.prefix(), "seen:", ctx.user_id);
  cmds.Args(ids->ids);
  auto replies = co_await p.Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  co_return SeenFilterRows(SourceOf(p), ctx.user_id, input, *ids, (*replies)[0]);
}

}  // namespace

void RegisterIoTaskRuns(TaskRegistry& r) {
  r.SetAsyncRun("viewer", &RunViewer);
  r.SetAsyncRun("follow", [](const TaskContext& ctx, RowSets in) {
    return RunList(ctx, std::move(in), CacheKind::kFollow);
  });
  r.SetAsyncRun("recommendation", [](const TaskContext& ctx, RowSets in) {
    return RunList(ctx, std::move(in), CacheKind::kRecs);
  });
  r.SetAsyncRun("media", &RunMedia);
  r.SetAsyncRun("features", &RunFeatures);
  r.SetAsyncRun("seen_filter", &RunSeenFilter);
}

}  // namespace rankd
