// CacheEntry: one value as the shard cache keeps it (shard_cache.h), and HashRef / ListRef /
// BlobRef, the views of one that a lookup returns.
//
// An entry is two cache lines. The first holds everything a hit reads for the values the
// cache mostly holds: the expiry, the flags, and the value itself when it is small — up to
// 5 fields of a hash (a 1-byte tag and an 8-byte payload each; a string of up to 7 bytes
// sits in its payload) or up to 5 members of a list. The second holds the bookkeeping
// (key, FIFO links, charge) and a pointer to the spill: one heap block for whatever did
// not fit (more fields or members, longer strings' bytes, a list's non-id positions).
// A features node's hit on an item thus reads two cache lines (its index slot and this
// one); with the value types' own layout it read five, and at ~200 items a request those
// misses were most of the node's time (docs/cache.md, "What an entry holds"). A blob
// (a counters key's ring fields as read, events/counter_layout.h) is all spill.
//
// Threads: those of the ShardCache that owns the entries (its shard's loop thread). A view
// is valid until the next call that changes the cache.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

#include "cache/cached_values.h"

namespace rankd {

struct alignas(64) CacheEntry {
  static constexpr size_t kInlineCells = 5;
  static constexpr size_t kInlineMembers = 5;
  static constexpr size_t kShortStr = 7;    // longest string kept in its cell's payload
  static constexpr size_t kMaxFields = 32;  // `known` has one bit per field

  // What the entry holds; a lookup serves only the kind it asks for.
  enum class Holds : uint8_t { kHash, kList, kBlob };

  // A cell's tag: bits 0-1 its state, 2-4 its kind, 5-7 a short string's length.
  enum Kind : uint8_t { kNone = 0, kI64 = 1, kF64 = 2, kStr = 3, kBool = 4, kShort = 5 };

  // ---- line 0: what a hit reads
  uint64_t expire_at = 0;  // now_ms at and past which the entry is not served
  bool visited = false;    // SIEVE: looked up since the hand last passed
  const Holds holds;
  bool exists = true;    // a hash's key existed (HGETALL gave fields)
  bool spilled = false;  // a hash's cells or a list's members are in the spill; a blob's bytes
  union {
    uint32_t known;  // hash: bit f set: field f is held (cells in field order)
    uint32_t asked;  // list: how many members were asked for
  };
  union {
    struct {
      uint8_t tags[8];
      uint64_t values[kInlineCells];
    } cells;  // hash, unless spilled
    struct {
      uint32_t size;                    // members held (≤ asked)
      uint32_t nbad;                    // positions that were not ids (in the spill)
      int64_t members[kInlineMembers];  // unless spilled
    } list;
  };
  // ---- line 1: bookkeeping
  CacheKey key;
  CacheEntry* newer = nullptr;  // FIFO links: towards the head (newest)
  CacheEntry* older = nullptr;  // towards the tail (oldest)
  char* spill = nullptr;        // malloc'ed; null when everything is inline
  uint32_t spill_bytes = 0;
  uint32_t bytes = 0;  // what the entry is charged (≤ the budget / 16, and < 4 GiB)
  // A list's: it has scores (a zset's) / its members are strings. On line 1: the demo's
  // lists (i64 ids, no scores) never read it.
  bool has_scores = false;
  bool str_members = false;

  // REQUIRES: Encodable(h) and SpillBytes(h) < 4 GiB (the cache charges it first).
  CacheEntry(const CacheKey& k, const CachedHash& h);
  CacheEntry(const CacheKey& k, const CachedList& l);
  CacheEntry(const CacheKey& k, const CachedBlob& b);
  ~CacheEntry() { std::free(spill); }
  CacheEntry(const CacheEntry&) = delete;
  CacheEntry& operator=(const CacheEntry&) = delete;

  static bool Encodable(const CachedHash& h) { return (h.known >> kMaxFields) == 0; }
  // The spill an entry of h / l would have, in bytes (0: none).
  static uint64_t SpillBytes(const CachedHash& h);
  static uint64_t SpillBytes(const CachedList& l);
  static uint64_t SpillBytes(const CachedBlob& b) { return b.bytes.size(); }

  // ---- a hash's cells: cell c holds the c-th field of `known`
  static size_t TagBytes(size_t n) { return (n + 7) & ~size_t{7}; }
  size_t CellOf(size_t field) const {
    return PopCount32(static_cast<uint32_t>(known & ((uint64_t{1} << field) - 1)));
  }
  // std::popcount without the POPCNT instruction (not in baseline x86-64) is a libgcc
  // call; this is a few inline instructions, on the path of every field of every hit.
  static size_t PopCount32(uint32_t x) {
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    x = (x + (x >> 4)) & 0x0f0f0f0fu;
    return (x * 0x01010101u) >> 24;
  }
  uint8_t tag(size_t c) const { return spilled ? static_cast<uint8_t>(spill[c]) : cells.tags[c]; }
  // Cell c's 8-byte payload, in memory (a short string's bytes are its first ones).
  const char* payload(size_t c) const {
    return spilled ? spill + TagBytes(PopCount32(known)) + 8 * c
                   : reinterpret_cast<const char*>(&cells.values[c]);
  }
  uint64_t value(size_t c) const {
    if (!spilled) return cells.values[c];
    uint64_t v;
    std::memcpy(&v, payload(c), 8);
    return v;
  }
  // ---- a list's members and non-id positions
  const int64_t* members() const {
    return spilled ? reinterpret_cast<const int64_t*>(spill) : list.members;
  }
  const uint32_t* bad() const {
    return reinterpret_cast<const uint32_t*>(spill + (spilled ? 8 * size_t{list.size} : 0));
  }
  // Where a list's scores start in the spill: after its members (when spilled) and its
  // non-id positions, 8-aligned; its strings follow the scores.
  static size_t ScoresAt(size_t n, size_t nbad, bool spilled) {
    return ((spilled ? 8 * n : 0) + 4 * nbad + 7) & ~size_t{7};
  }
  const double* scores() const {
    return reinterpret_cast<const double*>(spill + ScoresAt(list.size, list.nbad, spilled));
  }
  const char* strs() const {
    return spill + ScoresAt(list.size, list.nbad, spilled) +
           (has_scores ? 8 * size_t{list.size} : 0);
  }
};
static_assert(sizeof(CacheEntry) == 128, "an entry is two cache lines");

// A hash held by the cache (user or item fields by the task's field index).
class HashRef {
 public:
  static constexpr CacheEntry::Holds kHolds = CacheEntry::Holds::kHash;
  HashRef() = default;
  explicit HashRef(const CacheEntry* e) : e_(e) {}
  explicit operator bool() const { return e_ != nullptr; }

