// SeriesSet (metrics/series_set.h): one series per label set however many snapshots take
// it, the series leaves with its last reference, scrapes see changes once published,
// and a scrape's snapshot keeps the series it lists alive.
#include <doctest/doctest.h>

#include <array>

#include "metrics/series_set.h"

using namespace rankd;

namespace {
size_t Listed(const SeriesSet& set, SeriesFamily f) {
  auto snap = set.Current();
  return snap ? (*snap)[static_cast<size_t>(f)].size() : 0;
}
}  // namespace

TEST_CASE("SeriesSet: shared by label set, gone with its last reference") {
  SeriesSet set;
  Series* a = set.Retain(SeriesFamily::kRankRequests, {"ok", "feed", "0"});
  Series* b = set.Retain(SeriesFamily::kRankRequests, {"ok", "feed", "0"});
  Series* other = set.Retain(SeriesFamily::kDeadlineExceeded, {"feed", "0"});
  CHECK(a == b);
  CHECK(a != other);
  CHECK(Listed(set, SeriesFamily::kRankRequests) == 0);  // not published yet
  set.Publish();
  CHECK(Listed(set, SeriesFamily::kRankRequests) == 1);
  CHECK(Listed(set, SeriesFamily::kDeadlineExceeded) == 1);
  a->Add(3);
  set.Release(a);
  set.Publish();
  REQUIRE(Listed(set, SeriesFamily::kRankRequests) == 1);  // b still holds it
  CHECK((*set.Current())[0][0]->count == 3);
  auto scrape = set.Current();  // a scrape under way
  set.Release(b);
  set.Publish();
  CHECK(Listed(set, SeriesFamily::kRankRequests) == 0);
  CHECK((*scrape)[0][0]->count == 3);  // still readable by the scrape that listed it
  // Taken again, it starts over.
  CHECK(set.Retain(SeriesFamily::kRankRequests, {"ok", "feed", "0"})->count == 0);
}

TEST_CASE("SeriesSet: histograms take their bounds") {
  static constexpr std::array<double, 2> kBounds = {1.0, 2.0};
  SeriesSet set;
  Series* h = set.Retain(SeriesFamily::kRankDuration, {"feed", "0"}, kBounds);
  h->Observe(1.5);
  REQUIRE(h->histogram);
  CHECK(h->histogram->bucket(1) == 1);
  CHECK_FALSE(set.Retain(SeriesFamily::kRankRequests, {"ok", "feed", "0"})->histogram);
}
