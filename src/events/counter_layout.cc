// counter_layout.h: the ring of bucket slots, and a node's windows read back.
#include "events/counter_layout.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace rankd {

// Slots are little-endian and read with memcpy.
static_assert(std::endian::native == std::endian::little);

int64_t BucketStart(int64_t ts_s, int64_t bucket_s) {
  int64_t q = ts_s / bucket_s;
  if (ts_s % bucket_s != 0 && ts_s < 0) --q;  // floor, not truncation
  return q * bucket_s;
}

CounterRing::CounterRing(const CountersSpec& c)
    : slots(c.keep_s / c.bucket_s + 1), slot_bytes(4 + 8 * c.count.size()), bucket_s(c.bucket_s) {}

std::optional<uint32_t> CounterRing::IndexOf(int64_t b) const {
  const int64_t index = b / bucket_s;
  if (index <= 0 || index > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  return static_cast<uint32_t>(index);
}

std::string RingField(int64_t block) { return std::to_string(block); }

CounterWindows::CounterWindows(const KeyFamily& family, std::span<const size_t> fields,
                               int64_t now_s)
    : spec_(*family.counters), ring_(spec_), fields_(fields.begin(), fields.end()) {
  const int64_t newest = BucketStart(now_s, spec_.bucket_s);
  int64_t longest = 0;
  for (size_t f : fields_) longest = std::max(longest, spec_.fields[f].window_s / spec_.bucket_s);
  std::vector<int32_t> reply_of_block(static_cast<size_t>(ring_.blocks()), -1);
  slots_.resize(static_cast<size_t>(longest));
  for (int64_t k = 0; k < longest; ++k) {
    const auto index = ring_.IndexOf(newest - k * spec_.bucket_s);
    if (!index) continue;
    int32_t& at = reply_of_block[static_cast<size_t>(ring_.Block(*index))];
    if (at < 0) {
      at = static_cast<int32_t>(hash_fields_.size());
      hash_fields_.push_back(RingField(ring_.Block(*index)));
      block_numbers_.push_back(static_cast<uint32_t>(ring_.Block(*index)));
      block_slots_.push_back({static_cast<uint32_t>(k), static_cast<uint32_t>(k)});
    }
    block_slots_[static_cast<size_t>(at)].second = static_cast<uint32_t>(k) + 1;
    slots_[static_cast<size_t>(k)] = {*index, static_cast<uint32_t>(at),
                                      static_cast<uint32_t>(ring_.Offset(*index))};
  }
  for (size_t f : fields_) lengths_.push_back(spec_.fields[f].window_s / spec_.bucket_s);
  std::sort(lengths_.begin(), lengths_.end());
  lengths_.erase(std::unique(lengths_.begin(), lengths_.end()), lengths_.end());
  sums_.resize(lengths_.size() * spec_.count.size());
  first_length_.resize(slots_.size());
  for (size_t k = 0; k < slots_.size(); ++k)
    first_length_[k] = static_cast<uint32_t>(
        std::upper_bound(lengths_.begin(), lengths_.end(), static_cast<int64_t>(k)) -
        lengths_.begin());
}

void CounterWindows::BlocksOfReply(RespView reply, std::span<RingBlock> out) const {
  size_t i = 0;
  const size_t block_bytes = ring_.slot_bytes * kRingBlockSlots;
  for (RespView v : reply) {
    RingBlock& b = out[i++];
    if (v.is_string() && v.str().size() % ring_.slot_bytes == 0 && v.str().size() <= block_bytes)
      b = {v.str(), false};
    else
      b = {{}, !v.is_nil()};
  }
}

// An entry: u32 n, then n records {u32 block number, u32 offset of its bytes from the
// entry's start, u32 size (kBadBlock: bad)}, then the bytes. Native-endian: an entry never
// leaves the process.
namespace {
constexpr uint32_t kBadBlock = 0xffffffff;
struct EntryRecord {
  uint32_t block, offset, size;
};
}  // namespace

void CounterWindows::AppendEntry(std::span<const RingBlock> blocks, std::string& out) const {
  const size_t start = out.size();
  const auto n = static_cast<uint32_t>(blocks.size());
  size_t at = 4 + sizeof(EntryRecord) * n;
  out.resize(start + at);
  std::memcpy(out.data() + start, &n, 4);
  for (uint32_t i = 0; i < n; ++i) {
    const RingBlock& b = blocks[i];
    const EntryRecord r{block_numbers_[i], static_cast<uint32_t>(at),
                        b.bad ? kBadBlock : static_cast<uint32_t>(b.bytes.size())};
    std::memcpy(out.data() + start + 4 + sizeof(EntryRecord) * i, &r, sizeof r);
    out.append(b.bytes);
    at += b.bytes.size();
  }
}

bool CounterWindows::BlocksOfEntry(std::string_view entry, std::span<RingBlock> out) const {
  uint32_t n;
  std::memcpy(&n, entry.data(), 4);
  const char* records = entry.data() + 4;
  // A node's blocks and an entry's are a few each (at most a ring's): a scan per block.
  for (size_t i = 0; i < block_numbers_.size(); ++i) {
    bool found = false;
    for (uint32_t j = 0; j < n && !found; ++j) {
      EntryRecord r;
      std::memcpy(&r, records + sizeof(EntryRecord) * j, sizeof r);
      if (r.block != block_numbers_[i]) continue;
      out[i] =
          r.size == kBadBlock ? RingBlock{{}, true} : RingBlock{entry.substr(r.offset, r.size)};
      found = true;
    }
    if (!found) return false;
  }
  return true;
}

void CounterWindows::SumWindows(std::span<const RingBlock> blocks, CachedFields& cells,
                                size_t first) const {
  // The slots of the blocks that came back, newest bucket first (a block holds a run of
  // the window's buckets, and the blocks come in the order of their newest): each slot
  // holding its bucket adds every type's sum to the sums of the window lengths that reach
  // it, so each length's sums are added in the same order as one pass over the window. A
  // block that is absent or empty (most of a sparse key's) costs one test. A count stays
  // an exact integer in a double up to 2^53; a sum that is not finite, or a length
  // reaching a bad block, makes its fields kUnparsable.
  const size_t types = spec_.count.size();
  const size_t lengths = lengths_.size();
  std::fill(sums_.begin(), sums_.end(), 0.0);
  int64_t bad_from = static_cast<int64_t>(slots_.size());  // the first k in a bad block
  for (size_t i = 0; i < block_slots_.size(); ++i) {
    const RingBlock& b = blocks[i];
    if (b.bad) bad_from = std::min<int64_t>(bad_from, block_slots_[i].first);
    if (b.bytes.empty()) continue;
    for (uint32_t k = block_slots_[i].first; k < block_slots_[i].second; ++k) {
      const Slot& s = slots_[k];
      uint32_t held = 0;
      if (s.offset + ring_.slot_bytes <= b.bytes.size())
        std::memcpy(&held, b.bytes.data() + s.offset, 4);
      if (held != s.index || held == 0) continue;  // empty, past the end, or aged out
      const char* slot_sums = b.bytes.data() + s.offset + 4;
      for (size_t j = first_length_[k]; j < lengths; ++j)
        for (size_t t = 0; t < types; ++t) {
          double x;
          std::memcpy(&x, slot_sums + 8 * t, 8);
          sums_[types * j + t] += x;
        }
    }
  }
  // Type t's sum over the n newest buckets; false when it cannot be trusted.
  auto window = [&](uint32_t t, int64_t n, double& sum) {
    const auto j = static_cast<size_t>(std::lower_bound(lengths_.begin(), lengths_.end(), n) -
                                       lengths_.begin());
    sum = sums_[types * j + t];
    return n <= bad_from && std::isfinite(sum);
  };
  for (size_t f = 0; f < fields_.size(); ++f) {
    const CounterField& cf = spec_.fields[fields_[f]];
    const int64_t n = cf.window_s / spec_.bucket_s;
    double num = 0, den = 0;
    bool ok = window(cf.num, n, num);
    if (cf.kind == CounterField::Kind::kRate) ok = window(cf.den, n, den) && ok;
    if (!ok) {
      cells.SetNoValue(first + f, CachedField::State::kUnparsable);
      continue;
    }
    if (cf.kind == CounterField::Kind::kSum) {
      cells.SetF64(first + f, num);
      continue;
    }
    const double d = den + cf.prior_a + cf.prior_b;
    const double rate = (num + cf.prior_a) / d;
    if (d == 0 || !std::isfinite(rate)) {
      cells.SetNoValue(first + f, CachedField::State::kBad);  // a null, not a bad value
      continue;
    }
    cells.SetF64(first + f, rate);
  }
}

}  // namespace rankd
