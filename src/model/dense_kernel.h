// The dense layer of a neural model (network.h) over one block of rows, and the
// instruction-set level it runs at. The level is chosen once at start-up from what the
// CPU has (baseline x86-64 or AVX2; not AVX-512: the kernel's tile fills AVX2's 16
// registers and nothing else measured faster). Each output value is summed in one fixed
// order at every level: acc = 0, acc += w[k] * x[k] for k = 0, 1, ... (a product and a
// sum, two roundings: -ffp-contract=off in meson.build, and the AVX2 kernel is not
// compiled for FMA), then acc + bias. The vector lanes hold different rows, never parts
// of one sum, so the levels give the same bits; the level is still recorded with every
// score (explain, the served log) so that a replay can say where a score came from.
//
// Threads: pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rankd {

enum class DispatchLevel : uint8_t { kBaseline, kAvx2 };

// "baseline" or "avx2".
std::string_view DispatchLevelName(DispatchLevel level);
// The best level this CPU runs, decided on the first call.
DispatchLevel ActiveDispatchLevel();

// Rows per block: activations are stored feature-major, kBlockRows floats per feature,
// and the kernel walks kTileRows rows at a time.
inline constexpr size_t kBlockRows = 64;
inline constexpr size_t kTileRows = 16;
// Outputs per tile: packed weights hold kTileOutputs outputs' weights side by side.
inline constexpr size_t kTileOutputs = 4;

// y[o * kBlockRows + r] = bias[o] + sum over k of w(o, k) * x[k * kBlockRows + r], for
// o < m and r < rows. `packed` holds the weights as PackDense writes them.
// REQUIRES: rows is a multiple of kTileRows, at most kBlockRows; y does not overlap x.
void DenseBlock(DispatchLevel level, const float* x, size_t k, const float* packed,
                const float* bias, size_t m, size_t rows, float* y);

// The layout DenseBlock reads: for each group of kTileOutputs outputs, for each k, the
// group's weights (zero for outputs past m). `w` is row-major [m][k].
// Returns ceil(m / kTileOutputs) * kTileOutputs * k floats.
void PackDense(const float* w, size_t m, size_t k, float* packed);
inline size_t PackedDenseSize(size_t m, size_t k) {
  return (m + kTileOutputs - 1) / kTileOutputs * kTileOutputs * k;
}

}  // namespace rankd
