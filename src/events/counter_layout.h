// The Redis layout of a `counters` family (docs/events.md), in one place for the writer
// (counter_write.h) and the readers (tasks/read_through.h ReadCounters): one hash per id;
// per event type, its buckets grouped in blocks of kBlockBuckets consecutive buckets
// aligned to the Unix epoch, one field per block named "<type>:<block start, Unix s>"
// holding the block's sums as decimal text separated by commas, oldest bucket first,
// trailing zeros left out ("3,0,1"); and two bookkeeping fields without a ':' ("_lo",
// "_hi": the oldest bucket that may hold a sum, the newest ever written).
//
// Why blocks: a read asks for the window's buckets of 1,000 candidates. One field per
// bucket made a demo key 340 fields (a listpack) and its HMGET of 48 buckets cost Redis
// ~65 us a key; blocks make it ~14 fields and an HMGET of 4 (~1.3 us, docs/events.md).
//
// Threads: pure functions and immutable values; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cached_values.h"
#include "plan/schema.h"
#include "redis/resp_replies.h"

namespace rankd {

// Buckets per block (per hash field).
inline constexpr int64_t kBlockBuckets = 32;

// Unix ms -> the second that holds it (floor: a time before 1970 too).
inline int64_t SecondOf(int64_t ms) { return ms / 1000 - (ms % 1000 < 0 ? 1 : 0); }
// The start of the bucket holding second `ts_s`: floor(ts_s / bucket_s) * bucket_s.
int64_t BucketStart(int64_t ts_s, int64_t bucket_s);
// The start of the block holding bucket start `b`.
int64_t BlockStart(int64_t b, int64_t bucket_s);
// "<type>:<block_start_s>".
std::string BlockField(std::string_view type, int64_t block_start_s);
inline constexpr std::string_view kLowField = "_lo";
inline constexpr std::string_view kHighField = "_hi";

// A block's text -> its kBlockBuckets sums (absent ones 0); false when it is not a list of
// at most kBlockBuckets finite numbers.
bool ParseBlock(std::string_view text, std::span<long double> sums);

// What a read of some of a counters family's fields at `now_s` asks (HMGET's fields) and
// how the reply becomes their values: a type is asked for the blocks that hold the
// buckets of its longest window, the W / bucket_s newest from BucketStart(now_s) (the b
// with now - W < b <= now: W is a multiple of bucket_s).
class CounterWindows {
 public:
  // `fields`: indexes into family.fields. REQUIRES: family.counters; the family outlives
  // the windows.
  CounterWindows(const KeyFamily& family, std::span<const size_t> fields, int64_t now_s);

  // The hash fields to HMGET, in reply order.
  const std::vector<std::string>& hash_fields() const { return hash_fields_; }

  // An HMGET reply (an array of hash_fields().size() elements, nil where a block is
  // absent) -> the node's field f into cells[first + f]: a sum, a rate, or null (kBad:
  // nothing to count) for a rate whose denominator is 0; kUnparsable when a block it
  // reads is no list of numbers. REQUIRES: that shape, cells.size() >= first + fields.
  void SumWindows(RespView reply, CachedFields& cells, size_t first) const;

 private:
  struct Span {            // a type's blocks in hash_fields_, oldest first
    uint32_t first = 0;    // index of its oldest block
    uint32_t buckets = 0;  // buckets of its longest window; 0: not asked
    int64_t oldest = 0;    // start of its oldest block
  };
  const CountersSpec& spec_;
  std::vector<size_t> fields_;
  std::vector<Span> spans_;  // by type index
  int64_t newest_ = 0;       // BucketStart(now)
  std::vector<std::string> hash_fields_;
};

}  // namespace rankd
