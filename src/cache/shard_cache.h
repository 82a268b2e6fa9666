// ShardCache: one shard's cache of decoded Redis values — user and item hashes, follow,
// recs and media lists — for the IO nodes whose plan sets `cache: true`
// (docs/cache.md). Kept consistent by Redis invalidation: the shard's Redis clients
// track the keys their data connections read (CLIENT TRACKING ... REDIRECT) and call
// Invalidate / InvalidateAll when Redis says a key changed or when tracking was lost.
//
// A read of keys the cache missed goes like this (tasks/io_tasks.cc):
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

#include "core/inline_vector.h"
#include "data/value.h"

namespace rankd {

// The key families the cache holds (docs/data.md); the Redis key is the endpoint's
// prefix + the family's prefix + the id.
enum class CacheKind : uint8_t { kUser, kFollow, kRecs, kMedia, kItem };

struct CacheKey {
  uint16_t endpoint = 0;  // the shard's endpoint index (RedisPools order)
  CacheKind kind = CacheKind::kUser;
  int64_t id = 0;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// "user:", "follow:", "recs:", "media:", "item:".
std::string_view CacheKindPrefix(CacheKind k);
// A Redis key without the endpoint's prefix -> its family and id; nullopt for keys the
// cache never holds (other families, ids that are not strict decimal i64).
std::optional<std::pair<CacheKind, int64_t>> ParseCacheKey(std::string_view key);

// One hash field as the task decoded it.
struct CachedField {
  enum class State : uint8_t { kMissing, kUnparsable, kValue };
  State state = State::kMissing;
  Value value;  // i64, f64, str or bool when kValue
};

// Hash fields stored compactly: a 16-byte cell each (state, type, 8-byte payload), the
// strings' bytes in one buffer. A field's value is one of i64, f64, str or bool (any
// other Value is kept as no value: no field has another type). A hash entry's fields,
// and a features node's per-request copies of them (cells copy without allocating).
// Up to kInline cells (a user's or an item's fields) live inside the object, so that a
// cache entry's cells share the entry's heap block: a hit costs one memory access less.
// More cells (a features node's per-request copy) go to the heap.
class CachedFields {
 public:
  static constexpr size_t kInline = 8;

  size_t size() const { return cells_.size(); }
  void resize(size_t n) { cells_.resize(n); }
  // Field i, rebuilt (a copy).
  CachedField operator[](size_t i) const;
  void Set(size_t i, const CachedField& f);
  // Field i holds this value (state kValue), or has no value in `state`.
  void SetI64(size_t i, int64_t v) { cells_[i] = {static_cast<uint64_t>(v), 0, kValue, kI64}; }
  void SetF64(size_t i, double v) { cells_[i] = {std::bit_cast<uint64_t>(v), 0, kValue, kF64}; }
  void SetBool(size_t i, bool v) { cells_[i] = {v ? 1u : 0u, 0, kValue, kBool}; }
  void SetStr(size_t i, std::string_view v) {
    cells_[i] = {strings_.size(), static_cast<uint32_t>(v.size()), kValue, kStr};
    strings_.append(v);
  }
  void SetNoValue(size_t i, CachedField::State state) { cells_[i] = {0, 0, state, kNone}; }
  // Field i = from's field j. REQUIRES: &from != this.
  void Set(size_t i, const CachedFields& from, size_t j) {
    const Cell& src = from.cells_[j];
    Cell& dst = cells_[i];
    dst = src;  // 16 bytes, copied whole
    if (src.kind == kStr) {
      dst.bits = strings_.size();
      strings_.append(from.str(j));
    }
  }
  CachedField::State state(size_t i) const { return cells_[i].state; }
  // The value of field i (REQUIRES: state(i) == kValue and the value has that type).
  int64_t i64(size_t i) const { return static_cast<int64_t>(cells_[i].bits); }
  double f64(size_t i) const { return std::bit_cast<double>(cells_[i].bits); }
  bool boolean(size_t i) const { return cells_[i].bits != 0; }
  std::string_view str(size_t i) const {
    return std::string_view(strings_).substr(cells_[i].bits, cells_[i].len);
  }
  // Starts loading this object up to the end of its inline cells into the CPU's cache,
  // reading nothing (a cache entry's hash is about to be looked at).
  void PrefetchInline() const {
    const char* p = reinterpret_cast<const char*>(this);
    const char* end = reinterpret_cast<const char*>(&strings_);
    for (; p < end; p += 64) __builtin_prefetch(p);
    __builtin_prefetch(end - 1);
  }
  // Drops unused capacity (before the fields are stored).
  void Compact() {
    cells_.shrink_to_fit();
    strings_.shrink_to_fit();
  }
  // What the fields take on the heap (as malloc sizes blocks).
  uint64_t HeapBytes() const;

