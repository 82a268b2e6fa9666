#include "model/forest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

namespace rankd {
namespace {

// Rows per block: the nodes a block's rows touch are reused by all of them, and the
// block's transposed features stay in L1/L2.
constexpr size_t kForestBlockRows = 256;
// Rows that walk one tree together: independent chains of loads the CPU overlaps.
constexpr size_t kLanes = 8;
static_assert(kForestBlockRows % kLanes == 0);

Error TreeError(const std::string& file, size_t tree, size_t node, const std::string& what) {
  return Error::BadRequest(file + ": tree " + std::to_string(tree) + ": node " +
                           std::to_string(node) + ": " + what);
}

}  // namespace

Result<Forest> Forest::Compile(std::span<const TreeArrays> trees, uint32_t num_feature,
                               uint32_t max_depth, const std::string& file) {
  Forest forest;
  forest.num_features_ = num_feature;
  // Model feature -> dense index among the features splits read; filled as met, then
  // renumbered in ascending feature order below.
  std::vector<uint32_t> split_features;
  std::vector<uint8_t> reached;
  struct Pending {
    uint32_t source;  // node index in the tree's arrays
    uint32_t depth;
  };
  std::vector<Pending> queue;
  for (size_t t = 0; t < trees.size(); ++t) {
    const TreeArrays& tree = trees[t];
    const size_t n = tree.left.size();
    if (n == 0) return Fail(TreeError(file, t, 0, "the tree has no nodes"));
    if (tree.right.size() != n || tree.split_index.size() != n ||
        tree.split_condition.size() != n || tree.default_left.size() != n)
      return Fail(TreeError(file, t, 0, "the node arrays differ in length"));
    if (forest.nodes_.size() + n >= std::numeric_limits<int32_t>::max())
      return Fail(TreeError(file, t, 0, "too many nodes"));
    reached.assign(n, 0);
    queue.clear();
    // Breadth-first: the node at queue[i] gets index base + i, and a split's two
    // children are pushed together, so they are adjacent.
    const uint32_t base = static_cast<uint32_t>(forest.nodes_.size());
    queue.push_back({0, 0});
    reached[0] = 1;
    uint32_t depth = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      const auto [at, d] = queue[i];
      const uint32_t self = base + static_cast<uint32_t>(i);
      depth = std::max(depth, d);
      if (tree.left[at] == -1) {
        forest.nodes_.push_back({std::numeric_limits<float>::quiet_NaN(), self - 1, 0,
                                 tree.split_condition[at] * tree.weight});
        continue;
      }
      for (auto [side, child] : {std::pair{"left_children", tree.left[at]},
                                 std::pair{"right_children", tree.right[at]}}) {
        if (child < 0 || static_cast<size_t>(child) >= n)
          return Fail(TreeError(file, t, at,
                                std::string(side) + ": " + std::to_string(child) +
                                    " is out of range (the tree has " + std::to_string(n) +
                                    " nodes)"));
        if (reached[child])
          return Fail(TreeError(file, t, at,
                                std::string(side) + ": node " + std::to_string(child) +
                                    " is reached twice (a cycle or a shared child)"));
        reached[child] = 1;
      }
      if (d + 1 > max_depth)
        return Fail(TreeError(
            file, t, at,
            "the tree is deeper than the limit of " + std::to_string(max_depth) + " levels"));
      if (tree.split_index[at] >= num_feature)
        return Fail(TreeError(file, t, at,
                              "split_indices: feature " + std::to_string(tree.split_index[at]) +
                                  " is out of range (the model has " + std::to_string(num_feature) +
                                  " features)"));
      const uint32_t left = base + static_cast<uint32_t>(queue.size());
      queue.push_back({static_cast<uint32_t>(tree.left[at]), d + 1});
      queue.push_back({static_cast<uint32_t>(tree.right[at]), d + 1});
      // The model feature for now; renumbered to the dense index below.
      uint32_t flags = tree.default_left[at] ? kDefaultLeft : 0;
      forest.nodes_.push_back({tree.split_condition[at], left, tree.split_index[at] | flags, 0});
      split_features.push_back(tree.split_index[at]);
    }
    forest.roots_.push_back(base);
    forest.depths_.push_back(depth);
  }
  std::sort(split_features.begin(), split_features.end());
  split_features.erase(std::unique(split_features.begin(), split_features.end()),
                       split_features.end());
  forest.used_ = std::move(split_features);
  for (Node& node : forest.nodes_) {  // a leaf's feature 0 becomes 0: any valid index
    uint32_t feature = node.feature_and_default & ~kDefaultLeft;
    uint32_t dense = static_cast<uint32_t>(
        std::lower_bound(forest.used_.begin(), forest.used_.end(), feature) - forest.used_.begin());
    node.feature_and_default = (node.feature_and_default & kDefaultLeft) | dense;
  }
  return forest;
}

void Forest::Margins(std::span<const float* const> features, size_t n, float base_margin,
                     float* margin) const {
  const size_t width = used_.size();
  // Row-major features of one block, +-inf made NaN (missing); rows past n stay NaN and
  // their sums are dropped.
  std::vector<float> rows(kForestBlockRows * width);
  std::array<float, kForestBlockRows> sums;
  for (size_t start = 0; start < n; start += kForestBlockRows) {
    const size_t count = std::min(kForestBlockRows, n - start);
    std::fill(rows.begin(), rows.end(), std::numeric_limits<float>::quiet_NaN());
    for (size_t u = 0; u < width; ++u) {
      const float* column = features[used_[u]] + start;
      for (size_t r = 0; r < count; ++r)
        rows[r * width + u] =
            std::isinf(column[r]) ? std::numeric_limits<float>::quiet_NaN() : column[r];
    }
    sums.fill(base_margin);
    ScoreBlock(rows.data(), (count + kLanes - 1) / kLanes * kLanes, sums.data());
    std::copy_n(sums.begin(), count, margin + start);
  }
}

void Forest::ScoreBlock(const float* rows, size_t n, float* sums) const {
  const size_t width = used_.size();
  const Node* nodes = nodes_.data();
  for (size_t t = 0; t < roots_.size(); ++t) {
    const uint32_t root = roots_[t], steps = depths_[t];
    for (size_t r0 = 0; r0 < n; r0 += kLanes) {
      const float* lane_rows = rows + r0 * width;
      std::array<uint32_t, kLanes> at;
      at.fill(root);
      for (uint32_t s = 0; s < steps; ++s) {
#pragma GCC unroll 8
        for (size_t k = 0; k < kLanes; ++k) {
          const Node& node = nodes[at[k]];
          const uint32_t fd = node.feature_and_default;
          const float x = lane_rows[k * width + (fd & ~kDefaultLeft)];
          // Right unless x < threshold; a missing x goes right unless the node says left.
          const uint32_t missing_left = static_cast<uint32_t>(x != x) & (fd >> 31);
          const uint32_t right = static_cast<uint32_t>(!(x < node.threshold)) & ~missing_left;
          at[k] = node.left + right;
        }
      }
      for (size_t k = 0; k < kLanes; ++k) sums[r0 + k] += nodes[at[k]].leaf;
    }
  }
}

}  // namespace rankd
