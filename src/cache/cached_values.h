// The values the shard cache deals in (shard_cache.h): its keys, and a hash's fields or a
// list's head as an IO task decodes them from a reply (tasks/io_replies.h) and hands them
// to the cache to store. The cache keeps them in its own compact form (cache_entry.h).
//
// Threads: plain values; one owner at a time.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/inline_vector.h"
#include "core/key_template.h"
#include "core/parse_int.h"
#include "data/value.h"

namespace rankd {

// A cached value's key: a family of the loaded schema (plan/schema.h Family::cache_id, the
// same for the same definition across reloads) and an id. A str id is keyed by
// StrIdKey(id).
struct CacheKey {
  uint16_t endpoint = 0;  // the shard's endpoint index (RedisPools order)
  uint32_t family = 0;    // Family::cache_id
  int64_t id = 0;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// A str id's key: a 64-bit hash keyed by a random seed drawn once per process, so that
// ids cannot be chosen to collide. Two distinct ids of one family share an entry with
// probability ~2^-64 per pair (docs/cache.md).
int64_t StrIdKey(std::string_view id);

// A family whose values the cache may hold, as an invalidated Redis key is matched to it:
// the key (without the endpoint's prefix) is key_prefix + id + key_suffix.
struct CacheFamily {
  uint32_t family = 0;  // Family::cache_id
  std::string key_prefix;
  std::string key_suffix;
  bool str_ids = false;  // else the id is strict decimal i64
  // Redis's invalidations of its keys drop its entries. false: a family whose entries
  // bound their own staleness (a counters family's cache_ms, docs/cache.md): its keys
  // change with every event, and its entries live their age out instead.
  bool tracked = true;
  KeyTemplate key_template() const { return {key_prefix, key_suffix}; }
};
// Bytes the cache holds for a reader that encodes its own values (a counters key's
// ring fields as read, CounterWindows::AppendEntry); the entry keeps a copy.
struct CachedBlob {
  std::string_view bytes;
};

// The cache keys of `key` (without the endpoint's prefix): one per tracked family whose
// whole template matches it with a valid id (ids of i64 families strict decimal).
template <class Fn>
void ForEachCacheKey(std::span<const CacheFamily> families, uint16_t endpoint, std::string_view key,
                     Fn&& fn);

// One hash field as the task decoded it.
struct CachedField {
  // kBad: null, already counted where it was decoded (a json value that was no object).
  enum class State : uint8_t { kMissing, kUnparsable, kValue, kBad };
  State state = State::kMissing;
  Value value;  // i64, f64, str or bool when kValue
};

// A hash's fields as a task decodes them, and a features node's per-request copies of
// them: a 16-byte cell each (state, type, 8-byte payload), the strings' bytes in one
// buffer. A field's value is one of i64, f64, str or bool (any other Value is kept as no
// value: no field has another type). Cells copy without allocating; up to kInline of
// them (a user's or an item's fields) live inside the object, so decoding one hash
// allocates nothing but its strings.
class CachedFields {
 public:
  static constexpr size_t kInline = 8;

  size_t size() const { return cells_.size(); }
  void resize(size_t n) { cells_.resize(n); }
  // Room for `bytes` of string values.
  void reserve_strings(size_t bytes) { strings_.reserve(bytes); }
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
  // The Value alternative a cell holds (its index in Value; kNone without a value).
  enum Kind : uint8_t { kNone = 0, kI64 = 1, kF64 = 2, kStr = 3, kBool = 4 };
  Kind kind(size_t i) const { return cells_[i].kind; }

 private:
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

// A list's members: up to 12 of them (a media list's head) inside the object, so that
// decoding one allocates nothing; more go to the heap.
using CachedMembers = InlineVector<int64_t, 12>;

// The head of a list or sorted set: LRANGE key 0 asked-1 (ZRANGE key 0 asked-1 REV
// WITHSCORES). Members are i64 ids, or strings (str_members: members[i] is then the
// offset << 32 | length of member i in `strs`).
struct CachedList {
  uint32_t asked = 0;          // how many members were asked for
  CachedMembers members;       // what Redis returned, in order (≤ asked); bad ids as 0
  std::vector<uint32_t> bad;   // positions in members that were not ids (ascending)
  std::vector<double> scores;  // a zset's: one per member (empty: a list, or scores not kept)
  bool str_members = false;
  std::string strs;  // str members' bytes
  // The whole list is known: Redis returned fewer members than asked.
  bool complete() const { return members.size() < asked; }
  // Serves LRANGE 0 count-1.
  bool Covers(uint32_t count) const { return count <= asked || complete(); }
  // Member i as a string. REQUIRES: str_members.
  std::string_view str(size_t i) const {
    const auto v = static_cast<uint64_t>(members[i]);
    return std::string_view(strs).substr(v >> 32, v & 0xffffffffu);
  }
  void AddStr(std::string_view s) {
    members.push_back(static_cast<int64_t>((uint64_t{strs.size()} << 32) | s.size()));
    strs.append(s);
  }
};

template <class Fn>
void ForEachCacheKey(std::span<const CacheFamily> families, uint16_t endpoint, std::string_view key,
                     Fn&& fn) {
  for (const CacheFamily& f : families) {
    if (!f.tracked) continue;
    const std::optional<std::string_view> id = f.key_template().IdIn(key);
    if (!id) continue;
    if (f.str_ids) {
      fn(CacheKey{endpoint, f.family, StrIdKey(*id)});
    } else if (std::optional<int64_t> v = ParseStrictInt<int64_t>(*id)) {
      // ParseStrictInt refuses '+', spaces, trailing bytes and overflow. It takes leading
      // zeros ("user:007" -> 7): at worst an extra invalidation of user:7, which is safe.
      fn(CacheKey{endpoint, f.family, *v});
    }
  }
}

}  // namespace rankd
