// The Prometheus text exposition format 0.0.4, written straight into one string with
// std::to_chars. prometheus-cpp's TextSerializer formats through iostreams and took
// most of a scrape's time with a few thousand series; this writer does the same job
// several times faster.
//
// Threads: any thread (pure function).
#pragma once

#include <prometheus/metric_family.h>

#include <string>

namespace rankd {

// Appends one family (nothing when it has no series): a counter, gauge or histogram,
// the types metrics/metric_table.cc exports.
void WriteFamily(const prometheus::MetricFamily& family, std::string& out);

}  // namespace rankd
