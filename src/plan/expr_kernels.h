// Column kernels of the expression VM (private to src/plan/expr_eval.cc): each is one
// tight loop over contiguous arrays, written so that GCC auto-vectorises it. A scalar
// operand (const, param, or an op over those) is read at index 0 for every row; the
// template flags SA/SB make that a compile-time stride so both shapes vectorise.
//
// Threads: pure functions; any thread.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "plan/expr_program.h"

namespace rankd::expr {

// Calls f.template operator()<SA, SB>() with the runtime flags made compile-time.
template <class F>
inline void Dispatch2(bool sa, bool sb, F&& f) {
  if (sa) {
    if (sb)
      f.template operator()<true, true>();
    else
      f.template operator()<true, false>();
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
  int64_t ib = static_cast<int64_t>(b);       // b is integral here (it equals a double of a)
  return a < ib ? -1 : (a > ib ? 1 : 0);
}

// 1 for finite doubles, 0 for inf and NaN (exponent all ones). Integer arithmetic on the
// bits, not a double compare: GCC 12 does not vectorise a double compare stored as bytes
// on baseline x86-64, but it does this (an all-ones exponent carries into bit 63).
inline uint8_t Finite(double x) {
  uint64_t e = (std::bit_cast<uint64_t>(x) & 0x7ff0000000000000ull) + 0x0010000000000000ull;
  return static_cast<uint8_t>(1 ^ (e >> 63));
}

// out = a OP b over i64 with overflow -> invalid.
template <Op O, bool SA, bool SB>
inline void I64Binary(size_t n, const int64_t* __restrict a, const uint8_t* __restrict va,
                      const int64_t* __restrict b, const uint8_t* __restrict vb,
                      int64_t* __restrict out, uint8_t* __restrict vout) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    long long r;
    uint64_t overflow = 0;  // 0 or 1; a bool here would stop the vectoriser
    // Add and subtract wrap in unsigned arithmetic and test the sign bits (overflow iff
    // the result's sign differs from both operands', resp. from a's and not b's): the
    // same answer as __builtin_add_overflow, but a form GCC vectorises.
    if constexpr (O == Op::kAdd) {
      uint64_t u = static_cast<uint64_t>(a[ia]) + static_cast<uint64_t>(b[ib]);
      r = static_cast<long long>(u);
      overflow = ((static_cast<uint64_t>(a[ia]) ^ u) & (static_cast<uint64_t>(b[ib]) ^ u)) >> 63;
    }
    if constexpr (O == Op::kSub) {
      uint64_t u = static_cast<uint64_t>(a[ia]) - static_cast<uint64_t>(b[ib]);
      r = static_cast<long long>(u);
      overflow = ((static_cast<uint64_t>(a[ia]) ^ static_cast<uint64_t>(b[ib])) &
                  (static_cast<uint64_t>(a[ia]) ^ u)) >>
                 63;
    }
    if constexpr (O == Op::kMul) overflow = __builtin_mul_overflow(a[ia], b[ib], &r) ? 1 : 0;
    if constexpr (O == Op::kMin) r = a[ia] < b[ib] ? a[ia] : b[ib];
    if constexpr (O == Op::kMax) r = a[ia] > b[ib] ? a[ia] : b[ib];
    out[k] = r;
    vout[k] = va[ia] & vb[ib] & static_cast<uint8_t>(1 ^ overflow);
  }
}

// out = a OP b over f64; non-finite results (x/0, overflow) -> invalid, unless !Check
// (Instr::unchecked).
template <Op O, bool SA, bool SB, bool Check = true>
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
    if constexpr (Check)
      vout[k] = va[ia] & vb[ib] & Finite(r);
    else
      vout[k] = va[ia] & vb[ib];
  }
}

// out = a if valid else b, for T of 4 or 8 bytes. A bit-select on the integer image
// rather than `?:`, which GCC 12 does not vectorise when the condition is a byte.
template <class T, bool SA, bool SB>
inline void Coalesce(size_t n, const T* __restrict a, const uint8_t* __restrict va,
                     const T* __restrict b, const uint8_t* __restrict vb, T* __restrict out,
                     uint8_t* __restrict vout) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(U));
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    const U take_a = U{0} - static_cast<U>(va[ia]);
    const U x = (std::bit_cast<U>(a[ia]) & take_a) | (std::bit_cast<U>(b[ib]) & ~take_a);
    out[k] = std::bit_cast<T>(x);
    vout[k] = va[ia] | vb[ib];
  }
}

