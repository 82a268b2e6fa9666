// ShardCache (shard_cache.h): an unordered_map from CacheKey to an entry, the entries
// threaded on one intrusive FIFO for SIEVE eviction, and a map of the keys being read
// from Redis for the invalidation race. Threads: the shard's loop thread only, except
// the stats (relaxed atomics).
#include "cache/shard_cache.h"

#include <algorithm>
#include <cassert>
#include <unordered_map>
#include <utility>
#include <variant>

namespace rankd {

namespace {

// splitmix64's finalizer: ids are often small and dense, so they need mixing before
// libstdc++ takes them modulo the bucket count.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

struct KeyHash {
  // noexcept (and cheap): libstdc++ then keeps no hash code in each node.
  size_t operator()(const CacheKey& k) const noexcept {
    uint64_t tag = (uint64_t{k.endpoint} << 8) | static_cast<uint8_t>(k.kind);
    return Mix(static_cast<uint64_t>(k.id) ^ Mix(tag + 0x9e3779b97f4a7c15ULL));
  }
};

// What one heap block of `n` bytes takes from glibc's malloc: an 8-byte header, rounded
// up to 16, at least 32 (glibc's chunk size). Other allocators differ by a few bytes a
// block; the budget is approximate by that much.
constexpr uint64_t Block(uint64_t n) {
  return n == 0 ? 0 : std::max<uint64_t>(32, (n + 8 + 15) & ~uint64_t{15});
}

// An index node of libstdc++'s unordered_map: one block holding the next pointer and
// the key-value pair (no cached hash code: KeyHash is noexcept), and one bucket pointer
// per element (load factor ≤ 1).
template <typename Index>
constexpr uint64_t kIndexNodeBytes = Block(sizeof(void*) + sizeof(typename Index::value_type)) +
                                     sizeof(void*);

// What a std::string holds inline: a string allocates only past this.
const size_t kSsoCapacity = std::string().capacity();

uint64_t StringHeap(const std::string& s) {
  return s.capacity() > kSsoCapacity ? Block(s.capacity() + 1) : 0;
}

uint64_t ValueHeap(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return StringHeap(*s);
  if (const auto* l = std::get_if<std::vector<std::string>>(&v)) {
    uint64_t n = Block(l->capacity() * sizeof(std::string));
    for (const std::string& s : *l) n += StringHeap(s);
    return n;
  }
  return 0;
}

uint64_t HeapBytes(const CachedHash& h) {
  uint64_t n = Block(h.fields.capacity() * sizeof(CachedField));
  for (const CachedField& f : h.fields) n += ValueHeap(f.value);
  return n;
}

uint64_t HeapBytes(const CachedList& l) {
  return Block(l.members.capacity() * sizeof(int64_t)) + Block(l.bad.capacity() * sizeof(uint32_t));
}

// Copies the fields `from` knows into `into` (same `exists`): newer reads win.
void MergeHash(CachedHash& into, CachedHash&& from) {
  if (into.fields.size() < from.fields.size()) into.fields.resize(from.fields.size());
  for (uint64_t bits = from.known; bits != 0; bits &= bits - 1) {
    size_t f = static_cast<size_t>(__builtin_ctzll(bits));
    into.fields[f] = std::move(from.fields[f]);
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
  struct Entry {
    std::variant<CachedHash, CachedList> value;
    uint64_t expire_at = 0;         // now_ms at and past which the entry is not served
    uint64_t bytes = 0;             // what the entry is charged
    bool visited = false;           // SIEVE: looked up since the hand last passed
    const CacheKey* key = nullptr;  // the index node's key (stable: node-based map)
    Entry* newer = nullptr;         // FIFO links: towards the head (newest)
    Entry* older = nullptr;         // towards the tail (oldest)
  };
  using Index = std::unordered_map<CacheKey, Entry, KeyHash>;

  struct Pending {
    uint32_t readers = 0;      // tickets (times a key was passed to BeginRead) open
    uint64_t invalidated = 0;  // seq of the key's last Invalidate while read, 0: none
  };

  Index index;
  Entry* head = nullptr;  // newest
  Entry* tail = nullptr;  // oldest
  Entry* hand = nullptr;  // SIEVE's hand; null: start at the tail
  uint64_t bytes = 0;     // == stats->bytes, kept here to decide without atomics

  std::unordered_map<CacheKey, Pending, KeyHash> pending;
  uint64_t seq = 0;         // bumped by every Invalidate / InvalidateAll
  uint64_t flushed_at = 0;  // seq of the last InvalidateAll

  static uint64_t Charge(const Entry& e) {
    uint64_t heap = std::visit([](const auto& v) { return HeapBytes(v); }, e.value);
    return kIndexNodeBytes<Index> + heap;
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

  void Erase(Index::iterator it, CacheStats& stats) {
    Entry& e = it->second;
    Unlink(&e);
    bytes -= e.bytes;
    stats.bytes.fetch_sub(static_cast<int64_t>(e.bytes), std::memory_order_relaxed);
    stats.entries.fetch_sub(1, std::memory_order_relaxed);
    index.erase(it);
  }

  // SIEVE: from the hand (or the tail) towards the head, clearing visited bits, wrapping
  // to the tail; the first unvisited entry goes. REQUIRES: !index.empty().
  void EvictOne(CacheStats& stats) {
    Entry* e = hand ? hand : tail;
    while (e->visited) {
      e->visited = false;
      e = e->newer ? e->newer : tail;
    }
    hand = e->newer;
    Erase(index.find(*e->key), stats);
    stats.evictions.fetch_add(1, std::memory_order_relaxed);
  }

  // The entry of `k` holding a T, or null; drops it when expired.
  template <typename T>
  const T* Find(CacheStats& stats, uint64_t now, const CacheKey& k) {
    auto it = index.find(k);
    if (it == index.end()) return nullptr;
    if (now >= it->second.expire_at) {
      Erase(it, stats);
      stats.expirations.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    const T* v = std::get_if<T>(&it->second.value);
    if (v) it->second.visited = true;
    return v;
  }

  // Stores `value` for `k` (replacing an older entry), evicting for the budget first.
  // `merged`: `value` includes the older entry's fields, so its expiry (no field may
  // outlive the cap) and visited bit carry over.
  void Put(CacheStats& stats, uint64_t budget, const CacheKey& k,
           std::variant<CachedHash, CachedList> value, uint64_t expire_at, bool merged) {
    Entry fresh;
    fresh.value = std::move(value);
    fresh.expire_at = expire_at;
    fresh.bytes = Charge(fresh);
    if (fresh.bytes > budget / 16) return;  // not stored; an older entry stays

    if (auto old = index.find(k); old != index.end()) {
      if (merged) {
        fresh.visited = old->second.visited;
        fresh.expire_at = std::min(fresh.expire_at, old->second.expire_at);
      }
      Erase(old, stats);
    }
    // Evicting before inserting keeps the new entry out of the hand's way (as SIEVE).
    while (bytes + fresh.bytes > budget && !index.empty()) EvictOne(stats);

    auto [it, inserted] = index.emplace(k, std::move(fresh));
    assert(inserted);
    Entry& e = it->second;
    e.key = &it->first;
    PushHead(&e);
    bytes += e.bytes;
    stats.bytes.fetch_add(static_cast<int64_t>(e.bytes), std::memory_order_relaxed);
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
    : opts_(opts), now_ms_(std::move(now_ms)), impl_(std::make_unique<Impl>()) {}

ShardCache::~ShardCache() {
  // The stats may outlive the cache (shared_stats): leave the gauges as if emptied.
  stats_->bytes.fetch_sub(static_cast<int64_t>(impl_->bytes), std::memory_order_relaxed);
  stats_->entries.fetch_sub(static_cast<int64_t>(impl_->index.size()), std::memory_order_relaxed);
}

const CachedHash* ShardCache::FindHash(const CacheKey& k) {
  if (impl_->index.empty()) return nullptr;
  return impl_->Find<CachedHash>(*stats_, now_ms_(), k);
}

const CachedList* ShardCache::FindList(const CacheKey& k) {
  if (impl_->index.empty()) return nullptr;
  return impl_->Find<CachedList>(*stats_, now_ms_(), k);
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
  if (opts_.budget_bytes == 0 || !t.Storable(k)) return;
  uint64_t now = now_ms_();
  std::optional<uint64_t> expire_at = ExpireAt(now, opts_.ttl_cap_ms, key_ttl_ms);
  if (!expire_at) return;
  bool merged = false;
  auto it = impl_->index.find(k);
  if (it != impl_->index.end()) {
    auto* old = std::get_if<CachedHash>(&it->second.value);
    if (now >= it->second.expire_at) {
      impl_->Erase(it, *stats_);
      stats_->expirations.fetch_add(1, std::memory_order_relaxed);
    } else if (old && old->exists == value.exists) {
      // Merge into a copy: if the merged entry is too large, the old one stays as it was.
      CachedHash both = *old;
      MergeHash(both, std::move(value));
      value = std::move(both);
      merged = true;
    }
  }
  impl_->Put(*stats_, opts_.budget_bytes, k, std::move(value), *expire_at, merged);
}

void ShardCache::PutList(const ReadTicket& t, const CacheKey& k, CachedList value,
                         std::optional<uint64_t> key_ttl_ms) {
  if (opts_.budget_bytes == 0 || !t.Storable(k)) return;
  std::optional<uint64_t> expire_at = ExpireAt(now_ms_(), opts_.ttl_cap_ms, key_ttl_ms);
  if (!expire_at) return;
  impl_->Put(*stats_, opts_.budget_bytes, k, std::move(value), *expire_at, false);
}

void ShardCache::Invalidate(uint16_t endpoint, std::string_view key) {
  stats_->invalidations.fetch_add(1, std::memory_order_relaxed);
  std::optional<std::pair<CacheKind, int64_t>> parsed = ParseCacheKey(key);
  if (!parsed) return;  // never held, never read through a ticket
  CacheKey k{endpoint, parsed->first, parsed->second};
  ++impl_->seq;
  if (auto it = impl_->index.find(k); it != impl_->index.end()) impl_->Erase(it, *stats_);
  if (auto it = impl_->pending.find(k); it != impl_->pending.end())
    it->second.invalidated = impl_->seq;
}

void ShardCache::InvalidateAll(uint16_t endpoint) {
  stats_->invalidations.fetch_add(1, std::memory_order_relaxed);
  impl_->flushed_at = ++impl_->seq;
  for (auto it = impl_->index.begin(); it != impl_->index.end();) {
    auto next = std::next(it);
    if (it->first.endpoint == endpoint) impl_->Erase(it, *stats_);
    it = next;
  }
}

}  // namespace rankd
