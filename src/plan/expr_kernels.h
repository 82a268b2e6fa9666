// Column kernels of the expression VM (private to src/plan/expr_eval.cc): each is one
// tight loop over contiguous arrays, written so that GCC auto-vectorises it. A scalar
// operand (const, param, or an op over those) is read at index 0 for every row; the
// template flags SA/SB make that a compile-time stride so both shapes vectorise.
//
// Threads: pure functions; any thread.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plan/expr_program.h"

namespace rankd::expr {

// Calls f.template operator()<SA, SB>() with the runtime flags made compile-time.
template <class F>
inline void Dispatch2(bool sa, bool sb, F&& f) {
  if (sa) {
    if (sb) f.template operator()<true, true>();
    else f.template operator()<true, false>();
  } else if (sb) {
    f.template operator()<false, true>();
  } else {
    f.template operator()<false, false>();
  }
}

template <class F>
inline void DispatchCmp(CmpOp op, F&& f) {
  switch (op) {
    case CmpOp::kEq: f.template operator()<CmpOp::kEq>(); break;
    case CmpOp::kNe: f.template operator()<CmpOp::kNe>(); break;
    case CmpOp::kLt: f.template operator()<CmpOp::kLt>(); break;
    case CmpOp::kLe: f.template operator()<CmpOp::kLe>(); break;
    case CmpOp::kGt: f.template operator()<CmpOp::kGt>(); break;
    case CmpOp::kGe: f.template operator()<CmpOp::kGe>(); break;
  }
}

template <CmpOp C, class T>
inline bool Compare(T a, T b) {
  if constexpr (C == CmpOp::kEq) return a == b;
  if constexpr (C == CmpOp::kNe) return a != b;
  if constexpr (C == CmpOp::kLt) return a < b;
  if constexpr (C == CmpOp::kLe) return a <= b;
  if constexpr (C == CmpOp::kGt) return a > b;
  if constexpr (C == CmpOp::kGe) return a >= b;
}

inline bool ApplyOrder(CmpOp op, int ord) {
  switch (op) {
    case CmpOp::kEq: return ord == 0;
    case CmpOp::kNe: return ord != 0;
    case CmpOp::kLt: return ord < 0;
    case CmpOp::kLe: return ord <= 0;
    case CmpOp::kGt: return ord > 0;
    case CmpOp::kGe: return ord >= 0;
  }
  return false;
}

// Exact order of an i64 and an f64 (-1, 0, 1; 2 when b is NaN). Rounding a to double is
// monotonic, so a strict difference after rounding is the true order; only a tie needs
// the exact integer comparison.
inline int OrderMixed(int64_t a, double b) {
  if (b != b) return 2;
  double da = static_cast<double>(a);
  if (da < b) return -1;
  if (da > b) return 1;
  if (b >= 9223372036854775808.0) return -1;  // a rounded up to 2^63
  int64_t ib = static_cast<int64_t>(b);      // b is integral here (it equals a double of a)
  return a < ib ? -1 : (a > ib ? 1 : 0);
}

// True for finite doubles; x - x is NaN for inf and NaN, and compiles to a vector compare.
inline bool Finite(double x) { return x - x == 0.0; }

// out = a OP b over i64 with overflow -> invalid.
template <Op O, bool SA, bool SB>
inline void I64Binary(size_t n, const int64_t* __restrict a, const uint8_t* __restrict va,
                      const int64_t* __restrict b, const uint8_t* __restrict vb,
                      int64_t* __restrict out, uint8_t* __restrict vout) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    long long r;
    bool overflow = false;
    if constexpr (O == Op::kAdd) overflow = __builtin_add_overflow(a[ia], b[ib], &r);
    if constexpr (O == Op::kSub) overflow = __builtin_sub_overflow(a[ia], b[ib], &r);
    if constexpr (O == Op::kMul) overflow = __builtin_mul_overflow(a[ia], b[ib], &r);
    if constexpr (O == Op::kMin) r = a[ia] < b[ib] ? a[ia] : b[ib];
    if constexpr (O == Op::kMax) r = a[ia] > b[ib] ? a[ia] : b[ib];
    out[k] = r;
    vout[k] = va[ia] & vb[ib] & static_cast<uint8_t>(!overflow);
  }
}

// out = a OP b over f64; non-finite results (x/0, overflow) -> invalid.
template <Op O, bool SA, bool SB>
inline void F64Binary(size_t n, const double* __restrict a, const uint8_t* __restrict va,
                      const double* __restrict b, const uint8_t* __restrict vb,
                      double* __restrict out, uint8_t* __restrict vout) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    double r;
    if constexpr (O == Op::kAdd) r = a[ia] + b[ib];
    if constexpr (O == Op::kSub) r = a[ia] - b[ib];
    if constexpr (O == Op::kMul) r = a[ia] * b[ib];
    if constexpr (O == Op::kDiv) r = a[ia] / b[ib];
    if constexpr (O == Op::kMin) r = a[ia] < b[ib] ? a[ia] : b[ib];
    if constexpr (O == Op::kMax) r = a[ia] > b[ib] ? a[ia] : b[ib];
    if constexpr (O == Op::kPow) r = std::pow(a[ia], b[ib]);
    out[k] = r;
    vout[k] = va[ia] & vb[ib] & static_cast<uint8_t>(Finite(r));
  }
}

// out = a if valid else b, for any storage T.
template <class T, bool SA, bool SB>
inline void Coalesce(size_t n, const T* __restrict a, const uint8_t* __restrict va,
                     const T* __restrict b, const uint8_t* __restrict vb, T* __restrict out,
                     uint8_t* __restrict vout) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    out[k] = va[ia] ? a[ia] : b[ib];
    vout[k] = va[ia] | vb[ib];
  }
}

template <CmpOp C, class T, bool SA, bool SB>
inline void CmpKernel(size_t n, const T* __restrict a, const uint8_t* __restrict va,
                      const T* __restrict b, const uint8_t* __restrict vb,
                      uint8_t* __restrict out) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    out[k] = va[ia] & vb[ib] & static_cast<uint8_t>(Compare<C>(a[ia], b[ib]));
  }
}

}  // namespace rankd::expr
