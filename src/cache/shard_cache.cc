// ShardCache (shard_cache.h): a flat open-addressing index from CacheKey to an entry
// (cache_entry.h), the entries threaded on one intrusive FIFO for SIEVE eviction, and a map of
// the keys being read from Redis for the invalidation race. Threads: the shard's loop thread only,
// except the stats (relaxed atomics).
#include "cache/shard_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <memory>
#include <new>
#include <unordered_map>
#include <utility>

#include "core/mix.h"

namespace rankd {

namespace {

struct KeyHash {
  // noexcept (and cheap): libstdc++ then keeps no hash code in each node.
  size_t operator()(const CacheKey& k) const noexcept {
    uint64_t tag = (uint64_t{k.endpoint} << 32) | k.family;
    return Mix64(static_cast<uint64_t>(k.id) ^ Mix64(tag + 0x9e3779b97f4a7c15ULL));
  }
};

// What one heap block of `n` bytes takes from glibc's malloc: an 8-byte header, rounded
// up to 16, at least 32 (glibc's chunk size). Other allocators differ by a few bytes a
// block; the budget is approximate by that much.
constexpr uint64_t Block(uint64_t n) {
  return n == 0 ? 0 : std::max<uint64_t>(32, (n + 8 + 15) & ~uint64_t{15});
}

// Copies the fields `from` knows into `into` (same `exists`): newer reads win.
void MergeHash(CachedHash& into, CachedHash&& from) {
  if (into.fields.size() < from.fields.size()) into.fields.resize(from.fields.size());
  for (uint64_t bits = from.known; bits != 0; bits &= bits - 1) {
    size_t f = static_cast<size_t>(__builtin_ctzll(bits));
    into.fields.Set(f, from.fields, f);
  }
  into.known |= from.known;
}

// The entry's expiry, or nullopt when it would expire at once.
std::optional<uint64_t> ExpireAt(uint64_t now, uint64_t cap, std::optional<uint64_t> key_ttl_ms) {
  uint64_t ttl = key_ttl_ms ? std::min(cap, *key_ttl_ms) : cap;
  if (ttl == 0) return std::nullopt;
  return now + ttl;
}

}  // namespace

struct ShardCache::Impl {
  using Entry = CacheEntry;

  // The index: open addressing with linear probing over a power-of-two table, grown
  // (doubled) past a load of 0.7, erased by backward shift (no tombstones: a probe ends
  // at the first empty slot). Entries are heap blocks of their own, so an entry's
  // address is stable while slots move.
  struct Slot {
    CacheKey key;
    Entry* entry = nullptr;  // null: the slot is empty
  };
  // The table doubles past a load of 0.7 (and never shrinks), so its load is 0.35–0.7
  // while the cache fills: each entry is charged two slots. Entries are arena cells of
  // their own size (EntryArena).
  static constexpr uint64_t kEntryOverhead = sizeof(Entry) + 2 * sizeof(Slot);

  // Large caches live on transparent huge pages: a lookup reads a random slot among
  // megabytes of them and a random entry among tens of megabytes, and with 4 KiB pages
  // nearly every such read would also miss the TLB (a page walk, before the miss
  // itself). Small budgets keep to the heap as it is: a 2 MiB page would be most of them.
  static constexpr size_t kHugePage = size_t{2} << 20;
  static void* AllocHuge(size_t bytes) {
    void* p = std::aligned_alloc(kHugePage, bytes);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
    return p;
  }

  // The table's memory; one of 2 MiB or more is rounded up to whole huge pages (at most
  // 1 MiB more than the slots charged: capacities are powers of 2).
  struct SlotsFree {
    void operator()(Slot* p) const { std::free(p); }
  };
  using Slots = std::unique_ptr<Slot[], SlotsFree>;
  static Slots NewSlots(size_t cap) {
    size_t bytes = cap * sizeof(Slot);
    void* p = nullptr;
    if (bytes >= kHugePage) {
      p = AllocHuge((bytes + kHugePage - 1) / kHugePage * kHugePage);
    } else if ((p = std::malloc(bytes)) == nullptr) {
      throw std::bad_alloc();
    }
    Slot* slots = static_cast<Slot*>(p);
    std::uninitialized_value_construct_n(slots, cap);
    return Slots(slots);
  }

