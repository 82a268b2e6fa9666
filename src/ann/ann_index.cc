// ann_index.h: faiss IndexHNSWFlat behind a dense label -> id map.
#include "ann/ann_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/HNSW.h>
#include <faiss/index_io.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <queue>

namespace rankd {

namespace {

constexpr char kMagic[] = "RANKDANN1\n";

// faiss's add opens an OpenMP parallel region; rankd gives a build the calling thread
// only (the builder's, at nice 19), so that a build never takes a core from a shard. The
// setting is per thread in libgomp: set it on every thread that calls into faiss.
void OneOpenMpThread() {
  thread_local bool set = false;
  if (!set) {
    omp_set_num_threads(1);
    set = true;
  }
}

// Scales v to unit length; false (v unchanged) when it is all zeros.
bool Normalise(std::span<float> v) {
  double sum = 0;
  for (float x : v) sum += double(x) * double(x);
  if (sum == 0) return false;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(double(x) * inv);
  return true;
}

faiss::MetricType FaissMetric(AnnMetric m) {
  return m == AnnMetric::kL2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
}

// Which items a search has reached: a mark per item, of the search's generation, so that a
// search clears nothing (every 255 searches the marks are zeroed). One per thread, as
// large as the largest index it searched.
struct VisitedMarks {
  std::vector<uint8_t> marks;
  uint8_t gen = 0;
  // True the first time `i` is marked in this search.
  bool Mark(uint32_t i) {
    if (marks[i] == gen) return false;
    marks[i] = gen;
    return true;
  }
};
VisitedMarks& ThreadVisited(size_t n) {
  thread_local VisitedMarks v;
  if (v.marks.size() < n) v.marks.resize(n, 0);
  if (++v.gen == 0) {
    std::fill(v.marks.begin(), v.marks.end(), 0);
    v.gen = 1;
  }
  return v;
}

// Items in id order without repeats (a SCAN may return a key twice): labels are then
// positions in id order.
AnnItems SortedDistinct(AnnItems in, uint32_t dim) {
  std::vector<uint32_t> order(in.size());
  std::iota(order.begin(), order.end(), 0u);
  const bool str = in.id_type == ColumnType::kStr;
  auto less = [&](uint32_t a, uint32_t b) {
    return str ? in.strs[a] < in.strs[b] : in.ids[a] < in.ids[b];
  };
  auto same = [&](uint32_t a, uint32_t b) {
    return str ? in.strs[a] == in.strs[b] : in.ids[a] == in.ids[b];
  };
  std::stable_sort(order.begin(), order.end(), less);
  AnnItems out;
  out.id_type = in.id_type;
  out.vecs.reserve(in.vecs.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && same(order[i - 1], order[i])) continue;
    const uint32_t o = order[i];
    if (str)
      out.strs.push_back(std::move(in.strs[o]));
    else
      out.ids.push_back(in.ids[o]);
    const float* v = in.vecs.data() + size_t{o} * dim;
    out.vecs.insert(out.vecs.end(), v, v + dim);
  }
  return out;
}

Error FaissError(std::string_view what, const std::string& index, const std::exception& e) {
  return Error::Internal("index '" + index + "': " + std::string(what) + ": " + e.what());
}

bool WriteAll(FILE* f, const void* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; }
bool ReadAll(FILE* f, void* p, size_t n) { return n == 0 || std::fread(p, 1, n, f) == n; }

}  // namespace

AnnIndex::AnnIndex(const AnnIndexSpec& spec) : spec_(spec) {}
AnnIndex::~AnnIndex() = default;

// Items a faiss add takes at once between checks of a build's cancel flag (~0.5 s of work
// at 64 dimensions on the development machine; a chunked add grows the same kind of graph).
constexpr size_t kAnnAddChunk = 2048;

