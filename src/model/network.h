// Network: a neural model (an MLP exported as ONNX) compiled at load into a flat program
// of steps over row blocks, with packed weights; immutable once built. The ONNX reader
// and compiler (onnx_graph.h) build it; docs/models.md ("ONNX models") has the contract.
//
// A value is a [N, width] float32 tensor (any static shape past the batch dimension is
// its width, row-major); a block holds kBlockRows rows of each value feature-major, so
// that a step streams rows. Steps: a dense layer (W x + b), a per-feature affine step
// (x * scale + shift), a table lookup (an embedding: Gather by an int64 input), and a
// concatenation; each but the concatenation may end with an activation, applied as the
// step writes its output. Reshapes and identities are no steps: they rename a value.
//
// Threads: Build on any thread; a Network is immutable and Score may run on any number
// of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/dense_kernel.h"

namespace rankd {

enum class Activation : uint8_t { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip };

struct Act {
  Activation kind = Activation::kNone;
  float a = 0, b = 0;  // kLeakyRelu: alpha; kClip: min, max
};

struct NetStep {
  enum class Kind : uint8_t { kDense, kAffine, kGather, kConcat } kind = Kind::kDense;
  std::vector<uint32_t> in;  // value ids (kConcat: several, in order)
  uint32_t out = 0;          // value id
  // kDense: weights packed by PackDense ([out][in] before packing) and the bias;
  // kAffine: scale and shift per feature (scale empty: 1, shift empty: 0);
  // kGather: the table, row-major [rows][width of out].
  std::vector<float> w, b;
  uint32_t table_rows = 0;  // kGather
  Act act;
};

// One input of the network, fed by consecutive model features (Model::features()).
struct NetInput {
  std::string name;    // the ONNX input's name
  bool index = false;  // an int64 input (one value a row: a table row number)
  uint32_t width = 1;  // values a row
  uint32_t value = 0;  // the value id it fills
};

class Network {
 public:
  Network() = default;
  Network(std::vector<NetInput> inputs, std::vector<uint32_t> widths, std::vector<NetStep> steps,
          uint32_t output);

  const std::vector<NetInput>& inputs() const { return inputs_; }
  const std::vector<NetStep>& steps() const { return steps_; }
  // Model features: the inputs' widths summed, in input order.
  size_t num_features() const { return num_features_; }

  // out[r] = the network's output for row r. features[f][r]: feature f of row r (an
  // index input's value is its row number as float32). A row with a NaN or +-inf
  // feature, or an index that is not a row of its table, gets NaN.
  // REQUIRES: features.size() == num_features(), each pointing at n floats.
  void Score(std::span<const float* const> features, size_t n, DispatchLevel level,
             float* out) const;

 private:
  void ScoreBlock(std::span<const float* const> features, size_t start, size_t count,
                  DispatchLevel level, float* arena, uint8_t* bad) const;

  std::vector<NetInput> inputs_;
  std::vector<uint32_t> widths_;  // per value id
  std::vector<size_t> offsets_;   // per value id: where its block starts in the arena
  size_t arena_floats_ = 0;
  std::vector<NetStep> steps_;
  uint32_t output_ = 0;
  size_t num_features_ = 0;
};

}  // namespace rankd
