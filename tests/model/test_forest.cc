// The compiled forest on hand-written trees: routing (x < threshold goes left, equal goes
// right, missing and +-inf take the default side), float32 sums in tree order, dart
// weights, and the structural checks (children in range, acyclic, depth, features).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/forest.h"

using namespace rankd;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A split on `feature` at `threshold` with two leaves.
TreeArrays Stump(uint32_t feature, float threshold, float left, float right, bool default_left) {
  return {{1, -1, -1},
          {2, -1, -1},
          {feature, 0, 0},
          {threshold, left, right},
          {static_cast<uint8_t>(default_left), 0, 0}};
}

std::vector<float> Margins(const Forest& forest, const std::vector<std::vector<float>>& columns,
                           float base = 0) {
  std::vector<const float*> pointers;
  for (const auto& c : columns) pointers.push_back(c.data());
  std::vector<float> out(columns.empty() ? 0 : columns[0].size());
  forest.Margins(pointers, out.size(), base, out.data());
  return out;
}

std::string CompileError(std::vector<TreeArrays> trees, uint32_t features, uint32_t depth = 64) {
  Result<Forest> forest = Forest::Compile(trees, features, depth, "m.model.json");
  REQUIRE(!forest);
  return forest.error().message;
}

}  // namespace

TEST_SUITE("forest") {
  TEST_CASE("a stump routes < left, >= right, missing and +-inf to the default side") {
    std::vector<TreeArrays> trees = {Stump(1, 0.5f, -1, 2, true), Stump(0, 0, 10, 20, false)};
    Result<Forest> forest = Forest::Compile(trees, 2, 64, "m.model.json");
    REQUIRE(forest);
    CHECK(forest->num_trees() == 2);
    std::vector<float> f0 = {-1, -1, 1, kNaN, kInf, -kInf};
    std::vector<float> f1 = {0.25f, 0.5f, kNaN, 1, -kInf, kInf};
    CHECK(Margins(*forest, {f0, f1}, 0.5f) == std::vector<float>{0.5f - 1 + 10, 0.5f + 2 + 10,
                                                                 0.5f - 1 + 20, 0.5f + 2 + 20,
                                                                 0.5f - 1 + 20, 0.5f - 1 + 20});
  }

  TEST_CASE("many rows cross block and lane boundaries; a single-leaf tree adds its value") {
    TreeArrays leaf = {{-1}, {-1}, {0}, {0.25f}, {0}};
    std::vector<TreeArrays> trees = {Stump(0, 0, -1, 1, false), leaf};
    Result<Forest> forest = Forest::Compile(trees, 1, 64, "m.model.json");
    REQUIRE(forest);
    std::vector<float> f0(1003);
    for (size_t r = 0; r < f0.size(); ++r) f0[r] = r % 3 == 0 ? -1.0f : 1.0f;
    std::vector<float> margins = Margins(*forest, {f0});
    for (size_t r = 0; r < f0.size(); ++r) CHECK(margins[r] == (r % 3 == 0 ? -0.75f : 1.25f));
  }

  TEST_CASE("dart weights multiply the leaves; sums are float32 in tree order") {
    std::vector<TreeArrays> trees = {Stump(0, 0, 1e8f, 1e8f, false), Stump(0, 0, 1, 1, false)};
    trees[1].weight = 0.5f;
    Result<Forest> forest = Forest::Compile(trees, 1, 64, "m.model.json");
    REQUIRE(forest);
    // 1e8 + 0.5 rounds back to 1e8 in float32.
    CHECK(Margins(*forest, {{0}}) == std::vector<float>{1e8f});
  }

  TEST_CASE("a deeper tree with an unbalanced shape") {
    // 0: f0 < 0 ? 1 : 2;  1: leaf 1;  2: f1 < 0 ? 3 : 4;  3: leaf 3;  4: f0 < 5 ? 5 : 6.
    TreeArrays t = {{1, -1, 3, -1, 5, -1, -1},
                    {2, -1, 4, -1, 6, -1, -1},
                    {0, 0, 1, 0, 0, 0, 0},
                    {0, 1, 0, 3, 5, 5, 6},
                    {0, 0, 0, 0, 0, 0, 0}};
    Result<Forest> forest = Forest::Compile(std::vector{t}, 2, 64, "m.model.json");
    REQUIRE(forest);
    CHECK(Margins(*forest, {{-1, 1, 1, 7}, {0, -1, 1, 1}}) == std::vector<float>{1, 3, 5, 6});
  }

  TEST_CASE("structural checks name the file, the tree and the node") {
    TreeArrays out_of_range = Stump(0, 0, 1, 2, false);
    out_of_range.right[0] = 7;
    CHECK(CompileError({Stump(0, 0, 1, 2, false), out_of_range}, 1) ==
          "m.model.json: tree 1: node 0: right_children: 7 is out of range (the tree has 3 nodes)");
    TreeArrays cycle = Stump(0, 0, 1, 2, false);
    cycle.left[0] = 0;
    CHECK(CompileError({cycle}, 1) ==
          "m.model.json: tree 0: node 0: left_children: node 0 is reached twice (a cycle or a "
          "shared child)");
    TreeArrays shared = Stump(0, 0, 1, 2, false);
    shared.right[0] = 1;
    CHECK(
        CompileError({shared}, 1).find("tree 0: node 0: right_children: node 1 is reached twice") !=
        std::string::npos);
    CHECK(CompileError({Stump(3, 0, 1, 2, false)}, 2) ==
          "m.model.json: tree 0: node 0: split_indices: feature 3 is out of range (the model has 2 "
          "features)");
    CHECK(CompileError({Stump(0, 0, 1, 2, false)}, 1, 0) ==
          "m.model.json: tree 0: node 0: the tree is deeper than the limit of 0 levels");
    CHECK(CompileError({TreeArrays{}}, 1) == "m.model.json: tree 0: node 0: the tree has no nodes");
    TreeArrays ragged = Stump(0, 0, 1, 2, false);
    ragged.default_left.pop_back();
    CHECK(CompileError({ragged}, 1) ==
          "m.model.json: tree 0: node 0: the node arrays differ in length");
  }
}