  // The entries' memory: chunks cut into entry-sized cells (aligned to cache lines, which
  // malloc would pad), freed cells reused (a free list), the chunks kept until the cache
  // goes. Entries never outnumber budget / kEntryOverhead, so the chunks stay within the
  // budget plus one chunk: a chunk is 1/16 of the budget, at least 64 KiB and at most a
  // 2 MiB huge page (budgets of 32 MiB or more).
  struct EntryArena {
    static constexpr size_t kCell = sizeof(Entry);  // whole cache lines
    const size_t chunk_bytes;
    std::vector<void*> chunks;
    char* next = nullptr;  // the current chunk's first unused cell
    char* end = nullptr;   // the end of its last whole cell
    void* free_list = nullptr;

    explicit EntryArena(uint64_t budget)
        : chunk_bytes(std::clamp<uint64_t>(std::bit_floor(std::max<uint64_t>(budget / 16, 1)),
                                           uint64_t{64} << 10, kHugePage)) {}
    EntryArena(const EntryArena&) = delete;
    EntryArena& operator=(const EntryArena&) = delete;
    ~EntryArena() {
      for (void* c : chunks) std::free(c);
    }
    void* Allocate() {
      if (free_list != nullptr) return std::exchange(free_list, *static_cast<void**>(free_list));
      if (next == end) {
        void* chunk = chunk_bytes == kHugePage ? AllocHuge(kHugePage)
                                               : std::aligned_alloc(alignof(Entry), chunk_bytes);
        if (chunk == nullptr) throw std::bad_alloc();
        chunks.push_back(chunk);
        next = static_cast<char*>(chunk);
        end = next + chunk_bytes / kCell * kCell;
      }
      return std::exchange(next, next + kCell);
    }
    void Free(void* p) { *static_cast<void**>(p) = std::exchange(free_list, p); }
  };

  template <typename T>
  Entry* NewEntry(const CacheKey& k, const T& value) {
    return new (arena.Allocate()) Entry(k, value);
  }
  void DeleteEntry(Entry* e) {
    e->~Entry();
    arena.Free(e);
  }

  explicit Impl(uint64_t budget) : arena(budget) {}

  EntryArena arena;  // before everything that holds entries: it goes last
  Slots slots;
  size_t mask = 0;  // capacity - 1; capacity 0 while nothing was stored
  size_t size = 0;

  Entry* head = nullptr;  // newest
  Entry* tail = nullptr;  // oldest
  Entry* hand = nullptr;  // SIEVE's hand; null: start at the tail
  uint64_t bytes = 0;     // == stats->bytes, kept here to decide without atomics

  struct Pending {
    uint32_t readers = 0;      // tickets (times a key was passed to BeginRead) open
    uint64_t invalidated = 0;  // seq of the key's last Invalidate while read, 0: none
  };
  std::unordered_map<CacheKey, Pending, KeyHash> pending;
  uint64_t seq = 0;                   // bumped by every Invalidate / InvalidateAll
  uint64_t flushed_at = 0;            // seq of the last InvalidateAll (or SetFamilies)
  std::vector<CacheFamily> families;  // of the installed schema (SetFamilies)

  // Erases every entry whose key `drop` says (a walk over all of them).
  template <class Pred>
  void EraseIf(CacheStats& stats, Pred drop) {
    for (Entry* e = head; e != nullptr;) {
      Entry* older = e->older;
      if (drop(e->key)) Erase(e, stats);
      e = older;
    }
  }

  bool Holds(uint32_t family) const {
    for (const CacheFamily& f : families)
      if (f.family == family) return true;
    return false;
  }

  ~Impl() {
    for (Entry* e = head; e != nullptr;) DeleteEntry(std::exchange(e, e->older));
  }

  size_t capacity() const { return slots ? mask + 1 : 0; }

  // The slot holding `k`, or the empty slot where the probe for `k` ends.
  size_t Probe(const CacheKey& k, size_t hash) const {
    size_t i = hash & mask;
    while (slots[i].entry != nullptr && !(slots[i].key == k)) i = (i + 1) & mask;
    return i;
  }

  Entry* Lookup(const CacheKey& k) const {
    if (size == 0) return nullptr;
    return slots[Probe(k, KeyHash{}(k))].entry;
  }

  void Grow() {
    const size_t old_cap = capacity();
    const size_t cap = old_cap ? 2 * old_cap : 16;
    Slots old = std::exchange(slots, NewSlots(cap));
    mask = cap - 1;
    for (size_t i = 0; i < old_cap; ++i)
      if (old[i].entry != nullptr) slots[Probe(old[i].key, KeyHash{}(old[i].key))] = old[i];
  }

