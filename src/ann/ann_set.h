// AnnIndexes: the indexes one process serves (one copy each, shared read-only by every
// shard), published as an immutable AnnSet that the builder replaces whole when an index
// is built, so that a request keeps the set it started with (RequestState holds the
// AnnSetPtr) while the next one sees the new index. Also the per-index counters of
// /metrics (docs/operations.md), which live for the whole process, by index name, as the
// families' value counters do (plan/schema.h FamilyValueStats).
//
// Threads: Current from any thread (an atomic shared_ptr load: the shard loops, once per
// request of a plan that searches); Install and Retain from the builder or main thread;
// the stats' writer is the builder thread, readers any (a scrape).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ann/ann_index.h"
#include "core/metric_value.h"

namespace rankd {

// The indexes built so far, by name (a few: at most kMaxIndexes).
struct AnnSet {
  std::vector<std::pair<std::string, AnnIndexPtr>> indexes;
  // nullptr when the index has no build yet (or is not declared).
  const AnnIndex* Find(std::string_view name) const {
    for (const auto& [n, idx] : indexes)
      if (n == name) return idx.get();
    return nullptr;
  }
};
using AnnSetPtr = std::shared_ptr<const AnnSet>;

// An index's counters. Builds by outcome: ok (built and installed), loaded (from
// --index-dir), over_max_items, over_max_bytes, failed (Redis or faiss).
struct AnnIndexStats {
  MetricValue<uint64_t> items;
  MetricValue<uint64_t> bytes;
  MetricValue<double> build_seconds;  // the last build's (read, then build), ok or not
  MetricValue<uint64_t> builds_ok, builds_loaded, builds_over_max_items, builds_over_max_bytes,
      builds_failed;
  MetricValue<uint64_t> bad_vectors;  // items skipped: a vector of the wrong length or not finite
  MetricValue<uint64_t> bad_ids;      // keys skipped: the id between the template's texts is no id
};

class AnnIndexes {
 public:
  AnnIndexes();
  AnnSetPtr Current() const { return set_.load(std::memory_order_acquire); }
  // Publishes `index` under its spec's name (replacing the one of that name).
  void Install(AnnIndexPtr index);
  // Drops the indexes whose names are not in `names` (a reload removed them).
  void Retain(const std::vector<std::string>& names);
  // Whether every name has an index (readiness).
  bool Has(const std::vector<std::string>& names) const;
  // The bytes of the installed indexes but `name`'s (the --index-max-bytes check of a
  // build that would replace it).
  size_t BytesBesides(std::string_view name) const;

 private:
  std::mutex write_mu_;  // one writer at a time builds the next set
  std::atomic<AnnSetPtr> set_;
};

// The counters of index `name`, made on first use; stable for the process's life.
AnnIndexStats& AnnIndexStatsOf(const std::string& name);
// fn(name, stats) for every index ever built in this process, in name order.
void ForEachAnnIndexStats(const std::function<void(const std::string&, const AnnIndexStats&)>& fn);

}  // namespace rankd
