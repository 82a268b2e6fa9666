// ops/bench vectors (its `ann` part): µs per query of an index through rankd's index code
// (ann/ann_index.h: AnnIndex::Search, the search the `ann` op runs) against the same
// library's index searched directly (faiss IndexHNSWFlat::search, built from the same
// vectors with the same M and construction beam, its shared efSearch set to rankd's
// default ef), one thread each, k 100, with each side's recall@100 against exact brute
// force (faiss IndexFlat) beside it, and both build times; each side warmed by 50 untimed
// queries first. Clustered random vectors:
// ANN_ITEMS (100,000) × 64, ANN_QUERIES (200) queries. Prints one JSON object.
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

#include "ann/ann_index.h"

using namespace rankd;

namespace {

constexpr uint32_t kDim = 64;
constexpr size_t kK = 100;

size_t EnvSize(const char* name, size_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  omp_set_num_threads(1);
  const size_t n = EnvSize("ANN_ITEMS", 100000), nq = EnvSize("ANN_QUERIES", 200);
  std::mt19937 rng(46);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centers(100 * kDim), x(n * kDim), q(nq * kDim);
  for (float& c : centers) c = g(rng);
  for (size_t i = 0; i < n + nq; ++i) {
    const size_t c = rng() % 100;
    float* row = i < n ? &x[i * kDim] : &q[(i - n) * kDim];
    for (uint32_t j = 0; j < kDim; ++j) row[j] = centers[c * kDim + j] + 0.35f * g(rng);
  }
  AnnIndexSpec spec;
  spec.name = "bench";
  spec.dim = kDim;
  spec.metric = AnnMetric::kIp;
  spec.max_items = static_cast<int64_t>(n);
  AnnItems items;
  for (size_t i = 0; i < n; ++i)
    items.Add({static_cast<int64_t>(i), {}}, std::span<const float>(&x[i * kDim], kDim));
  auto t0 = std::chrono::steady_clock::now();
  auto ours = AnnIndex::Build(spec, std::move(items));
  const double build_ours = Seconds(t0);
  if (!ours) {
    std::fprintf(stderr, "ann_bench: %s\n", ours.error().message.c_str());
    return 1;
  }
  t0 = std::chrono::steady_clock::now();
  faiss::IndexHNSWFlat direct(kDim, kAnnM, faiss::METRIC_INNER_PRODUCT);
  direct.hnsw.efConstruction = kAnnEfConstruction;
  direct.add(static_cast<faiss::Index::idx_t>(n), x.data());
  direct.hnsw.efSearch = static_cast<int>(kAnnDefaultEf);
  const double build_direct = Seconds(t0);
  faiss::IndexFlat exact(kDim, faiss::METRIC_INNER_PRODUCT);
  exact.add(static_cast<faiss::Index::idx_t>(n), x.data());

  std::vector<faiss::Index::idx_t> truth(nq * kK), labels(kK);
  std::vector<float> dist(nq * kK);
  exact.search(static_cast<faiss::Index::idx_t>(nq), q.data(), kK, dist.data(), truth.data());
  size_t hits_ours = 0, hits_direct = 0;
  double us_ours = 0, us_direct = 0;
  const AnnIndex::Excluded none;
  // Untimed first: each side's first queries fault in its graph and vectors (a one-time
  // cost of ~0.1 s here that 200 timed queries would spread as ~0.5 ms each).
  for (size_t i = 0; i < std::min<size_t>(nq, 50); ++i) {
    const std::span<const float> query(&q[i * kDim], kDim);
    (void)(*ours)->Search(query, kK, kAnnDefaultEf, none);
    direct.search(1, query.data(), kK, dist.data(), labels.data());
  }
  for (size_t i = 0; i < nq; ++i) {
    const std::set<faiss::Index::idx_t> want(truth.begin() + i * kK, truth.begin() + (i + 1) * kK);
    const std::span<const float> query(&q[i * kDim], kDim);
    // Alternating the two sides query by query: load on a shared machine hits both alike.
    t0 = std::chrono::steady_clock::now();
    auto hits = (*ours)->Search(query, kK, kAnnDefaultEf, none);
    us_ours += Seconds(t0) * 1e6;
    for (const auto& h : hits) hits_ours += want.count((*ours)->id(h.label));
    t0 = std::chrono::steady_clock::now();
    direct.search(1, query.data(), kK, dist.data(), labels.data());
    us_direct += Seconds(t0) * 1e6;
    for (auto l : labels) hits_direct += want.count(l);
  }
  std::printf(
      "{\"name\": \"ann\", \"items\": %zu, \"dim\": %u, \"k\": %zu, \"ef\": %lld, \"queries\": "
      "%zu, "
      "\"value\": %.1f, \"unit\": \"us/query\", \"baseline\": %.1f, \"ratio\": %.3f, "
      "\"recall\": %.4f, \"baseline_recall\": %.4f, \"build_s\": %.2f, \"baseline_build_s\": "
      "%.2f}\n",
      n, kDim, kK, static_cast<long long>(kAnnDefaultEf), nq, us_ours / nq, us_direct / nq,
      us_ours / us_direct, double(hits_ours) / double(nq * kK),
      double(hits_direct) / double(nq * kK), build_ours, build_direct);
}