  // Removes `k`'s slot (it must be there), shifting the slots after it back so that no
  // probe is cut short.
  void Unindex(const CacheKey& k) {
    size_t i = Probe(k, KeyHash{}(k));
    assert(slots[i].entry != nullptr);
    for (size_t j = (i + 1) & mask; slots[j].entry != nullptr; j = (j + 1) & mask) {
      size_t home = KeyHash{}(slots[j].key) & mask;
      // Slot j may move to i when its home is not in (i, j] (cyclically).
      if (((j - home) & mask) >= ((j - i) & mask)) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i].entry = nullptr;
    --size;
  }

  void PushHead(Entry* e) {
    e->older = head;
    e->newer = nullptr;
    if (head) head->newer = e;
    head = e;
    if (!tail) tail = e;
  }

  void Unlink(Entry* e) {
    if (hand == e) hand = e->newer;  // the hand moves on towards the head, as in eviction
    (e->newer ? e->newer->older : head) = e->older;
    (e->older ? e->older->newer : tail) = e->newer;
  }

  void Erase(Entry* e, CacheStats& stats) {
    Unindex(e->key);
    Unlink(e);
    bytes -= e->bytes;
    stats.bytes.fetch_sub(static_cast<int64_t>(e->bytes), std::memory_order_relaxed);
    stats.entries.fetch_sub(1, std::memory_order_relaxed);
    DeleteEntry(e);
  }

  // SIEVE: from the hand (or the tail) towards the head, clearing visited bits, wrapping
  // to the tail; the first unvisited entry goes. REQUIRES: size > 0.
  void EvictOne(CacheStats& stats) {
    Entry* e = hand ? hand : tail;
    while (e->visited) {
      e->visited = false;
      e = e->newer ? e->newer : tail;
    }
    hand = e->newer;
    Erase(e, stats);
    stats.evictions.fetch_add(1, std::memory_order_relaxed);
  }

