// SeriesSet: one shard's series whose label sets come from the loaded plans and
// experiments (plan, node, model, experiment names). The shard creates and drops them
// when it installs a plan snapshot, never per request; a request holds pointers to the
// series it counts in. A scrape reads the set as last published, which keeps every
// series it lists alive while the scrape reads it.
//
// Threads: Retain, Release and Publish on the shard's loop thread (or, once the loop has
// stopped, the thread destroying the shard); Current() and reading a Series: any.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/metric_value.h"
#include "core/published.h"

namespace rankd {

// The families whose series a SeriesSet holds (metrics/metric_table.cc writes them).
enum class SeriesFamily : uint8_t {
  kRankRequests,
  kRankDuration,
  kDeadlineExceeded,
  kNodeDuration,
  kNodeOutcomes,
  kDegraded,
  kModelRows,
  kModelEval,
  kModelNullRows,
  kExperimentRequests,
  kShadowRuns,
  kShadowOverlap,
  kShadowCorrelation,
  kShadowDuration,
  kPlanQuality,  // a gauge: Series::gauge
  kServedStateWrites,
  kEvents,  // POST /events, by event type and outcome
  kCount,
};

// One series: a counter, or a histogram when made with bucket bounds.
struct Series {
  Series(std::vector<std::string> l, std::span<const double> bounds) : labels(std::move(l)) {
    if (!bounds.empty()) histogram.emplace(bounds);
  }
  // Owner thread.
  void Add(uint64_t n = 1) { count += n; }
  void Observe(double v) { histogram->Observe(v); }

  const std::vector<std::string> labels;  // values, in the order of the family's labels
  MetricValue<uint64_t> count;
  MetricValue<double> gauge;  // the families that are gauges
  std::optional<MetricHistogram> histogram;
};

class SeriesSet {
 public:
  // The series of `family` with these label values: made at 0 by the first call, shared
  // by the later ones. Each call takes a reference, which Release gives back; the series
  // leaves the set with its last reference. Scrapes see the change after Publish.
  Series* Retain(SeriesFamily family, std::vector<std::string> labels,
                 std::span<const double> bounds = {});
  void Release(const Series* s);
  // Scrapes see the set as it is now (nothing is done when nothing changed).
  void Publish();

  using Snapshot = std::array<std::vector<std::shared_ptr<const Series>>,
                              static_cast<size_t>(SeriesFamily::kCount)>;
  std::shared_ptr<const Snapshot> Current() const { return published_.Get(); }

 private:
  struct Entry {
    SeriesFamily family;
    std::shared_ptr<Series> series;
    size_t refs = 0;
  };
  using Entries = std::map<std::string, Entry>;  // by family and label values
  Entries entries_;
  std::unordered_map<const Series*, Entries::iterator> by_series_;
  bool changed_ = false;
  Published<Snapshot> published_;
};

}  // namespace rankd
