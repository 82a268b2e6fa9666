#include "model/dense_kernel.h"

#include <cstring>

// V8 values never cross a call that is not inlined (Load, Store and Tile are), so GCC's
// note that their ABI differs with AVX enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace rankd {
namespace {

// Eight floats: one AVX2 register, or two SSE registers on the baseline (GCC splits the
// operations; each lane still gets the same mul and add).
typedef float V8 __attribute__((vector_size(32), aligned(4)));

__attribute__((always_inline)) inline V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void Store(float* p, V8 v) { std::memcpy(p, &v, sizeof v); }

// One tile: kTileOutputs outputs x kTileRows rows, 8 accumulators, summed over k in
// increasing order.
__attribute__((always_inline)) inline void Tile(const float* x, size_t k, const float* w,
                                                const float* bias, size_t outputs, size_t r,
                                                float* y) {
  V8 acc[kTileOutputs][2] = {};
  for (size_t i = 0; i < k; ++i) {
    const V8 x0 = Load(x + i * kBlockRows + r), x1 = Load(x + i * kBlockRows + r + 8);
    const float* wi = w + i * kTileOutputs;
    for (size_t o = 0; o < kTileOutputs; ++o) {
      acc[o][0] += wi[o] * x0;
      acc[o][1] += wi[o] * x1;
    }
  }
  for (size_t o = 0; o < outputs; ++o) {
    Store(y + o * kBlockRows + r, acc[o][0] + bias[o]);
    Store(y + o * kBlockRows + r + 8, acc[o][1] + bias[o]);
  }
}

__attribute__((always_inline)) inline void Dense(const float* x, size_t k, const float* packed,
                                                 const float* bias, size_t m, size_t rows,
                                                 float* y) {
  for (size_t o0 = 0; o0 < m; o0 += kTileOutputs) {
    const size_t outputs = m - o0 < kTileOutputs ? m - o0 : kTileOutputs;
    const float* w = packed + o0 * k;
    for (size_t r = 0; r < rows; r += kTileRows)
      Tile(x, k, w, bias + o0, outputs, r, y + o0 * kBlockRows);
  }
}

void DenseBaseline(const float* x, size_t k, const float* packed, const float* bias, size_t m,
                   size_t rows, float* y) {
  Dense(x, k, packed, bias, m, rows, y);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// AVX2 without FMA: the same two roundings per term as the baseline.
__attribute__((target("avx2"))) void DenseAvx2(const float* x, size_t k, const float* packed,
                                               const float* bias, size_t m, size_t rows, float* y) {
  Dense(x, k, packed, bias, m, rows, y);
}
constexpr bool kHasAvx2Kernel = true;
#else
void DenseAvx2(const float* x, size_t k, const float* packed, const float* bias, size_t m,
               size_t rows, float* y) {
  Dense(x, k, packed, bias, m, rows, y);
}
constexpr bool kHasAvx2Kernel = false;
#endif

DispatchLevel Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHasAvx2Kernel && __builtin_cpu_supports("avx2")) return DispatchLevel::kAvx2;
#endif
  return DispatchLevel::kBaseline;
}

}  // namespace

std::string_view DispatchLevelName(DispatchLevel level) {
  return level == DispatchLevel::kAvx2 ? "avx2" : "baseline";
}

DispatchLevel ActiveDispatchLevel() {
  static const DispatchLevel level = Detect();
  return level;
}

void DenseBlock(DispatchLevel level, const float* x, size_t k, const float* packed,
                const float* bias, size_t m, size_t rows, float* y) {
  if (level == DispatchLevel::kAvx2 && ActiveDispatchLevel() == DispatchLevel::kAvx2)
    DenseAvx2(x, k, packed, bias, m, rows, y);
  else
    DenseBaseline(x, k, packed, bias, m, rows, y);
}

void PackDense(const float* w, size_t m, size_t k, float* packed) {
  const size_t groups = (m + kTileOutputs - 1) / kTileOutputs;
  for (size_t g = 0; g < groups; ++g)
    for (size_t i = 0; i < k; ++i)
      for (size_t o = 0; o < kTileOutputs; ++o) {
        const size_t out = g * kTileOutputs + o;
        packed[(g * k + i) * kTileOutputs + o] = out < m ? w[out * k + i] : 0.0f;
      }
}

}  // namespace rankd