Result<AnnIndexPtr> AnnIndex::Build(const AnnIndexSpec& spec, AnnItems items,
                                    const std::atomic<bool>* cancel) {
  if (items.size() > static_cast<size_t>(spec.max_items))
    return Fail(Error::BadRequest("index '" + spec.name + "': " + std::to_string(items.size()) +
                                  " items are over its max_items " +
                                  std::to_string(spec.max_items) +
                                  "; keeping the index built before"));
  OneOpenMpThread();
  std::shared_ptr<AnnIndex> index(new AnnIndex(spec));
  index->items_ = SortedDistinct(std::move(items), spec.dim);
  const size_t n = index->items_.size();
  std::vector<float> normalised;
  const float* add = index->items_.vecs.data();
  if (spec.metric == AnnMetric::kCosine) {
    // An all-zero vector has no direction: it stays zeros and is never near anything.
    normalised = index->items_.vecs;
    for (size_t i = 0; i < n; ++i)
      Normalise(std::span<float>(normalised.data() + i * spec.dim, spec.dim));
    add = normalised.data();
  }
  try {
    index->hnsw_ = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(spec.dim), kAnnM,
                                                          FaissMetric(spec.metric));
    index->hnsw_->hnsw.efConstruction = kAnnEfConstruction;
    for (size_t at = 0; at < n; at += kAnnAddChunk) {
      if (cancel && cancel->load())
        return Fail(Error::Unavailable("index '" + spec.name + "': build cancelled (stopping)"));
      const size_t count = std::min(kAnnAddChunk, n - at);
      index->hnsw_->add(static_cast<faiss::Index::idx_t>(count), add + at * spec.dim);
    }
  } catch (const std::exception& e) {
    return Fail(FaissError("build", spec.name, e));
  }
  if (spec.metric != AnnMetric::kCosine) {
    index->items_.vecs.clear();  // faiss holds them as given
    index->items_.vecs.shrink_to_fit();
  }
  index->Finish();
  return AnnIndexPtr(std::move(index));
}

void AnnIndex::Finish() {
  bytes_ = items_.ids.capacity() * sizeof(int64_t) + items_.vecs.capacity() * sizeof(float);
  for (const std::string& s : items_.strs)
    bytes_ += sizeof(std::string) + (s.size() > 15 ? s.capacity() : 0);
  if (hnsw_) {
    const faiss::HNSW& g = hnsw_->hnsw;
    bytes_ += g.neighbors.capacity() * sizeof(faiss::HNSW::storage_idx_t) +
              g.offsets.capacity() * sizeof(size_t) + g.levels.capacity() * sizeof(int) +
              g.assign_probas.capacity() * sizeof(double);
    if (auto* flat = dynamic_cast<const faiss::IndexFlatCodes*>(hnsw_->storage))
      bytes_ += flat->codes.capacity();
  }
}

std::span<const float> AnnIndex::vector(uint32_t label) const {
  if (!items_.vecs.empty())
    return std::span<const float>(items_.vecs.data() + size_t{label} * dim(), dim());
  const auto* flat = static_cast<const faiss::IndexFlat*>(hnsw_->storage);
  return std::span<const float>(flat->get_xb() + size_t{label} * dim(), dim());
}

