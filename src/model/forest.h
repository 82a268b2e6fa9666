// Forest: a tree ensemble compiled for scoring blocks of rows, and the checks of the
// trees' structure that make the compiled form safe to run.
//
// The layout: every node of every tree in one array of 16-byte nodes, each tree's nodes
// in breadth-first order with the two children of a split adjacent, so that the next
// node is `left + go_right` with no branch. A leaf points at itself (its `left` is its
// own index - 1 and its threshold NaN, so every value "goes right" to itself); each tree
// is then walked a fixed number of steps, its depth, by every row. Rows are scored in
// blocks: the block's features (only those some split reads, renumbered densely) are
// transposed to row-major, and the rows of a lane group walk each tree together, so that
// their independent load chains overlap.
//
// Threads: Compile on any thread; a Forest is immutable and Score may run on any number
// of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace rankd {

// One tree as XGBoost saves it: node i is a leaf when left[i] == -1, its value then in
// split_condition[i]; else values `< split_condition[i]` of feature split_index[i] go to
// left[i], others to right[i], and missing (NaN) ones to left[i] when default_left[i].
struct TreeArrays {
  std::vector<int32_t> left, right;
  std::vector<uint32_t> split_index;
  std::vector<float> split_condition;
  std::vector<uint8_t> default_left;
  float weight = 1.0f;  // dart's weight_drop (each leaf is multiplied by it), else 1
};

class Forest {
 public:
  // Checks each tree (children in range, every node reached at most once from the root,
  // depth at most max_depth, split features below num_feature) and compiles them.
  // Violations: Error::BadRequest "FILE: tree T: node N: WHAT".
  static Result<Forest> Compile(std::span<const TreeArrays> trees, uint32_t num_feature,
                                uint32_t max_depth, const std::string& file);

  size_t num_trees() const { return roots_.size(); }
  uint32_t num_features() const { return num_features_; }

  // margin[r] = base_margin + the trees' leaf values for row r, summed in float32 in tree
  // order (as XGBoost sums them). features[f][r]: feature f of row r; NaN and +-inf are
  // missing.
  // REQUIRES: features.size() == num_features(), each pointing at n floats.
  void Margins(std::span<const float* const> features, size_t n, float base_margin,
               float* margin) const;

 private:
  struct Node {
    float threshold;               // NaN for leaves
    uint32_t left;                 // the left child's index; the right child is left + 1
    uint32_t feature_and_default;  // index into used_; kDefaultLeft set: missing goes left
    float leaf;                    // the leaf's value (weight applied); 0 for splits
  };
  static constexpr uint32_t kDefaultLeft = 1u << 31;

  // Adds each tree's leaf to sums[r] for rows [0, n) of a block (used_.size() floats
  // per row, row-major). REQUIRES: n is a multiple of the lane count.
  void ScoreBlock(const float* rows, size_t n, float* sums) const;

  std::vector<Node> nodes_;
  std::vector<uint32_t> roots_;   // each tree's root index in nodes_
  std::vector<uint32_t> depths_;  // steps from the root to the deepest leaf, per tree
  std::vector<uint32_t> used_;    // the model features some split reads, ascending
  uint32_t num_features_ = 0;
};

}  // namespace rankd