  bool exists() const { return e_->exists; }
  // Bit f set: field f is held.
  uint64_t known() const { return e_->known; }
  CachedField::State state(size_t f) const {
    return static_cast<CachedField::State>(e_->tag(e_->CellOf(f)) & 3);
  }
  // Field f's state and, when it holds a fixed-width value, that value as CachedFields
  // holds it: an i64's or f64's bits, a bool as 0 or 1 (else unspecified).
  // REQUIRES: known() has bit f.
  struct Fixed {
    CachedField::State state;
    uint64_t bits;
  };
  Fixed fixed(size_t f) const {
    const size_t c = e_->CellOf(f);
    return {static_cast<CachedField::State>(e_->tag(c) & 3), e_->value(c)};
  }
  // Field f's string, in the entry (valid as long as the view).
  // REQUIRES: state(f) == kValue and the field is a string.
  std::string_view str(size_t f) const {
    const size_t c = e_->CellOf(f);
    const uint8_t tag = e_->tag(c);
    if (((tag >> 2) & 7) == CacheEntry::kShort) return {e_->payload(c), size_t{tag} >> 5};
    const uint64_t v = e_->value(c);
    return {e_->spill + (v >> 32), v & 0xffffffffu};
  }
  // into[i] = field f. REQUIRES: known() has bit f.
  void CopyField(size_t f, CachedFields& into, size_t i) const {
    const size_t c = e_->CellOf(f);
    const uint8_t tag = e_->tag(c);
    const uint64_t v = e_->value(c);
    switch (static_cast<CacheEntry::Kind>((tag >> 2) & 7)) {
      case CacheEntry::kI64: return into.SetI64(i, static_cast<int64_t>(v));
      case CacheEntry::kF64: return into.SetF64(i, std::bit_cast<double>(v));
      case CacheEntry::kBool: return into.SetBool(i, v != 0);
      case CacheEntry::kShort: {
        char bytes[8];
        std::memcpy(bytes, &v, 8);
        return into.SetStr(i, std::string_view(bytes, tag >> 5));
      }
      case CacheEntry::kStr:
        return into.SetStr(i, std::string_view(e_->spill + (v >> 32), v & 0xffffffffu));
      case CacheEntry::kNone: break;
    }
    into.SetNoValue(i, static_cast<CachedField::State>(tag & 3));
  }
  // The whole hash, copied.
  CachedHash ToHash() const;

 private:
  const CacheEntry* e_ = nullptr;
};

// The head of a list held by the cache: LRANGE key 0 asked-1.
class ListRef {
 public:
  static constexpr CacheEntry::Holds kHolds = CacheEntry::Holds::kList;
  ListRef() = default;
  explicit ListRef(const CacheEntry* e) : e_(e) {}
  explicit operator bool() const { return e_ != nullptr; }

  uint32_t asked() const { return e_->asked; }
  // What Redis returned, in order (≤ asked); bad ids as 0.
  std::span<const int64_t> members() const { return {e_->members(), e_->list.size}; }
  // Positions in members() that were not ids (ascending).
  std::span<const uint32_t> bad() const {
    if (e_->list.nbad == 0) return {};
    return {e_->bad(), e_->list.nbad};
  }
  // The whole list is known: Redis returned fewer members than asked.
  bool complete() const { return e_->list.size < e_->asked; }
  // Serves LRANGE 0 count-1.
  bool Covers(uint32_t count) const { return count <= asked() || complete(); }
  bool has_scores() const { return e_->has_scores; }
  bool str_members() const { return e_->str_members; }
  // A zset's scores, one per member. REQUIRES: has_scores().
  std::span<const double> scores() const { return {e_->scores(), e_->list.size}; }
  // Member i as a string. REQUIRES: str_members().
  std::string_view str(size_t i) const {
    const auto v = static_cast<uint64_t>(e_->members()[i]);
    return {e_->strs() + (v >> 32), v & 0xffffffffu};
  }
  // The whole list head, copied.
  CachedList ToList() const;

 private:
  const CacheEntry* e_ = nullptr;
};

// Bytes held by the cache (CachedBlob), 16-aligned.
class BlobRef {
 public:
  static constexpr CacheEntry::Holds kHolds = CacheEntry::Holds::kBlob;
  BlobRef() = default;
  explicit BlobRef(const CacheEntry* e) : e_(e) {}
  explicit operator bool() const { return e_ != nullptr; }
  std::string_view bytes() const { return {e_->spill, e_->spill_bytes}; }

 private:
  const CacheEntry* e_ = nullptr;
};

}  // namespace rankd