// HNSW's search (greedy descent through the upper levels, then a beam of ef candidates on
// level 0) over faiss's graph, written here because faiss 1.7.3's IndexHNSW::search sizes
// its beam by the index's shared hnsw.efSearch, not by SearchParametersHNSW::efSearch
// (measured: recall did not move with the parameter), and a shared member cannot carry a
// per-query ef while other threads search. Excluded items route the search like any
// other but never enter the results, as faiss's IDSelector does. Distances are "smaller
// is nearer": minus the inner product for ip and cosine, the squared L2 distance for l2.
std::vector<AnnIndex::Hit> AnnIndex::Search(std::span<const float> query, size_t k, size_t ef,
                                            const Excluded& excluded) const {
  std::vector<Hit> hits;
  const faiss::HNSW& g = hnsw_->hnsw;
  if (size() == 0 || k == 0 || g.entry_point < 0) return hits;
  std::vector<float> q(query.begin(), query.end());
  if (spec_.metric == AnnMetric::kCosine && !Normalise(q)) return hits;  // cosine undefined
  std::unique_ptr<faiss::DistanceComputer> dc(hnsw_->storage->get_distance_computer());
  dc->set_query(q.data());
  const bool ip = spec_.metric != AnnMetric::kL2;
  auto dist = [&](int32_t i) { return ip ? -(*dc)(i) : (*dc)(i); };
  auto allowed = [&](int32_t i) {
    return excluded.empty() ||
           !std::binary_search(excluded.begin(), excluded.end(), static_cast<uint32_t>(i));
  };
  VisitedMarks& seen = ThreadVisited(size());
  int32_t ep = g.entry_point;
  float d_ep = dist(ep);
  for (int level = g.max_level; level >= 1; --level) {
    for (bool moved = true; moved;) {
      moved = false;
      size_t b, e;
      g.neighbor_range(ep, level, &b, &e);
      for (size_t j = b; j < e && g.neighbors[j] >= 0; ++j) {
        const int32_t v = g.neighbors[j];
        const float d = dist(v);
        if (d < d_ep) ep = v, d_ep = d, moved = true;
      }
    }
  }
  ef = std::max(ef, k);
  using Node = std::pair<float, int32_t>;
  std::priority_queue<Node, std::vector<Node>, std::greater<Node>> candidates;  // nearest on top
  std::priority_queue<Node> results;  // the ef nearest allowed, farthest on top
  seen.Mark(static_cast<uint32_t>(ep));
  candidates.emplace(d_ep, ep);
  if (allowed(ep)) results.emplace(d_ep, ep);
  while (!candidates.empty()) {
    const auto [d, c] = candidates.top();
    if (results.size() >= ef && d > results.top().first) break;
    candidates.pop();
    size_t b, e;
    g.neighbor_range(c, 0, &b, &e);
    for (size_t j = b; j < e && g.neighbors[j] >= 0; ++j) {
      const int32_t v = g.neighbors[j];
      if (!seen.Mark(static_cast<uint32_t>(v))) continue;
      const float dv = dist(v);
      if (results.size() < ef || dv < results.top().first) {
        candidates.emplace(dv, v);
        if (allowed(v)) {
          results.emplace(dv, v);
          if (results.size() > ef) results.pop();
        }
      }
    }
  }
  while (results.size() > k) results.pop();
  hits.resize(results.size());
  for (size_t i = hits.size(); i-- > 0; results.pop()) {
    const auto [d, v] = results.top();
    double s = ip ? -double(d) : -std::sqrt(std::max(double(d), 0.0));
    hits[i] = {static_cast<uint32_t>(v), s};
  }
  return hits;
}

