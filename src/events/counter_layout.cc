// counter_layout.h: blocks of bucket sums, and a node's windows read back.
#include "events/counter_layout.h"

#include <algorithm>
#include <cmath>

#include "core/parse_f64.h"
#include "core/parse_int.h"

namespace rankd {

int64_t BucketStart(int64_t ts_s, int64_t bucket_s) {
  int64_t q = ts_s / bucket_s;
  if (ts_s % bucket_s != 0 && ts_s < 0) --q;  // floor, not truncation
  return q * bucket_s;
}

int64_t BlockStart(int64_t b, int64_t bucket_s) { return BucketStart(b, bucket_s * kBlockBuckets); }

std::string BlockField(std::string_view type, int64_t block_start_s) {
  std::string f;
  f.reserve(type.size() + 12);
  f.append(type);
  f += ':';
  f += std::to_string(block_start_s);
  return f;
}

bool ParseBlock(std::string_view text, std::span<long double> sums) {
  std::fill(sums.begin(), sums.end(), 0.0L);
  size_t slot = 0;
  while (!text.empty()) {
    if (slot == sums.size()) return false;
    const size_t comma = text.find(',');
    const std::string_view x = text.substr(0, comma);
    // Most sums are small counts: integers first, the general parser for the rest.
    if (auto n = ParseStrictInt<int64_t>(x))
      sums[slot] = static_cast<long double>(*n);
    else if (auto d = ParseStrictF64(x))
      sums[slot] = *d;
    else
      return false;
    ++slot;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return false;  // a trailing comma
  }
  return true;
}

CounterWindows::CounterWindows(const KeyFamily& family, std::span<const size_t> fields,
                               int64_t now_s)
    : spec_(*family.counters), fields_(fields.begin(), fields.end()) {
  spans_.resize(spec_.count.size());
  for (size_t f : fields_) {
    const CounterField& cf = spec_.fields[f];
    const auto n = static_cast<uint32_t>(cf.window_s / spec_.bucket_s);
    spans_[cf.num].buckets = std::max(spans_[cf.num].buckets, n);
    if (cf.kind == CounterField::Kind::kRate)
      spans_[cf.den].buckets = std::max(spans_[cf.den].buckets, n);
  }
  newest_ = BucketStart(now_s, spec_.bucket_s);
  const int64_t span = spec_.bucket_s * kBlockBuckets;
  for (size_t t = 0; t < spans_.size(); ++t) {
    Span& s = spans_[t];
    if (s.buckets == 0) continue;
    s.first = static_cast<uint32_t>(hash_fields_.size());
    s.oldest = BlockStart(newest_ - (s.buckets - 1) * spec_.bucket_s, spec_.bucket_s);
    for (int64_t b = s.oldest; b <= newest_; b += span)
      hash_fields_.push_back(BlockField(spec_.count[t], b));
  }
}

void CounterWindows::SumWindows(RespView reply, CachedFields& cells, size_t first) const {
  // Per type, the sums of its windows of 1..buckets newest buckets (prefix[k]: of the k
  // newest), and how many of those buckets lie in a block that did not parse. Count-only
  // sums are integers and add exactly in long double; sums of values to its precision.
  std::vector<std::vector<long double>> prefix(spans_.size());
  std::vector<std::vector<uint32_t>> bad(spans_.size());
  std::vector<long double> sums;
  std::vector<uint8_t> block_ok;
  auto it = reply.begin();
  for (size_t t = 0; t < spans_.size(); ++t) {
    const Span& s = spans_[t];
    if (s.buckets == 0) continue;
    const size_t blocks =
        static_cast<size_t>((newest_ - s.oldest) / (spec_.bucket_s * kBlockBuckets)) + 1;
    sums.assign(blocks * kBlockBuckets, 0.0L);
    block_ok.assign(blocks, 1);
    for (size_t k = 0; k < blocks; ++k, ++it) {
      const RespView v = *it;
      std::span<long double> block(sums.data() + k * kBlockBuckets, kBlockBuckets);
      if (v.is_string())
        block_ok[k] = ParseBlock(v.str(), block) ? 1 : 0;
      else if (!v.is_nil())
        block_ok[k] = 0;
    }
    prefix[t].assign(s.buckets + 1, 0.0L);
    bad[t].assign(s.buckets + 1, 0);
    for (uint32_t k = 0; k < s.buckets; ++k) {
      const auto at =
          static_cast<size_t>((newest_ - k * spec_.bucket_s - s.oldest) / spec_.bucket_s);
      const bool ok = block_ok[at / kBlockBuckets] != 0;
      prefix[t][k + 1] = prefix[t][k] + (ok ? sums[at] : 0.0L);
      bad[t][k + 1] = bad[t][k] + (ok ? 0 : 1);
    }
  }
  // Type t's window: its prefix and bad count at window_s / bucket_s buckets.
  auto window = [&](uint32_t t, int64_t window_s, long double& sum) {
    const auto n = static_cast<size_t>(window_s / spec_.bucket_s);
    sum = prefix[t][n];
    return bad[t][n] == 0;
  };
  for (size_t f = 0; f < fields_.size(); ++f) {
    const CounterField& cf = spec_.fields[fields_[f]];
    long double num = 0, den = 0;
    bool ok = window(cf.num, cf.window_s, num);
    if (cf.kind == CounterField::Kind::kRate) ok = window(cf.den, cf.window_s, den) && ok;
    if (!ok) {
      cells.SetNoValue(first + f, CachedField::State::kUnparsable);
      continue;
    }
    if (cf.kind == CounterField::Kind::kSum) {
      cells.SetF64(first + f, static_cast<double>(num));
      continue;
    }
    const long double d = den + cf.prior_a + cf.prior_b;
    const double rate = static_cast<double>((num + cf.prior_a) / d);
    if (d == 0 || !std::isfinite(rate)) {
      cells.SetNoValue(first + f, CachedField::State::kBad);  // a null, not a bad value
      continue;
    }
    cells.SetF64(first + f, rate);
  }
}

}  // namespace rankd
