// The similarity of two float32 vectors of one dimension (docs/vectors.md): the inner
// product, the cosine and the Euclidean distance, as the expression functions dot, cosine
// and l2 compute them (plan/expr_eval.cc), row by row over a `vec` column.
//
// The summation order is fixed, so that every build and every instruction set gives the
// same bits: element i is widened to double and its term (a product, or a difference
// squared: exact or nearly, 48 of 53 bits) goes to lane i mod kLanes, each lane summed in
// increasing i; the 16 lanes are then added as a fixed tree (lane j + lane j+8, then +4,
// +2, +1). No step is left to the compiler to reorder: the lanes are independent sums, so
// GCC vectorises them (SSE2, AVX2, AVX-512 clones alike: 8, 4 or 2 registers of lanes)
// without reassociating anything, and -ffp-contract=off (meson.build) keeps a product and
// its sum two roundings on every target. Summing in double makes the result within a few
// ulps of the exact value for any dimension up to kMaxVecDim; float lanes would be about
// twice as fast and lose ~D·2^-24 relative.
//
// Threads: pure functions; any thread.
#pragma once

#include <cmath>
#include <cstddef>

namespace rankd::vec {

inline constexpr size_t kLanes = 16;

// The fixed tree over the lanes.
inline double SumLanes(const double (&s)[kLanes]) {
  double t[kLanes / 2];
  for (size_t j = 0; j < 8; ++j) t[j] = s[j] + s[j + 8];
  for (size_t j = 0; j < 4; ++j) t[j] += t[j + 4];
  for (size_t j = 0; j < 2; ++j) t[j] += t[j + 2];
  return t[0] + t[1];
}

// Calls term(lane, i) for every element i < d, lane = i mod kLanes, in the fixed order:
// whole groups of kLanes, then the tail.
template <class Term>
inline void ForEachLane(size_t d, Term&& term) {
  size_t i = 0;
  for (; i + kLanes <= d; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) term(j, i + j);
  for (size_t j = 0; i + j < d; ++j) term(j, i + j);
}

// Σ a[i]·b[i].
inline double Dot(const float* a, const float* b, size_t d) {
  double s[kLanes] = {};
  ForEachLane(d, [&](size_t j, size_t i) { s[j] += double(a[i]) * double(b[i]); });
  return SumLanes(s);
}

// The three sums of a cosine: a·b, a·a and b·b, in one pass.
struct CosineSums {
  double ab, aa, bb;
};
inline CosineSums Cosine(const float* a, const float* b, size_t d) {
  double ab[kLanes] = {}, aa[kLanes] = {}, bb[kLanes] = {};
  ForEachLane(d, [&](size_t j, size_t i) {
    const double x = a[i], y = b[i];
    ab[j] += x * y;
    aa[j] += x * x;
    bb[j] += y * y;
  });
  return {SumLanes(ab), SumLanes(aa), SumLanes(bb)};
}

// a·b / (|a|·|b|); false (no value) when either vector is all zeros. Terms of finite
// float32 cannot underflow to zero in double, so a zero norm means an all-zero vector.
inline bool CosineOf(const CosineSums& s, double& out) {
  if (s.aa == 0 || s.bb == 0) return false;
  out = s.ab / (std::sqrt(s.aa) * std::sqrt(s.bb));
  return true;
}

// sqrt(Σ (a[i] - b[i])²): the Euclidean distance.
inline double L2(const float* a, const float* b, size_t d) {
  double s[kLanes] = {};
  ForEachLane(d, [&](size_t j, size_t i) {
    const double x = double(a[i]) - double(b[i]);
    s[j] += x * x;
  });
  return std::sqrt(SumLanes(s));
}

}  // namespace rankd::vec
