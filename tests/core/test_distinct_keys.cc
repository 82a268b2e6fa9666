#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/distinct_keys.h"
#include "core/mix.h"

using rankd::DistinctKeys;

TEST_CASE("DistinctKeys gives each key its position of first appearance") {
  DistinctKeys<int64_t> d(6);
  CHECK(d.Add(7).index == 0);
  CHECK(d.Add(7).first == false);
  auto s = d.Add(-1);
  CHECK(s.index == 1);
  CHECK(s.first);
  CHECK(d.Add(0).index == 2);
  CHECK(d.Add(INT64_MIN).index == 3);
  CHECK(d.Add(INT64_MAX).index == 4);
  CHECK(d.Add(-1).index == 1);
  CHECK(d.Add(0).first == false);
  CHECK(d.keys() == std::vector<int64_t>{7, -1, 0, INT64_MIN, INT64_MAX});
}

TEST_CASE("DistinctKeys agrees with a map on dense, strided and colliding keys") {
  // Dense ids, ids a power of two apart (the same low bits), and random ones, each with
  // repeats; up to the declared room of distinct keys.
  for (int shape = 0; shape < 3; ++shape) {
    for (size_t n : {1u, 15u, 16u, 17u, 300u, 4096u}) {
      uint64_t rng = 42 + n;
      std::vector<uint64_t> in;
      for (size_t i = 0; i < 2 * n; ++i) {
        uint64_t j = rankd::SplitMix64(rng) % n;
        in.push_back(shape == 0 ? j : shape == 1 ? j << 32 : rankd::Mix64(j));
      }
      DistinctKeys<uint64_t> d(2 * n);
      std::map<uint64_t, uint32_t> want;
      for (uint64_t k : in) {
        auto [it, fresh] = want.try_emplace(k, static_cast<uint32_t>(want.size()));
        auto s = d.Add(k);
        REQUIRE(s.first == fresh);
        REQUIRE(s.index == it->second);
      }
      CHECK(d.keys().size() == want.size());
    }
  }
}

TEST_CASE("DistinctStrings agrees with a map: lengths around 8, shared prefixes, empty") {
  for (size_t n : {1u, 16u, 17u, 300u, 2000u}) {
    uint64_t rng = 7 + n;
    std::vector<std::string> pool;
    for (size_t i = 0; i < n; ++i)
      pool.push_back(i % 5 == 0 ? std::string(i % 11, 'x')  // lengths 0..10
                                : "lst-" + std::to_string(rankd::SplitMix64(rng) % n));  // prefix
    std::vector<std::string_view> in;
    for (size_t i = 0; i < 2 * n; ++i) in.push_back(pool[rankd::SplitMix64(rng) % n]);
    rankd::DistinctStrings d(in.size());
    std::map<std::string_view, uint32_t> want;
    for (std::string_view k : in) {
      auto [it, fresh] = want.try_emplace(k, static_cast<uint32_t>(want.size()));
      auto s = d.Add(k);
      REQUIRE(s.first == fresh);
      REQUIRE(s.index == it->second);
      REQUIRE(d.keys()[s.index] == k);
    }
    CHECK(d.keys().size() == want.size());
  }
}
