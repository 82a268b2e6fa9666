#include "model/network.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rankd {
namespace {

// Sigmoid and tanh in double, rounded once to float32: within half an ulp of the exact
// value, so the result does not depend on which libm variant a machine runs.
inline float ApplyAct(const Act& act, float x) {
  switch (act.kind) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x > 0.0f ? x : 0.0f;
    case Activation::kLeakyRelu: return x >= 0.0f ? x : x * act.a;
    case Activation::kSigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-double(x))));
    case Activation::kTanh: return static_cast<float>(std::tanh(double(x)));
    case Activation::kClip: return x < act.a ? act.a : (x > act.b ? act.b : x);
  }
  return x;
}

void ActivateBlock(const Act& act, size_t width, size_t rows, float* y) {
  if (act.kind == Activation::kNone) return;
  for (size_t f = 0; f < width; ++f)
    for (size_t r = 0; r < rows; ++r) y[f * kBlockRows + r] = ApplyAct(act, y[f * kBlockRows + r]);
}

}  // namespace

Network::Network(std::vector<NetInput> inputs, std::vector<uint32_t> widths,
                 std::vector<NetStep> steps, uint32_t output)
    : inputs_(std::move(inputs)),
      widths_(std::move(widths)),
      steps_(std::move(steps)),
      output_(output) {
  offsets_.resize(widths_.size());
  for (size_t v = 0; v < widths_.size(); ++v) {
    offsets_[v] = arena_floats_;
    arena_floats_ += size_t{widths_[v]} * kBlockRows;
  }
  for (const NetInput& in : inputs_) num_features_ += in.width;
}

void Network::Score(std::span<const float* const> features, size_t n, DispatchLevel level,
                    float* out) const {
  std::vector<float> arena(arena_floats_);
  uint8_t bad[kBlockRows];
  const float* result = arena.data() + offsets_[output_];
  for (size_t start = 0; start < n; start += kBlockRows) {
    const size_t count = std::min(kBlockRows, n - start);
    ScoreBlock(features, start, count, level, arena.data(), bad);
    for (size_t r = 0; r < count; ++r)
      out[start + r] = bad[r] ? std::numeric_limits<float>::quiet_NaN() : result[r];
  }
}

void Network::ScoreBlock(std::span<const float* const> features, size_t start, size_t count,
                         DispatchLevel level, float* arena, uint8_t* bad) const {
  // Rows past `count` up to the tile are zeros: computed and dropped.
  const size_t rows = (count + kTileRows - 1) / kTileRows * kTileRows;
  std::fill(bad, bad + kBlockRows, 0);
  size_t f = 0;
  for (const NetInput& in : inputs_) {
    float* x = arena + offsets_[in.value];
    for (uint32_t j = 0; j < in.width; ++j, ++f) {
      const float* column = features[f] + start;
      float* dst = x + size_t{j} * kBlockRows;
      for (size_t r = 0; r < count; ++r) {
        const float v = column[r];
        const bool missing = !std::isfinite(v);
        bad[r] |= missing;
        dst[r] = missing ? 0.0f : v;
      }
      std::fill(dst + count, dst + rows, 0.0f);
    }
  }
  for (const NetStep& s : steps_) {
    float* y = arena + offsets_[s.out];
    const size_t width = widths_[s.out];
    const float* x = arena + offsets_[s.in[0]];
    switch (s.kind) {
      case NetStep::Kind::kDense:
        DenseBlock(level, x, widths_[s.in[0]], s.w.data(), s.b.data(), width, rows, y);
        break;
      case NetStep::Kind::kAffine:
        for (size_t j = 0; j < width; ++j) {
          const float scale = s.w.empty() ? 1.0f : s.w[j], shift = s.b.empty() ? 0.0f : s.b[j];
          const float* xj = x + j * kBlockRows;
          float* yj = y + j * kBlockRows;
          if (s.w.empty())
            for (size_t r = 0; r < rows; ++r) yj[r] = xj[r] + shift;
          else
            for (size_t r = 0; r < rows; ++r) yj[r] = xj[r] * scale + shift;
        }
        break;
      case NetStep::Kind::kGather:
        for (size_t r = 0; r < rows; ++r) {
          const float at = x[r];
          // A row number: an integer in [0, table_rows); anything else makes the row bad.
          const bool ok =
              at >= 0.0f && at < static_cast<float>(s.table_rows) && at == std::floor(at);
          if (!ok && r < count) bad[r] = 1;
          const float* row = s.w.data() + (ok ? static_cast<size_t>(at) : 0) * width;
          for (size_t j = 0; j < width; ++j) y[j * kBlockRows + r] = ok ? row[j] : 0.0f;
        }
        break;
      case NetStep::Kind::kConcat: {
        size_t at = 0;
        for (uint32_t v : s.in) {
          const size_t w = widths_[v];
          std::copy_n(arena + offsets_[v], w * kBlockRows, y + at * kBlockRows);
          at += w;
        }
        break;
      }
    }
    ActivateBlock(s.act, width, rows, y);
  }
}

}  // namespace rankd