 private:
  // The Value alternative a cell holds (its index in Value).
  enum Kind : uint8_t { kNone = 0, kI64 = 1, kF64 = 2, kStr = 3, kBool = 4 };
  static constexpr CachedField::State kValue = CachedField::State::kValue;
  struct Cell {
    uint64_t bits = 0;  // i64, f64's bits, bool, or str's offset in strings_
    uint32_t len = 0;   // str's length
    CachedField::State state = CachedField::State::kMissing;
    Kind kind = kNone;
    uint16_t unused = 0;  // no padding: a copy moves two whole words
  };

  // A moved-from one is empty (InlineVector's move; a moved-from string is empty too).
  InlineVector<Cell, kInline> cells_;
  std::string strings_;  // str values' bytes (a field set again leaves its old bytes)
};

// A user or item hash: the fields read so far, by the task's field index.
struct CachedHash {
  bool exists = true;   // false: the key did not exist (HGETALL gave nothing)
  uint64_t known = 0;   // bit f set: fields[f] holds field f
  CachedFields fields;  // indexed by field; size > every set bit of known
};

// A list's members: up to 12 of them (a media list's head) inside the object, so that a
// cache entry's members share the entry's heap block (a hit costs one memory access
// less); more go to the heap.
using CachedMembers = InlineVector<int64_t, 12>;

// The head of a list: LRANGE key 0 asked-1.
struct CachedList {
  uint32_t asked = 0;         // how many members were asked for
  CachedMembers members;      // what Redis returned, in order (≤ asked); bad ids as 0
  std::vector<uint32_t> bad;  // positions in members that were not ids (ascending)
  // The whole list is known: Redis returned fewer members than asked.
  bool complete() const { return members.size() < asked; }
  // Serves LRANGE 0 count-1.
  bool Covers(uint32_t count) const { return count <= asked || complete(); }
};

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

  // The entry of `k`, or nullptr (absent, or past its expiry: then dropped). The pointer
  // is valid until the next call that changes the cache. A lookup marks the entry
  // visited (eviction); it counts nothing: the task says what it could use through
  // RecordLookups.
  const CachedHash* FindHash(const CacheKey& k);
  const CachedList* FindList(const CacheKey& k);
  // out[i] = FindHash(keys[i]) (FindList), for all keys at once: the lookups' memory
  // accesses overlap (prefetched a few keys ahead), so a node should look all of its keys
  // up in one call. The pointers stay valid until the next call that changes the cache;
  // a key may repeat. REQUIRES: out.size() == keys.size().
  void FindHashes(std::span<const CacheKey> keys, std::span<const CachedHash*> out);
  void FindLists(std::span<const CacheKey> keys, std::span<const CachedList*> out);
  void RecordLookups(uint64_t hits, uint64_t misses);

  ReadTicket BeginRead(std::span<const CacheKey> keys);

  // Stores the value read under `t` for `k` (replacing an older entry; for a hash whose
  // entry exists with the same `exists`, the fields are merged into it). Does nothing
  // when !t.Storable(k), when the budget is 0, or when the entry alone would take more
  // than 1/16 of the budget. `key_ttl_ms`: the key's remaining TTL in Redis (PTTL), when
  // it has one: the entry then expires no later than the key.
  void PutHash(const ReadTicket& t, const CacheKey& k, CachedHash value,
               std::optional<uint64_t> key_ttl_ms);
  void PutList(const ReadTicket& t, const CacheKey& k, CachedList value,
               std::optional<uint64_t> key_ttl_ms);

  // Redis said `key` (without the endpoint's prefix) of `endpoint` changed: drops its
  // entry and marks an in-flight read of it. Keys the cache never holds are ignored
  // (still counted).
  void Invalidate(uint16_t endpoint, std::string_view key);
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