// The 64 validity bits of words[first / 64 ...] as n bytes of 0/1 (first is a multiple of
// 64: blocks start at multiples of kBlockRows). Eight rows at a time: a multiply copies the
// byte of 8 bits into every byte of a word, a mask keeps bit i in byte i, and adding 0x7f
// carries a set bit into the byte's top bit. A loop per row shifting by the row's bit
// position is ~5x slower (measured: ops/bench vm).
inline void UnpackBits(const uint64_t* __restrict words, size_t first, size_t n,
                       uint8_t* __restrict v) {
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(words + first / 64);
  const size_t whole = n / 8;
  for (size_t j = 0; j < whole; ++j) {
    uint64_t x = (bytes[j] * 0x0101010101010101ull) & 0x8040201008040201ull;
    x = ((x + 0x7f7f7f7f7f7f7f7full) >> 7) & 0x0101010101010101ull;
    std::memcpy(v + 8 * j, &x, 8);
  }
  for (size_t k = 8 * whole; k < n; ++k) v[k] = (bytes[k / 8] >> (k % 8)) & 1;
}

// o[k] = static_cast<double>(x[k]), the same value (one rounding, to nearest), in
// operations SSE2 has for vectors (it has no int64 -> double conversion): x = hi * 2^32 +
// lo; hi and lo go into the mantissas of two large doubles whose difference, minus their
// offsets, is exact; the final add is the one rounding.
inline void I64ToF64(size_t n, const int64_t* __restrict x, double* __restrict o) {
  for (size_t k = 0; k < n; ++k) {
    const uint64_t u = static_cast<uint64_t>(x[k]);
    const double lo = std::bit_cast<double>((u & 0xffffffffull) | 0x4330000000000000ull);
    const double hi = std::bit_cast<double>(((u >> 32) ^ 0x80000000ull) | 0x4530000000000000ull);
    o[k] = (hi - (0x1p84 + 0x1p63 + 0x1p52)) + lo;
  }
}

// m[k] = v[k] & table[c[k]]: a string column through a per-entry result.
inline void LookUp(size_t n, const uint32_t* __restrict c, const uint8_t* __restrict v,
                   const int8_t* __restrict table, uint8_t* __restrict m) {
  for (size_t k = 0; k < n; ++k) m[k] = v[k] & static_cast<uint8_t>(table[c[k]]);
}

// a OP b on int64 as 0/1 in 64-bit integer arithmetic, which SSE2 vectorises (it has no
// 64-bit compares): equality from the sign of x | -x, order from the sign of a - b
// corrected for overflow (Hacker's Delight 2-12).
template <CmpOp C>
inline uint64_t CompareI64(int64_t a, int64_t b) {
  const uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
  const uint64_t d = x ^ y;
  const uint64_t ne = (d | (0 - d)) >> 63;
  const uint64_t diff = x - y;
  const uint64_t lt = (diff ^ (d & (diff ^ x))) >> 63;  // a < b
  if constexpr (C == CmpOp::kEq) return ne ^ 1;
  if constexpr (C == CmpOp::kNe) return ne;
  if constexpr (C == CmpOp::kLt) return lt;
  if constexpr (C == CmpOp::kGe) return lt ^ 1;
  if constexpr (C == CmpOp::kGt) return ne & (lt ^ 1);
  if constexpr (C == CmpOp::kLe) return lt | (ne ^ 1);
}

template <CmpOp C, class T, bool SA, bool SB>
inline void CmpKernel(size_t n, const T* __restrict a, const uint8_t* __restrict va,
                      const T* __restrict b, const uint8_t* __restrict vb,
                      uint8_t* __restrict out) {
  for (size_t k = 0; k < n; ++k) {
    const size_t ia = SA ? 0 : k, ib = SB ? 0 : k;
    if constexpr (std::is_same_v<T, int64_t>)
      out[k] = va[ia] & vb[ib] & static_cast<uint8_t>(CompareI64<C>(a[ia], b[ib]));
    else
      out[k] = va[ia] & vb[ib] & static_cast<uint8_t>(Compare<C>(a[ia], b[ib]));
  }
}

}  // namespace rankd::expr
