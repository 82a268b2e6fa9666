// Experiment bucketing (src/plan/experiments.h): the formula against values Python's
// hashlib computes for it, the spread of 100,000 ids (numeric and string) over the
// variants within chi-square bounds of their weights, and that raising the last
// variant's weight moves users only out of control. Loading experiments.json and its
// errors are tested end to end in tests/server/test_experiments.py.
#include <doctest/doctest.h>

#include <array>
#include <string>

#include "plan/experiments.h"

using namespace rankd;

namespace {

Experiment TwoVariants(uint32_t w1, uint32_t w2) {
  Experiment e;
  e.name = "e";
  e.salt = "spread";
  ExperimentVariant a, b;
  a.name = "a", a.weight = w1, a.first = 0, a.end = w1;
  b.name = "b", b.weight = w2, b.first = w1, b.end = w1 + w2;
  e.variants = {a, b};
  return e;
}

UserId Nth(size_t i, bool str) {
  return str ? UserId::Str("user-" + std::to_string(i)) : UserId(static_cast<int64_t>(i));
}

}  // namespace

TEST_CASE("the bucket is SHA-256(salt:user_id)'s first 8 bytes, big-endian, mod 10000") {
  // hashlib.sha256(f"{salt}:{user_id}".encode()).digest()[:8], int.from_bytes(.., "big") % 10000
  CHECK(ExperimentBucket("s1", UserId(0)) == 2710);
  CHECK(ExperimentBucket("s1", UserId(1)) == 6226);
  CHECK(ExperimentBucket("s1", UserId(42)) == 6794);
  CHECK(ExperimentBucket("s1", UserId(9223372036854775807)) == 9191);
  CHECK(ExperimentBucket("feed-weight-1", UserId::Str("acct-000001")) == 2941);
  CHECK(ExperimentBucket("", UserId::Str("x")) == 9184);
  CHECK(ExperimentBucket("salt", UserId::Str("\xc3\xa9lan")) == 5453);  // "élan", UTF-8
}

TEST_CASE("100,000 ids fall into the variants as their weights say (chi-square)") {
  Experiment e = TwoVariants(2500, 1500);  // control: the other 6000
  for (bool str : {false, true}) {
    std::array<double, 3> seen{};  // control, a, b
    std::array<double, 10> deciles{};
    constexpr size_t kIds = 100000;
    for (size_t i = 0; i < kIds; ++i) {
      uint32_t bucket = ExperimentBucket(e.salt, Nth(i, str));
      REQUIRE(bucket < kExperimentBuckets);
      seen[static_cast<size_t>(e.VariantOf(bucket) + 1)] += 1;
      deciles[bucket / 1000] += 1;
    }
    const std::array<double, 3> expected{0.6 * kIds, 0.25 * kIds, 0.15 * kIds};
    double chi2 = 0;
    for (size_t k = 0; k < 3; ++k)
      chi2 += (seen[k] - expected[k]) * (seen[k] - expected[k]) / expected[k];
    CHECK(chi2 < 27.6);  // 2 degrees of freedom: exceeded with p = 1e-6
    double chi2_deciles = 0;
    for (double n : deciles) chi2_deciles += (n - kIds / 10.0) * (n - kIds / 10.0) / (kIds / 10.0);
    CHECK(chi2_deciles < 44.0);  // 9 degrees of freedom, p = 1e-6
  }
}

TEST_CASE("raising the last variant's weight moves users only out of control") {
  Experiment before = TwoVariants(2000, 1000), after = TwoVariants(2000, 1500);
  size_t moved = 0;
  for (size_t i = 0; i < 20000; ++i) {
    uint32_t bucket = ExperimentBucket(before.salt, Nth(i, i % 2 == 1));
    int was = before.VariantOf(bucket), now = after.VariantOf(bucket);
    if (was == now) continue;
    CHECK(was == -1);
    CHECK(now == 1);
    ++moved;
  }
  CHECK(moved > 500);  // ~5% of 20,000
}

TEST_CASE("variants by name") {
  Experiment e = TwoVariants(10, 20);
  CHECK(e.Find("control") == -1);
  CHECK(e.Find("b") == 1);
  CHECK(!e.Find("c"));
  CHECK(e.VariantOf(9) == 0);
  CHECK(e.VariantOf(10) == 1);
  CHECK(e.VariantOf(30) == -1);
  e.start_ms = 100, e.end_ms = 200;
  CHECK(!e.Active(99));
  CHECK(e.Active(100));
  CHECK(!e.Active(200));
}
