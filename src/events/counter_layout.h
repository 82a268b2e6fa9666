// The Redis layout of a `counters` family (docs/events.md), in one place for the writer
// (counter_write.h) and the readers (tasks/read_through.h ReadCounters): one hash per id
// holding a ring of keep_s / bucket_s + 1 slots, slot (bucket index mod ring size), so
// that a key can never hold more buckets than the bound, whatever the writes. A slot is
// binary: the index of the bucket it holds (bucket start / bucket_s, u32 little-endian),
// then one f64 little-endian sum per event type the family counts, in `count` order.
// Slots are grouped kRingBlockSlots to a hash field, named by its block number in
// decimal ("0", "1", ...); a field may be shorter than its block (the slots past its end
// are empty).
//
// Why this shape: a read of 1,000 candidates asks each key for the few fields holding its
// window and decodes them with loads, not text parsing; a write is a short script that
// touches only the fields of the buckets it adds to (no bookkeeping fields, no scan for
// aged-out buckets: a slot holding an older bucket is reset when its position is written
// again, and readers ignore a slot whose index is not the bucket they want).
//
// Threads: pure functions and values; any thread. A CounterWindows is used by one thread
// at a time (SumWindows keeps its scratch in it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/cached_values.h"
#include "plan/schema.h"
#include "redis/resp_replies.h"

namespace rankd {

// Slots per hash field (a block).
inline constexpr int64_t kRingBlockSlots = 8;

// Unix ms -> the second that holds it (floor: a time before 1970 too).
inline int64_t SecondOf(int64_t ms) { return ms / 1000 - (ms % 1000 < 0 ? 1 : 0); }
// The start of the bucket holding second `ts_s`: floor(ts_s / bucket_s) * bucket_s.
int64_t BucketStart(int64_t ts_s, int64_t bucket_s);

// A counters family's ring: its size, its slots' bytes, where a bucket lives.
struct CounterRing {
  explicit CounterRing(const CountersSpec& c);

  int64_t slots = 0;      // keep_s / bucket_s + 1
  size_t slot_bytes = 0;  // 4 + 8 x event types counted
  int64_t bucket_s = 0;

  // The bucket index of bucket start `b` when a slot can hold it (0 < index < 2^32).
  std::optional<uint32_t> IndexOf(int64_t b) const;
  int64_t Block(uint32_t index) const { return (index % slots) / kRingBlockSlots; }
  size_t Offset(uint32_t index) const {
    return static_cast<size_t>((index % slots) % kRingBlockSlots) * slot_bytes;
  }
  int64_t blocks() const { return (slots + kRingBlockSlots - 1) / kRingBlockSlots; }
};

// Block `block`'s hash field: its number in decimal.
std::string RingField(int64_t block);

// One hash field of a ring as a read got it: its bytes (empty: absent, or no slot yet), or
// bad (not a string, or not whole slots within its block's bytes).
struct RingBlock {
  std::string_view bytes;
  bool bad = false;
};

// What a read of some of a counters family's fields at `now_s` asks (HMGET's fields) and
// how the blocks it got become their values: the blocks holding the buckets of the longest
// window asked, the W / bucket_s newest from BucketStart(now_s) (the b with
// now - W < b <= now: W is a multiple of bucket_s).
//
// The blocks come from an HMGET reply (BlocksOfReply) or from a cache entry that holds
// them (BlocksOfEntry; a counters family with cache_ms, docs/cache.md), and are summed by
// one path (SumWindows) either way. A caller keeps one span of hash_fields().size() blocks
// per node and refills it per key: nothing is allocated per key.
class CounterWindows {
 public:
  // `fields`: indexes into family.fields. REQUIRES: family.counters; the family outlives
  // the windows.
  CounterWindows(const KeyFamily& family, std::span<const size_t> fields, int64_t now_s);

  // The hash fields to HMGET, in reply order.
  const std::vector<std::string>& hash_fields() const { return hash_fields_; }

  // An HMGET reply of hash_fields() -> its blocks, out[i] the i-th field's.
  // REQUIRES: reply is an array of hash_fields().size() elements, out.size() too.
  void BlocksOfReply(RespView reply, std::span<RingBlock> out) const;

  // A cache entry's value: the blocks of a read of these windows (block numbers and their
  // bytes, as they were read), appended to `out`. REQUIRES: blocks.size() ==
  // hash_fields().size().
  void AppendEntry(std::span<const RingBlock> blocks, std::string& out) const;
  // An entry made by AppendEntry (of any windows of this family) -> the blocks of these
  // windows, viewing the entry's bytes; false when the entry lacks one of them (a miss:
  // the caller reads the key). REQUIRES: out.size() == hash_fields().size().
  bool BlocksOfEntry(std::string_view entry, std::span<RingBlock> out) const;

  // The blocks of hash_fields() -> the node's field f into cells[first + f]: a sum, a
  // rate, or null (kBad: nothing to count) for a rate whose denominator is 0; kUnparsable
  // when a slot it reads is in a bad block, or a sum is not finite.
  // REQUIRES: blocks.size() == hash_fields().size(), cells.size() >= first + fields.
  void SumWindows(std::span<const RingBlock> blocks, CachedFields& cells, size_t first) const;

 private:
  // Where the k-th newest bucket of the longest window lives, worked out once per node
  // (not per key): its index, the reply element holding its slot, the slot's offset.
  struct Slot {
    uint32_t index = 0;  // 0: no slot can hold it (before 1970 or past 2106)
    uint32_t reply = 0;
    uint32_t offset = 0;
  };
  const CountersSpec& spec_;
  CounterRing ring_;
  std::vector<size_t> fields_;
  std::vector<Slot> slots_;               // newest first
  std::vector<std::string> hash_fields_;  // the blocks' numbers in decimal
  std::vector<uint32_t> block_numbers_;   // parallel to hash_fields_
  // Per hash field (reply element): the k of the window's slots it holds, [first, second).
  std::vector<std::pair<uint32_t, uint32_t>> block_slots_;
  std::vector<int64_t> lengths_;        // the distinct window lengths asked, in buckets, ascending
  std::vector<uint32_t> first_length_;  // per k: the first length > k (that reaches slot k)
  // Scratch of SumWindows (one key at a time): the sums of every type at each length.
  mutable std::vector<double> sums_;
};

}  // namespace rankd
