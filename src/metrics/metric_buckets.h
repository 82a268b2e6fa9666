// The bucket bounds of rankd's histograms (upper bounds in their unit; +Inf is implied).
//
// Threads: constants, any thread.
#pragma once

#include <array>

namespace rankd {

// Request latencies: 100 µs .. 10 s.
inline constexpr std::array<double, 16> kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
// Node latencies start lower: many nodes take microseconds.
inline constexpr std::array<double, 15> kNodeBuckets = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                                                        0.0005,  0.001,    0.0025,  0.005,  0.01,
                                                        0.025,   0.05,     0.1,     0.25,   1.0};
// Loop lag: 50 µs .. 1 s.
inline constexpr std::array<double, 11> kLagBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0};
// Time to an admission refusal: 10 µs .. 100 ms (the target is p99 under 1 ms).
inline constexpr std::array<double, 12> kRefusalBuckets = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1};
// Overlap at k: 0 .. 1 in tenths; rank correlation: -1 .. 1 in fifths.
inline constexpr std::array<double, 10> kOverlapBuckets = {0.1, 0.2, 0.3, 0.4, 0.5,
                                                           0.6, 0.7, 0.8, 0.9, 1.0};
inline constexpr std::array<double, 10> kCorrelationBuckets = {-0.8, -0.6, -0.4, -0.2, 0.0,
                                                               0.2,  0.4,  0.6,  0.8,  1.0};

}  // namespace rankd
