// /console/api/metrics: the per-plan counters of rankd_rank_requests_total and
// rankd_rank_duration_seconds, and rankd_events_total by outcome, as JSON for the
// console's live view, summed over shards.
// It reads the same series /metrics does (the shards' SeriesSets), not counters of its
// own. The shape is in docs/api.md ("The console").
//
// Threads: any thread while the ShardStats it is given are alive (the scrape thread).
#pragma once

#include <cstdint>
#include <string>

#include "metrics/metric_table.h"

namespace rankd {

// Appends {"plans": {...}, "events": {...}, "now_ms": now_ms}: every plan with series on
// any shard.
void WriteConsoleMetrics(const ScrapeSources& sources, int64_t now_ms, std::string& out);

}  // namespace rankd