AnnIndex::Excluded AnnIndex::ExcludedLabels(std::span<const int64_t> ids) const {
  Excluded out;
  for (int64_t id : ids) {
    auto it = std::lower_bound(items_.ids.begin(), items_.ids.end(), id);
    if (it != items_.ids.end() && *it == id)
      out.push_back(static_cast<uint32_t>(it - items_.ids.begin()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

AnnIndex::Excluded AnnIndex::ExcludedLabels(std::span<const std::string_view> ids) const {
  Excluded out;
  for (std::string_view id : ids) {
    auto it = std::lower_bound(items_.strs.begin(), items_.strs.end(), id,
                               [](const std::string& a, std::string_view b) { return a < b; });
    if (it != items_.strs.end() && *it == id)
      out.push_back(static_cast<uint32_t>(it - items_.strs.begin()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The file: kMagic, a header line "<content sha256> <dim> <items> <i64|str> <cosine copy>",
// the ids (i64: 8 bytes each; str: a 4-byte length and the bytes each), the vectors as read
// when the index keeps them (cosine), then faiss's write_index.
Status AnnIndex::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Fail(Error::Internal("index '" + spec_.name + "': cannot write " + tmp + ": " +
                                std::strerror(errno)));
  const std::string header = spec_.content_sha256 + ' ' + std::to_string(dim()) + ' ' +
                             std::to_string(size()) + ' ' + std::string(ColumnTypeName(id_type())) +
                             ' ' + std::to_string(items_.vecs.empty() ? 0 : 1) + '\n';
  bool ok = WriteAll(f, kMagic, sizeof kMagic - 1) && WriteAll(f, header.data(), header.size());
  if (id_type() == ColumnType::kStr) {
    for (const std::string& s : items_.strs) {
      const auto len = static_cast<uint32_t>(s.size());
      ok = ok && WriteAll(f, &len, 4) && WriteAll(f, s.data(), s.size());
    }
  } else {
    ok = ok && WriteAll(f, items_.ids.data(), items_.ids.size() * 8);
  }
  ok = ok && WriteAll(f, items_.vecs.data(), items_.vecs.size() * 4);
  std::string faiss_error;
  if (ok) {
    try {
      faiss::write_index(hnsw_.get(), f);
    } catch (const std::exception& e) {
      faiss_error = e.what();
      ok = false;
    }
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Fail(Error::Internal("index '" + spec_.name + "': cannot write " + path +
                                (faiss_error.empty() ? "" : ": " + faiss_error)));
  }
  return {};
}

Result<AnnIndexPtr> AnnIndex::Load(const AnnIndexSpec& spec, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Fail(Error::NotFound("index '" + spec.name + "': no saved index at " + path));
  auto bad = [&](std::string why) {
    std::fclose(f);
    return Fail(Error::BadRequest("index '" + spec.name + "': " + path + ": " + why));
  };
  char magic[sizeof kMagic - 1];
  if (!ReadAll(f, magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0)
    return bad("not a saved rankd index");
  char line[256];
  if (!std::fgets(line, sizeof line, f)) return bad("no header");
  char sha[65] = {};
  unsigned dim = 0, with_vecs = 0;
  unsigned long long n = 0;
  char type[4] = {};
  if (std::sscanf(line, "%64s %u %llu %3s %u", sha, &dim, &n, type, &with_vecs) != 5)
    return bad("bad header");
  if (spec.content_sha256 != sha)
    return bad(
        "saved for another declaration of the index (family, field, dimension or metric changed)");
  if (dim != spec.dim)
    return bad("dimension " + std::to_string(dim) + ", the schema's is " +
               std::to_string(spec.dim));
  if (n > static_cast<unsigned long long>(spec.max_items))
    return bad(std::to_string(n) + " items, over max_items " + std::to_string(spec.max_items));
  std::shared_ptr<AnnIndex> index(new AnnIndex(spec));
  AnnItems& items = index->items_;
  items.id_type = std::string_view(type) == "str" ? ColumnType::kStr : ColumnType::kI64;
  if (items.id_type == ColumnType::kStr) {
    items.strs.resize(n);
    for (std::string& s : items.strs) {
      uint32_t len = 0;
      if (!ReadAll(f, &len, 4) || len > kMaxStrId) return bad("truncated or bad id map");
      s.resize(len);
      if (!ReadAll(f, s.data(), len)) return bad("truncated id map");
    }
  } else {
    items.ids.resize(n);
    if (!ReadAll(f, items.ids.data(), n * 8)) return bad("truncated id map");
  }
  if (with_vecs) {
    items.vecs.resize(n * dim);
    if (!ReadAll(f, items.vecs.data(), items.vecs.size() * 4)) return bad("truncated vectors");
  }
  try {
    std::unique_ptr<faiss::Index> read(faiss::read_index(f));
    auto* hnsw = dynamic_cast<faiss::IndexHNSWFlat*>(read.get());
    if (!hnsw || hnsw->d != static_cast<int>(dim) ||
        hnsw->ntotal != static_cast<faiss::Index::idx_t>(n) ||
        hnsw->metric_type != FaissMetric(spec.metric))
      return bad("its faiss index does not match its header");
    read.release();
    index->hnsw_.reset(hnsw);
  } catch (const std::exception& e) {
    return bad(std::string("faiss: ") + e.what());
  }
  std::fclose(f);
  index->Finish();
  return AnnIndexPtr(std::move(index));
}

}  // namespace rankd
