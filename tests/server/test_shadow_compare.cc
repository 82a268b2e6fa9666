// How shadow answers are compared with the primary's (src/rank/shadow_compare.h):
// overlap at k and Kendall's tau-a, on hand-counted cases.
#include <doctest/doctest.h>

#include <vector>

#include "rank/shadow_compare.h"

using namespace rankd;

TEST_CASE("overlap at k: the shared share of the first k") {
  std::vector<uint64_t> a{1, 2, 3, 4, 5}, b{5, 3, 9, 1, 8};
  CHECK(*OverlapAtK(a, b, 3) == doctest::Approx(1.0 / 3));  // {1,2,3} n {5,3,9} = {3}
  CHECK(*OverlapAtK(a, b, 5) == doctest::Approx(3.0 / 5));
  CHECK(*OverlapAtK(a, b, 100) == doctest::Approx(3.0 / 5));  // min(k, |A|, |B|) = 5
  CHECK(*OverlapAtK(a, std::vector<uint64_t>{2}, 10) == 1.0);
  CHECK(!OverlapAtK(a, {}, 10));
  CHECK(!OverlapAtK(a, b, 0));
}

TEST_CASE("Kendall's tau-a over the items both returned") {
  std::vector<uint64_t> a{1, 2, 3, 4};
  CHECK(*KendallTauA(a, a) == 1.0);
  CHECK(*KendallTauA(a, std::vector<uint64_t>{4, 3, 2, 1}) == -1.0);
  // Common {1, 2, 3}; b orders them 2, 1, 3: pairs (1,2) discordant, (1,3) (2,3) concordant.
  CHECK(*KendallTauA(a, std::vector<uint64_t>{9, 2, 1, 3}) == doctest::Approx(1.0 / 3));
  CHECK(!KendallTauA(a, std::vector<uint64_t>{4}));
  CHECK(!KendallTauA(a, std::vector<uint64_t>{7, 8}));
}
