// ShardCache: one shard's cache of decoded Redis values — user and item hashes, follow,
// recs and media lists — for the IO nodes whose plan sets `cache: true`
// (docs/cache.md). Kept consistent by Redis invalidation: the shard's Redis clients
// track the keys their data connections read (CLIENT TRACKING ... REDIRECT) and call
// Invalidate / InvalidateAll when Redis says a key changed or when tracking was lost.
// Blobs (a counters family's ring fields) are the exception: their families are not
// tracked (CacheFamily::tracked), and an entry lives only as long as its reader allows
// (PutBlob's max_age_ms: the family's cache_ms), whatever Redis writes meanwhile.
//
// A read of keys the cache missed goes like this (tasks/read_through.cc):
//
//   ReadTicket t = cache.BeginRead(missed_keys);   // before the batch is sent
//   ... co_await the batch ...
//   if (t.Storable(key)) cache.PutList(t, key, list, key_ttl_ms);  // per key
//   // t's destructor ends the read
//
// A key invalidated between BeginRead and its reply is used by that request but never
// stored (Storable says no); so is every key of a read that overlapped InvalidateAll.
//
// Memory: a byte budget counting keys, values and the index's overhead; past it,
// entries are evicted (SIEVE: a FIFO with a visited bit, docs/cache.md says why). An
// entry also expires after the TTL cap, or sooner when its key carries a TTL in Redis.
//
// Threads: the shard's loop thread only (the shard owns the cache like its
// connections; no locks). stats() may be read from any thread (relaxed atomics). The
// cache must outlive every ReadTicket (the shard destroys it after its requests ended).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/cache_entry.h"
#include "cache/cached_values.h"

namespace rankd {

struct CacheStats {
  using Counter = std::atomic<uint64_t>;
  Counter hits{0};                  // keys served from the cache (RecordLookups)
  Counter misses{0};                // keys asked of Redis by caching nodes (RecordLookups)
  Counter evictions{0};             // entries dropped for the byte budget
  Counter invalidations{0};         // keys Redis invalidated, + 1 per InvalidateAll
  Counter expirations{0};           // entries dropped at lookup past their expiry
  std::atomic<int64_t> entries{0};  // gauge
  std::atomic<int64_t> bytes{0};    // gauge: what counts against the budget
};

class ShardCache;

// Keys being read from Redis on behalf of the cache. Move-only; ends the read when
// destroyed.
class ReadTicket {
 public:
  ReadTicket() = default;
  ReadTicket(ReadTicket&&) noexcept;
  ReadTicket& operator=(ReadTicket&&) noexcept;
  ~ReadTicket();

  // No invalidation of `k` (nor InvalidateAll) reached the cache since BeginRead.
  // REQUIRES: k was among BeginRead's keys.
  bool Storable(const CacheKey& k) const;

 private:
  friend class ShardCache;
  ShardCache* cache_ = nullptr;
  uint64_t started_ = 0;  // the cache's invalidation sequence at BeginRead
  std::vector<CacheKey> keys_;
};

class ShardCache {
 public:
  struct Options {
    uint64_t budget_bytes = 0;    // 0: the cache stores nothing
    uint64_t ttl_cap_ms = 60000;  // no entry lives longer (--cache-ttl-ms)
  };
  // `now_ms`: a monotonic clock in ms (the loop's time; tests pass a fake).
  ShardCache(Options opts, std::function<uint64_t()> now_ms);
  ~ShardCache();
  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;

  // The entry of `k`, or an empty view (absent, or past its expiry: then dropped). The
  // view is valid until the next call that changes the cache. A lookup marks the entry
  // visited (eviction); it counts nothing: the task says what it could use through
  // RecordLookups.
  HashRef FindHash(const CacheKey& k);
  ListRef FindList(const CacheKey& k);
  BlobRef FindBlob(const CacheKey& k);
  // out[i] = FindHash(keys[i]) (FindList), for all keys at once: the lookups' memory
  // accesses overlap (prefetched a few keys ahead), so a node should look all of its keys
  // up in one call. The views stay valid until the next call that changes the cache;
  // a key may repeat. REQUIRES: out.size() == keys.size().
  void FindHashes(std::span<const CacheKey> keys, std::span<HashRef> out);
  void FindLists(std::span<const CacheKey> keys, std::span<ListRef> out);
  void FindBlobs(std::span<const CacheKey> keys, std::span<BlobRef> out);
  void RecordLookups(uint64_t hits, uint64_t misses);

  ReadTicket BeginRead(std::span<const CacheKey> keys);

  // Stores the value read under `t` for `k` (replacing an older entry; for a hash whose
  // entry exists with the same `exists`, the fields are merged into it). Does nothing
  // when !t.Storable(k), when the budget is 0, when the entry alone would take more
  // than 1/16 of the budget, or for a hash with a field index of 32 or more. `key_ttl_ms`: the
  // key's remaining TTL in Redis (PTTL), when it has one: the entry then expires no later than the
  // key.
  void PutHash(const ReadTicket& t, const CacheKey& k, CachedHash value,
               std::optional<uint64_t> key_ttl_ms);
  void PutList(const ReadTicket& t, const CacheKey& k, CachedList value,
               std::optional<uint64_t> key_ttl_ms);

  // Stores a copy of `bytes` for `k` (replacing an older entry) for at most `max_age_ms`
  // from now (and the TTL cap). Takes no ticket: no invalidation applies to a blob, whose
  // staleness is bounded by its age alone. Does nothing when the budget is 0, the entry
  // alone would take more than 1/16 of it, max_age_ms is 0, or k's family is not held.
  void PutBlob(const CacheKey& k, std::string_view bytes, uint64_t max_age_ms);

  // Redis said `key` (without the endpoint's prefix) of `endpoint` changed: drops the
  // entry of every tracked family whose whole template matches it and marks in-flight
  // reads of them. Keys the cache never holds are ignored (still counted).
  void Invalidate(uint16_t endpoint, std::string_view key);
  // The families of the installed schema: what Invalidate matches keys against and what
  // may be stored. Drops the entries of every other family, and no read begun before
  // stores. Call before the requests of a new schema's snapshot start.
  void SetFamilies(std::vector<CacheFamily> families);
  // Tracking of `endpoint` was lost or Redis flushed: drops its entries; every read in
  // flight (any endpoint) becomes unstorable.
  void InvalidateAll(uint16_t endpoint);

  const CacheStats& stats() const { return *stats_; }
  std::shared_ptr<const CacheStats> shared_stats() const { return stats_; }
  uint64_t budget_bytes() const { return opts_.budget_bytes; }

 private:
  friend class ReadTicket;
  struct Impl;
  void EndRead(ReadTicket& t);

  Options opts_;
  std::function<uint64_t()> now_ms_;
  std::shared_ptr<CacheStats> stats_ = std::make_shared<CacheStats>();
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankd
