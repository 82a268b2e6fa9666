// The metrics of `rankd serve`: one table (metrics/metric_table.cc) with a row per family
// (name, help, type, labels and the reader that finds its series at scrape time), read
// at each scrape and written in the Prometheus text format by metrics/exposition.h.
// Nothing is copied ahead of a scrape: every layer keeps its own counters (core/metric_value.h
// and relaxed atomics), and the readers sum them over shards where a family has no
// `shard` label.
//
// Adding a metric: the counter in the layer that counts (and its increment), the row in
// kMetricTable, and the family's row in docs/operations.md (tests/ops checks it).
//
// Threads: WriteMetrics on any thread while the ShardStats it is given are alive.
#pragma once

#include <span>
#include <string>

#include "core/metric_value.h"
#include "metrics/shard_stats.h"

namespace rankd {

// What the server itself counts (the main thread writes).
struct ServerStats {
  MetricValue<uint64_t> plan_reloads_ok;
  MetricValue<uint64_t> plan_reloads_error;
};

struct ScrapeSources {
  const ServerStats* server = nullptr;
  std::span<const ShardStats* const> shards;  // the shards that have started
};

// Appends the text exposition (format 0.0.4) of every family of the table.
void WriteMetrics(const ScrapeSources& sources, std::string& out);

}  // namespace rankd
