// What admission (rank/admission.h) counts for /metrics: its limit, its refusals by
// reason and priority, its no-load measurements. Here, below the request path, so that
// the scrape (metrics/metric_table.cc) reads it without depending on the path.
//
// Threads: the shard's loop thread writes; scrapes read from any thread (relaxed atomics).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "api/rank_request.h"
#include "core/metric_value.h"

namespace rankd {

// Why a request was refused (rankd_admission_refusals_total's `reason`).
enum class Refusal : uint8_t { kLimit, kDeadline, kCount };
std::string_view RefusalName(Refusal r);  // "limit", "deadline"

// What a scrape reads (relaxed atomics; the loop writes).
struct AdmissionStats {
  MetricValue<double> limit;
  // By reason, then priority.
  std::array<std::array<MetricValue<uint64_t>, static_cast<size_t>(Priority::kCount)>,
             static_cast<size_t>(Refusal::kCount)>
      refusals{};
  MetricValue<uint64_t> probes;            // no-load measurements done
  MetricValue<uint64_t> priority_ignored;  // "priority" without --allow-priority
};

}  // namespace rankd
