// read_through.h: reading a schema family through the shard's cache.
#include "tasks/read_through.h"

#include <uv.h>

#include <algorithm>
#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/distinct_keys.h"
#include "data/column_builder.h"

namespace rankd {

namespace {

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

// The ids a read must ask Redis for (indexes, ascending) and, with the cache, their
// cache keys in the same order.
struct Misses {
  std::vector<uint32_t> at;
  std::vector<CacheKey> keys;
};

// Without the cache every id is a miss. With it: asks it for the keys of ids 0..n-1
// (`id_at(i)`) through `find(keys)`, then keeps the ids `served(i)` says it cannot
// serve, and counts hits and misses.
template <class IdAt, class Find, class Served>
Misses FindInCache(const FamilyIo& io, size_t n, IdAt id_at, Find find, Served served) {
  Misses m;
  m.at.reserve(n);
  if (!io.cu) {
    for (size_t i = 0; i < n; ++i) m.at.push_back(static_cast<uint32_t>(i));
    return m;
  }
  m.keys.resize(n);
  for (size_t i = 0; i < n; ++i) m.keys[i] = io.CacheKeyOf(id_at(i));
  find(std::span<const CacheKey>(m.keys));
  size_t nkeys = 0;  // the misses' keys, compacted in place
  for (size_t i = 0; i < n; ++i) {
    if (served(i)) continue;
    m.keys[nkeys++] = m.keys[i];
    m.at.push_back(static_cast<uint32_t>(i));
  }
  m.keys.resize(nkeys);
  io.cu.Record(n - m.at.size(), m.at.size());
  return m;
}

// HMGET (MGET for json; HGETALL for a hash when `whole`) of every missed id, each
// followed by its PTTL when the read will be stored.
RedisCommands HashCommands(const FamilyIo& io, std::span<const IdRef> ids,
                           std::span<const uint32_t> missed, std::span<const size_t> fields,
                           bool whole) {
  const bool json = io.family->type == FamilyType::kJson;
  const size_t per = io.cu.store ? 2 : 1;
  RedisCommands cmds;
  cmds.Reserve(missed.size() * per, missed.size() * per *
                                        (48 + io.pool->prefix().size() + io.key.before.size() +
                                         io.key.after.size() + (json ? 0 : 16 * fields.size())));
  if (missed.empty()) return cmds;
  std::vector<std::string> names;
  if (!json && !whole)
    for (size_t f : fields) names.push_back(io.family->fields[f].name);
  const RedisCommands::Shape read = RedisCommands::MakeShape(json    ? "MGET"
                                                             : whole ? "HGETALL"
                                                                     : "HMGET",
                                                             names);
  const RedisCommands::Shape pttl =
      io.cu.store ? RedisCommands::MakeShape("PTTL", {}) : RedisCommands::Shape{};
  for (uint32_t k : missed) {
    io.AddKeyed(cmds, read, ids[k]);
    if (io.cu.store) io.AddKeyed(cmds, pttl, ids[k]);
  }
  return cmds;
}

// Stores what was read of each missed id that nothing invalidated meanwhile.
void StoreHashes(const CacheUse& cu, const ReadTicket& ticket, const Misses& missed,
                 std::span<const size_t> fields, uint64_t need, const HashReads& out,
                 const RespReplies& replies, uint64_t sent_ms) {
  const size_t nf = fields.size();
  for (size_t m = 0; m < missed.at.size(); ++m) {
    if (!ticket.Storable(missed.keys[m])) continue;
    const uint32_t k = missed.at[m];
    CachedHash h;
    h.exists = out.exists[k] != 0;
    h.fields.resize(nf == 0 ? 0 : *std::max_element(fields.begin(), fields.end()) + 1);
    for (size_t f = 0; f < nf; ++f) h.fields.Set(fields[f], out.cells, k * nf + f);
    h.known = need;
    cu.cache->PutHash(ticket, missed.keys[m], std::move(h), KeyTtl(replies[m * 2 + 1], sent_ms));
  }
}

// LRANGE {key} 0 count-1 (ZRANGE {key} 0 count-1 REV, WITHSCORES when `read_scores`,
// for a zset) of every missed input id, each followed by its PTTL when the read will be
// stored.
RedisCommands ListCommands(const FamilyIo& io, const InputIds& ids,
                           std::span<const uint32_t> missed, int64_t count, bool read_scores) {
  const bool zset = io.family->type == FamilyType::kZset;
  const size_t per = io.cu.store ? 2 : 1;
  RedisCommands cmds;
  cmds.Reserve(missed.size() * per,
               missed.size() * per *
                   (64 + io.pool->prefix().size() + io.key.before.size() + io.key.after.size()));
  for (uint32_t i : missed) {
    const IdRef id = ids.at(i);
    if (zset) {
      cmds.Add(read_scores ? 6 : 5).Arg("ZRANGE");
      io.AddKey(cmds, id);
      cmds.Arg(int64_t{0}).Arg(count - 1).Arg("REV");
      if (read_scores) cmds.Arg("WITHSCORES");
    } else {
      cmds.Add(4).Arg("LRANGE");
      io.AddKey(cmds, id);
      cmds.Arg(int64_t{0}).Arg(count - 1);
    }
    if (io.cu.store) {
      cmds.Add(2).Arg("PTTL");
      io.AddKey(cmds, id);
    }
  }
  return cmds;
}

}  // namespace

// `cacheable`: whether the node may use the cache at all (a features node asking a field
// the cache cannot hold may not).
Result<FamilyIo> StartIo(const TaskContext& ctx, bool cacheable) {
  const std::string& name = ctx.args->Str("endpoint");
  if (ctx.redis == nullptr)
    return Fail(Error::Unavailable("no Redis is configured in this process"));
  RedisClient* pool = ctx.redis->Get(name);
  if (pool == nullptr)
    return Fail(Error::Unavailable("redis endpoint '" + name +
                                   "' is not configured (see --redis NAME=URL)"));
  FamilyIo io;
  io.pool = pool;
  io.family = ctx.node->family;
  io.src = {pool->endpoint().name, pool->prefix(), &pool->endpoint(), io.family};
  io.key = io.family->key_template();
  // `cacheable` is false for the ops without a `cache` param (seen_filter).
  if (cacheable && ctx.cache != nullptr && ctx.cache->budget_bytes() != 0 &&
      io.family->cacheable() && ctx.args->Bool("cache")) {
    int index = ctx.redis->IndexOf(name);
    if (index >= 0) {
      io.cu.cache = ctx.cache;
      io.cu.endpoint = static_cast<uint16_t>(index);
      io.cu.family = io.family->cache_id;
      // A counters family's entries bound their own age (cache_ms) and need no tracking.
      io.cu.store = pool->tracking_ready() || !io.family->tracked();
      io.cu.lookups = ctx.cache_lookups;
      if (io.cu.lookups) io.cu.lookups->used = true;
    }
  }
  return io;
}

Distinct DistinctIds(const InputIds& ids) {
  Distinct d;
  d.reply_of.resize(ids.size());
  if (ids.type == ColumnType::kI64) {
    DistinctKeys<int64_t> seen(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) d.reply_of[i] = seen.Add(ids.ids[i]).index;
    d.ids.reserve(seen.keys().size());
    for (int64_t v : seen.keys()) d.ids.push_back({v, {}});
    return d;
  }
  DistinctStrings seen(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) d.reply_of[i] = seen.Add(ids.strs[i]).index;
  d.ids.reserve(seen.keys().size());
  for (std::string_view s : seen.keys()) d.ids.push_back({0, s});
  return d;
}

// Reads `fields` (the family's field indexes) of every id of `ids`: HMGET for a hash
// family, MGET for a json one; `whole`: the viewer's read of every declared field of one
// key (HGETALL for a hash, so that a key without fields is told from a missing one).
Coro<Result<HashReads>> ReadHashes(const TaskContext& ctx, const FamilyIo& io,
                                   std::span<const IdRef> ids, std::span<const size_t> fields,
                                   bool whole) {
  const CacheUse& cu = io.cu;
  const size_t nf = fields.size();
  const bool json = io.family->type == FamilyType::kJson;
  uint64_t need = 0;  // the fields a cached entry must hold (all below 32 when cu is on)
  if (cu)
    for (size_t f : fields) need |= uint64_t{1} << f;
  HashReads out;
  const Misses missed = FindInCache(
      io, ids.size(), [&](size_t k) { return ids[k]; },
      [&](std::span<const CacheKey> keys) {
        out.found.resize(ids.size());
        cu.cache->FindHashes(keys, out.found);
      },
      [&](size_t k) {
        HashRef h = out.found[k];
        return h && (h.known() & need) == need;
      });
  out.exists.assign(ids.size(), 1);
  // Every id hit: the values are read from the entries (nothing suspends before).
  if (missed.at.empty() && cu) {
    out.all_hit = true;
    for (size_t k = 0; k < ids.size(); ++k) out.exists[k] = out.found[k].exists();
    co_return out;
  }
  out.cells.resize(ids.size() * nf);
  size_t string_bytes = 0;  // room for strings of a few words each, and vectors' bytes
  for (const size_t f : fields) {
    const SchemaField& field = io.family->fields[f];
    if (field.type == FieldType::kStr) string_bytes += 16;
    if (field.type == FieldType::kVec) string_bytes += 4 * size_t{field.dim};
  }
  if (string_bytes) out.cells.reserve_strings(string_bytes * ids.size());
  for (size_t k = 0, m = 0; k < ids.size(); ++k) {
    if (m < missed.at.size() && missed.at[m] == k) {
      ++m;
      continue;
    }
    out.exists[k] = out.found[k].exists();
    for (size_t f = 0; f < nf; ++f) out.found[k].CopyField(fields[f], out.cells, k * nf + f);
  }
  out.found.clear();
  ReadTicket ticket = cu ? cu.Begin(missed.keys) : ReadTicket{};
  const size_t per = cu.store ? 2 : 1;  // the read (+ PTTL)
  const uint64_t sent_ms = NowMs();
  auto replies =
      co_await io.pool->Batch(HashCommands(io, ids, missed.at, fields, whole), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  for (size_t m = 0; m < missed.at.size(); ++m) {
    const uint32_t k = missed.at[m];
    const RespView r = (*replies)[m * per];
    if (whole && !json) {  // fields is every declared field, in order
      auto exists = DecodeHashAll(io.src, ids[k], r, out.cells, k * nf);
      if (!exists) co_return Fail(std::move(exists.error()));
      out.exists[k] = *exists;
      continue;
    }
    if (auto ok = DecodeFields(io.src, ids[k], fields, r, out.cells, k * nf); !ok)
      co_return Fail(std::move(ok.error()));
    if (json && r.is_array() && r.size() == 1 && !r.begin()->is_string()) out.exists[k] = 0;
  }
  if (cu.store) StoreHashes(cu, ticket, missed, fields, need, out, *replies, sent_ms);
  co_return out;
}

Coro<Result<CachedFields>> ReadCounters(const TaskContext& ctx, const FamilyIo& io,
                                        std::span<const IdRef> ids,
                                        std::span<const size_t> fields) {
  const CacheUse& cu = io.cu;
  const size_t nf = fields.size();
  const int64_t now_s = SecondOf(ctx.now_ms);
  const CounterWindows windows(*io.family, fields, now_s);
  CachedFields cells;
  cells.resize(ids.size() * nf);
  // The blocks of one key at a time, refilled per key (from its entry or its reply).
  std::vector<RingBlock> blocks(windows.hash_fields().size());
  // An id whose entry holds the blocks of this node's windows is summed from it at once
  // (the views are valid until the cache changes: nothing suspends before).
  std::vector<BlobRef> found;
  const Misses missed = FindInCache(
      io, ids.size(), [&](size_t k) { return ids[k]; },
      [&](std::span<const CacheKey> keys) {
        found.resize(ids.size());
        cu.cache->FindBlobs(keys, found);
      },
      [&](size_t k) {
        if (!found[k] || !windows.BlocksOfEntry(found[k].bytes(), blocks)) return false;
        windows.SumWindows(blocks, cells, k * nf);
        return true;
      });
  if (missed.at.empty()) co_return cells;
  // A read to be stored asks for the blocks of every field of the family, so that the
  // entry serves each node that reads the family, whatever its fields.
  std::optional<CounterWindows> every;
  if (cu.store) {
    std::vector<size_t> all(io.family->fields.size());
    for (size_t f = 0; f < all.size(); ++f) all[f] = f;
    every.emplace(*io.family, all, now_s);
  }
  const CounterWindows& read = every ? *every : windows;
  std::vector<RingBlock> read_blocks(every ? read.hash_fields().size() : 0);
  const RedisCommands::Shape hmget = RedisCommands::MakeShape("HMGET", read.hash_fields());
  RedisCommands cmds;
  cmds.Reserve(missed.at.size(), missed.at.size() * (hmget.head.size() + hmget.tail.size() + 32 +
                                                     io.pool->prefix().size() +
                                                     io.key.before.size() + io.key.after.size()));
  for (const uint32_t k : missed.at) io.AddKeyed(cmds, hmget, ids[k]);
  const uint64_t sent_ms = NowMs();
  auto replies = co_await io.pool->Batch(std::move(cmds), ctx.deadline);
  if (!replies)
    co_return Fail(std::move(replies.error()));  // names the endpoint; the scheduler adds the node
  // The entries live cache_ms from when the batch was sent: Redis read the values after.
  const uint64_t age_ms = NowMs() - sent_ms;
  const auto cache_ms = static_cast<uint64_t>(io.family->counters->cache_ms);
  std::string entry;
  for (size_t m = 0; m < missed.at.size(); ++m) {
    const uint32_t k = missed.at[m];
    if (!every) {
      if (auto ok = DecodeCounters(io.src, ids[k], windows, (*replies)[m], blocks); !ok)
        co_return Fail(std::move(ok.error()));
      windows.SumWindows(blocks, cells, k * nf);
      continue;
    }
    // Summed from the entry it stores, as a later hit will be: one decoding either way.
    if (auto ok = DecodeCounters(io.src, ids[k], read, (*replies)[m], read_blocks); !ok)
      co_return Fail(std::move(ok.error()));
    entry.clear();
    read.AppendEntry(read_blocks, entry);
    const bool covered = windows.BlocksOfEntry(entry, blocks);  // `every` holds its blocks
    assert(covered);
    (void)covered;
    windows.SumWindows(blocks, cells, k * nf);
    if (age_ms < cache_ms) cu.cache->PutBlob(missed.keys[m], entry, cache_ms - age_ms);
  }
  co_return cells;
}

// Whether a node's fields can be held by the cache (CacheEntry::kMaxFields).
bool CacheableFields(std::span<const size_t> fields) {
  for (size_t f : fields)
    if (f >= CacheEntry::kMaxFields) return false;
  return true;
}

// The head of every input id's list or zset (from the cache where it holds one),
// appended in input order.
Coro<Result<ListRows>> ReadLists(const TaskContext& ctx, const FamilyIo& io, const InputIds& ids,
                                 int64_t count, bool scores, bool with_from) {
  const CacheUse& cu = io.cu;
  const auto asked = static_cast<uint32_t>(count);
  const bool zset = io.family->type == FamilyType::kZset;
  // A zset is cached with its scores whatever this node keeps, so that every node of the
  // family can use the entry.
  const bool read_scores = scores || (zset && cu.store);
  ListRows out;
  out.with_from = with_from;
  // Most heads are whole (media lists of a few items, feeds of fanout): room for them all.
  const size_t expect = ids.size() * std::min<size_t>(asked, 1024);
  if (io.family->members_type == ColumnType::kI64) {
    out.ids.reserve(expect);
  } else {
    out.strs.reserve(expect);
    out.str_bytes.reserve(16 * expect);
  }
  if (with_from) out.heads.reserve(ids.size());
  std::vector<ListRef> found;
  const Misses missed = FindInCache(
      io, ids.size(), [&](size_t i) { return ids.at(i); },
      [&](std::span<const CacheKey> keys) {
        found.resize(ids.size());
        cu.cache->FindLists(keys, found);
      },
      [&](size_t i) {
        ListRef l = found[i];
        return l && l.Covers(asked) && (!zset || l.has_scores());
      });
  // Hits are copied out now (into hit_rows[hit_span[i]]): the cache may change while the
  // batch is out.
  constexpr uint32_t kMiss = UINT32_MAX;
  std::vector<std::pair<uint32_t, uint32_t>> hit_span(ids.size(), {kMiss, kMiss});
  ListRows hit_rows;
  hit_rows.with_from = false;  // AppendRange gives each range its input index
  for (size_t i = 0, m = 0; i < ids.size() && cu; ++i) {
    if (m < missed.at.size() && missed.at[m] == i) {
      ++m;
      continue;
    }
    const auto begin = static_cast<uint32_t>(hit_rows.size());
    AppendList(found[i], asked, static_cast<uint32_t>(i), scores, hit_rows);
    hit_span[i] = {begin, static_cast<uint32_t>(hit_rows.size())};
  }
  ReadTicket ticket = cu ? cu.Begin(missed.keys) : ReadTicket{};
  const size_t per = cu.store ? 2 : 1;  // LRANGE / ZRANGE (+ PTTL)
  RespReplies replies;
  const uint64_t sent_ms = NowMs();
  if (!missed.at.empty()) {
    auto r =
        co_await io.pool->Batch(ListCommands(io, ids, missed.at, count, read_scores), ctx.deadline);
    if (!r)
      co_return Fail(std::move(r.error()));  // names the endpoint; the scheduler adds the node
    replies = std::move(*r);
  }
  // Heads that go to the cache are decoded into entries; the others straight into rows.
  std::vector<CachedList> lists(cu.store ? missed.at.size() : 0);
  for (size_t m = 0; m < lists.size(); ++m) {
    auto l = DecodeList(io.src, ids.at(missed.at[m]), asked, read_scores, replies[m * per]);
    if (!l) co_return Fail(std::move(l.error()));
    lists[m] = std::move(*l);
  }
  for (size_t i = 0, m = 0; i < ids.size(); ++i) {
    const auto from = static_cast<uint32_t>(i);
    if (hit_span[i].first != kMiss) {
      out.AppendRange(hit_rows, hit_span[i].first, hit_span[i].second, from);
    } else if (cu.store) {
      AppendList(lists[m++], asked, from, scores, out);
    } else if (auto ok =
                   AppendList(io.src, ids.at(i), asked, from, read_scores, replies[m++ * per], out);
               !ok) {
      co_return Fail(std::move(ok.error()));
    }
  }
  if (cu.store) {
    for (size_t k = 0; k < missed.at.size(); ++k)
      if (ticket.Storable(missed.keys[k]))
        cu.cache->PutList(ticket, missed.keys[k], std::move(lists[k]),
                          KeyTtl(replies[k * per + 1], sent_ms));
  }
  co_return out;
}

ColumnPtr IdColumn(ListRows& rows, ColumnType type) {
  if (type == ColumnType::kI64) return Share(Column::I64(std::move(rows.ids)));
  ColumnBuilder col(ColumnType::kStr, rows.size());
  for (size_t i = 0; i < rows.size(); ++i) col.AppendStr(rows.str(i));
  return Share(std::move(col).Finish());
}

}  // namespace rankd