  // out[i] = the entry of keys[i] holding a T, or null; marks the found ones visited.
  // The keys' slots are prefetched kAhead keys before they are probed, and the entries
  // (then their heap data) kAhead keys before they are read, so that the cache misses
  // of a batch overlap. Expired entries are not served; they are dropped after the
  // batch (a key may repeat in it: nothing moves while the batch is read).
  template <typename Ref>
  void FindMany(CacheStats& stats, uint64_t now, std::span<const CacheKey> keys,
                std::span<Ref> out) {
    assert(out.size() == keys.size());
    const size_t n = keys.size();
    if (size == 0) {
      std::fill(out.begin(), out.end(), Ref{});
      return;
    }
    constexpr size_t kAhead = 8;
    // hashes[i % ring]: keys i .. i + kAhead are in flight between the two stages.
    constexpr size_t kRing = 2 * kAhead;
    size_t hashes[kRing];
    Entry* found[kRing];
    bool expired = false;
    for (size_t i = 0; i < n + 2 * kAhead; ++i) {
      if (i < n) {
        size_t h = KeyHash{}(keys[i]);
        hashes[i % kRing] = h;
        __builtin_prefetch(&slots[h & mask]);
      }
      if (i >= kAhead && i - kAhead < n) {
        size_t j = i - kAhead;
        Entry* e = slots[Probe(keys[j], hashes[j % kRing])].entry;
        found[j % kRing] = e;
        if (e) __builtin_prefetch(e);  // its first line: all a hit reads, unless spilled
      }
      if (i >= 2 * kAhead) {
        size_t j = i - 2 * kAhead;
        Entry* e = found[j % kRing];
        Ref v;
        if (e != nullptr) {
          if (now >= e->expire_at) {
            expired = true;
          } else if (e->holds == Ref::kHolds) {
            v = Ref(e);
            if (!e->visited) e->visited = true;  // no store (a dirty line) when it is set
            if (e->spilled) __builtin_prefetch(e->spill);
          }
        }
        out[j] = v;
      }
    }
    if (expired) {
      for (const CacheKey& k : keys) {
        Entry* e = Lookup(k);
        if (e && now >= e->expire_at) {
          Erase(e, stats);
          stats.expirations.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  }

  // Stores `value` for `k` (replacing an older entry), evicting for the budget first.
  // `merged`: `value` includes the older entry's fields, so its expiry (no field may
  // outlive the cap) and visited bit carry over.
  template <typename T>
  void Put(CacheStats& stats, uint64_t budget, const CacheKey& k, const T& value,
           uint64_t expire_at, bool merged) {
    const uint64_t charge = kEntryOverhead + Block(Entry::SpillBytes(value));
    if (charge > budget / 16 || charge > UINT32_MAX) return;  // not stored; an older one stays

    bool visited = false;
    if (Entry* old = Lookup(k)) {
      if (merged) {
        visited = old->visited;
        expire_at = std::min(expire_at, old->expire_at);
      }
      Erase(old, stats);
    }
    // Evicting before inserting keeps the new entry out of the hand's way (as SIEVE).
    while (bytes + charge > budget && size > 0) EvictOne(stats);

    if (10 * (size + 1) > 7 * capacity()) Grow();
    Entry* e = NewEntry(k, value);
    e->expire_at = expire_at;
    e->visited = visited;
    e->bytes = static_cast<uint32_t>(charge);
    Slot& slot = slots[Probe(k, KeyHash{}(k))];
    assert(slot.entry == nullptr);
    slot = {k, e};
    ++size;
    PushHead(e);
    bytes += e->bytes;
    stats.bytes.fetch_add(static_cast<int64_t>(e->bytes), std::memory_order_relaxed);
    stats.entries.fetch_add(1, std::memory_order_relaxed);
  }
};

// ReadTicket ----------------------------------------------------------------------------

ReadTicket::ReadTicket(ReadTicket&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), started_(o.started_), keys_(std::move(o.keys_)) {
  o.keys_.clear();
}

ReadTicket& ReadTicket::operator=(ReadTicket&& o) noexcept {
  if (this != &o) {
    if (cache_) cache_->EndRead(*this);
    cache_ = std::exchange(o.cache_, nullptr);
    started_ = o.started_;
    keys_ = std::move(o.keys_);
    o.keys_.clear();
  }
  return *this;
}

ReadTicket::~ReadTicket() {
  if (cache_) cache_->EndRead(*this);
}

bool ReadTicket::Storable(const CacheKey& k) const {
  if (!cache_) return false;
  const ShardCache::Impl& impl = *cache_->impl_;
  if (impl.flushed_at > started_) return false;
  auto it = impl.pending.find(k);
  assert(it != impl.pending.end() && "Storable: the key was not among BeginRead's keys");
  return it != impl.pending.end() && it->second.invalidated <= started_;
}

// ShardCache ----------------------------------------------------------------------------

ShardCache::ShardCache(Options opts, std::function<uint64_t()> now_ms)
    : opts_(opts), now_ms_(std::move(now_ms)), impl_(std::make_unique<Impl>(opts.budget_bytes)) {}

ShardCache::~ShardCache() {
  // The stats may outlive the cache (shared_stats): leave the gauges as if emptied.
  stats_->bytes.fetch_sub(static_cast<int64_t>(impl_->bytes), std::memory_order_relaxed);
  stats_->entries.fetch_sub(static_cast<int64_t>(impl_->size), std::memory_order_relaxed);
}

HashRef ShardCache::FindHash(const CacheKey& k) {
  HashRef out;
  FindHashes(std::span<const CacheKey>(&k, 1), std::span<HashRef>(&out, 1));
  return out;
}

ListRef ShardCache::FindList(const CacheKey& k) {
  ListRef out;
  FindLists(std::span<const CacheKey>(&k, 1), std::span<ListRef>(&out, 1));
  return out;
}

BlobRef ShardCache::FindBlob(const CacheKey& k) {
  BlobRef out;
  FindBlobs(std::span<const CacheKey>(&k, 1), std::span<BlobRef>(&out, 1));
  return out;
}

void ShardCache::FindHashes(std::span<const CacheKey> keys, std::span<HashRef> out) {
  if (impl_->size == 0) {
    std::fill(out.begin(), out.end(), HashRef{});
    return;
  }
  impl_->FindMany<HashRef>(*stats_, now_ms_(), keys, out);
}

void ShardCache::FindLists(std::span<const CacheKey> keys, std::span<ListRef> out) {
  if (impl_->size == 0) {
    std::fill(out.begin(), out.end(), ListRef{});
    return;
  }
  impl_->FindMany<ListRef>(*stats_, now_ms_(), keys, out);
}

void ShardCache::FindBlobs(std::span<const CacheKey> keys, std::span<BlobRef> out) {
  if (impl_->size == 0) {
    std::fill(out.begin(), out.end(), BlobRef{});
    return;
  }
  impl_->FindMany<BlobRef>(*stats_, now_ms_(), keys, out);
}

void ShardCache::RecordLookups(uint64_t hits, uint64_t misses) {
  if (hits) stats_->hits.fetch_add(hits, std::memory_order_relaxed);
  if (misses) stats_->misses.fetch_add(misses, std::memory_order_relaxed);
}

ReadTicket ShardCache::BeginRead(std::span<const CacheKey> keys) {
  ReadTicket t;
  t.cache_ = this;
  t.started_ = impl_->seq;
  t.keys_.assign(keys.begin(), keys.end());
  for (const CacheKey& k : keys) ++impl_->pending[k].readers;
  return t;
}

void ShardCache::EndRead(ReadTicket& t) {
  for (const CacheKey& k : t.keys_) {
    auto it = impl_->pending.find(k);
    assert(it != impl_->pending.end());
    if (it != impl_->pending.end() && --it->second.readers == 0) impl_->pending.erase(it);
  }
  t.keys_.clear();
  t.cache_ = nullptr;
}

void ShardCache::PutHash(const ReadTicket& t, const CacheKey& k, CachedHash value,
                         std::optional<uint64_t> key_ttl_ms) {
  if (opts_.budget_bytes == 0 || !t.Storable(k) || !CacheEntry::Encodable(value) ||
      !impl_->Holds(k.family))
    return;
  uint64_t now = now_ms_();
  std::optional<uint64_t> expire_at = ExpireAt(now, opts_.ttl_cap_ms, key_ttl_ms);
  if (!expire_at) return;
  bool merged = false;
  if (Impl::Entry* e = impl_->Lookup(k)) {
    if (now >= e->expire_at) {
      impl_->Erase(e, *stats_);
      stats_->expirations.fetch_add(1, std::memory_order_relaxed);
    } else if (e->holds == CacheEntry::Holds::kHash && e->exists == value.exists) {
      // Merge into a copy: if the merged entry is too large, the old one stays as it was.
      CachedHash both = HashRef(e).ToHash();
      MergeHash(both, std::move(value));
      value = std::move(both);
      merged = true;
    }
  }
  impl_->Put(*stats_, opts_.budget_bytes, k, value, *expire_at, merged);
}

void ShardCache::PutList(const ReadTicket& t, const CacheKey& k, CachedList value,
                         std::optional<uint64_t> key_ttl_ms) {
  if (opts_.budget_bytes == 0 || !t.Storable(k) || !impl_->Holds(k.family)) return;
  std::optional<uint64_t> expire_at = ExpireAt(now_ms_(), opts_.ttl_cap_ms, key_ttl_ms);
  if (!expire_at) return;
  impl_->Put(*stats_, opts_.budget_bytes, k, value, *expire_at, false);
}

void ShardCache::PutBlob(const CacheKey& k, std::string_view bytes, uint64_t max_age_ms) {
  if (opts_.budget_bytes == 0 || !impl_->Holds(k.family)) return;
  std::optional<uint64_t> expire_at = ExpireAt(now_ms_(), opts_.ttl_cap_ms, max_age_ms);
  if (!expire_at) return;
  impl_->Put(*stats_, opts_.budget_bytes, k, CachedBlob{bytes}, *expire_at, false);
}

void ShardCache::Invalidate(uint16_t endpoint, std::string_view key) {
  stats_->invalidations.fetch_add(1, std::memory_order_relaxed);
  ForEachCacheKey(impl_->families, endpoint, key, [&](const CacheKey& k) {
    ++impl_->seq;
    if (Impl::Entry* e = impl_->Lookup(k)) impl_->Erase(e, *stats_);
    if (auto it = impl_->pending.find(k); it != impl_->pending.end())
      it->second.invalidated = impl_->seq;
  });
}

void ShardCache::SetFamilies(std::vector<CacheFamily> families) {
  impl_->families = std::move(families);
  impl_->flushed_at = ++impl_->seq;  // no read begun before may store
  impl_->EraseIf(*stats_, [&](const CacheKey& k) { return !impl_->Holds(k.family); });
}

void ShardCache::InvalidateAll(uint16_t endpoint) {
  stats_->invalidations.fetch_add(1, std::memory_order_relaxed);
  impl_->flushed_at = ++impl_->seq;
  impl_->EraseIf(*stats_, [&](const CacheKey& k) { return k.endpoint == endpoint; });
}

}  // namespace rankd
