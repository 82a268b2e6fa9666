// AnnIndex: one built approximate nearest-neighbour index over the vectors of an index
// declared in schema.json (plan/schema.h AnnIndexSpec): a faiss IndexHNSWFlat (inner
// product for ip and cosine, vectors normalised for cosine; squared L2 for l2) whose
// labels are dense (0..n-1, in the order items were added) and our own label -> item id
// map (faiss's IndexIDMap refuses search parameters). faiss builds, saves and loads the
// graph; the search over it is ours (Search says why). Immutable once built or loaded;
// searches take their own ef and exclusion set, so any number of threads search one
// index at once without a lock.
//
// Threads: Build and Load on any thread (the index builder's); Search, the accessors and
// Save from any thread once built (const).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/value.h"
#include "plan/schema.h"

namespace faiss {
struct IndexHNSWFlat;
}

namespace rankd {

// What a build reads from Redis: each item's id and vector, in one order.
struct AnnItems {
  ColumnType id_type = ColumnType::kI64;
  std::vector<int64_t> ids;       // kI64
  std::vector<std::string> strs;  // kStr
  std::vector<float> vecs;        // size() * dim floats, item i at [i*dim, (i+1)*dim)
  size_t size() const { return id_type == ColumnType::kStr ? strs.size() : ids.size(); }
  void Add(IdRef id, std::span<const float> v) {
    if (id_type == ColumnType::kStr)
      strs.emplace_back(id.str);
    else
      ids.push_back(id.num);
    vecs.insert(vecs.end(), v.begin(), v.end());
  }
};

// HNSW's graph degree and construction beam (docs/vectors.md, "Indexes": chosen for
// recall@100 ≥ 0.95 at the default ef on the tests' clustered data).
inline constexpr int kAnnM = 32;
inline constexpr int kAnnEfConstruction = 40;
// The search beam when a node gives no ef; the beam is never below k.
inline constexpr int64_t kAnnDefaultEf = 200;
inline constexpr int64_t kAnnMaxK = 10000;
inline constexpr int64_t kAnnMaxEf = 20000;

class AnnIndex {
 public:
  ~AnnIndex();
  AnnIndex(const AnnIndex&) = delete;
  AnnIndex& operator=(const AnnIndex&) = delete;

  // The index of `items` (their vectors already checked finite and of spec.dim floats).
  // Fails (bad_request) with more than spec.max_items items; internal when faiss throws;
  // unavailable when `cancel` turns true (checked between chunks of kAnnAddChunk items: a
  // process stopping does not wait for the rest of a build of minutes).
  static Result<std::shared_ptr<const AnnIndex>> Build(const AnnIndexSpec& spec, AnnItems items,
                                                       const std::atomic<bool>* cancel = nullptr);

  // A saved index (Save) when its header matches `spec` (content hash and dimension) and
  // it holds at most spec.max_items items; else an error saying why (the caller builds).
  static Result<std::shared_ptr<const AnnIndex>> Load(const AnnIndexSpec& spec,
                                                      const std::string& path);
  // Writes the index to `path` (through a temporary file renamed over it): a header with
  // the spec's content hash and dimension, the id map, then faiss's own format.
  Status Save(const std::string& path) const;

  struct Hit {
    uint32_t label;
    double similarity;  // ip: a·q; cosine: cos(a, q); l2: -‖a − q‖ (higher is nearer)
  };
  // Labels whose items a search must not return, sorted ascending (ExcludedLabels).
  using Excluded = std::vector<uint32_t>;
  // The min(k, items not excluded) nearest items of `query` (dim floats), nearest first,
  // searched with a beam of max(ef, k), on the calling thread only.
  // REQUIRES: query.size() == dim().
  std::vector<Hit> Search(std::span<const float> query, size_t k, size_t ef,
                          const Excluded& excluded) const;

  // The labels of those of `ids` (of the index's id type) that the index holds, sorted.
  // Labels are given in id order (numeric, or bytewise for str ids), so this is a binary
  // search per id.
  Excluded ExcludedLabels(std::span<const int64_t> ids) const;
  Excluded ExcludedLabels(std::span<const std::string_view> ids) const;

  const AnnIndexSpec& spec() const { return spec_; }
  size_t size() const { return items_.size(); }
  uint32_t dim() const { return spec_.dim; }
  ColumnType id_type() const { return items_.id_type; }
  int64_t id(uint32_t label) const { return items_.ids[label]; }
  std::string_view str_id(uint32_t label) const { return items_.strs[label]; }
  // The item's vector as read from Redis (dim floats).
  std::span<const float> vector(uint32_t label) const;
  // Memory held: faiss's vectors and graph, the id map, the label lookups (an estimate
  // from the containers' sizes, without malloc's rounding).
  size_t bytes() const { return bytes_; }

 private:
  explicit AnnIndex(const AnnIndexSpec& spec);
  void Finish();  // bytes_, once the items and faiss index are set

  AnnIndexSpec spec_;
  // Ids by label, ascending and distinct; vecs only for cosine (faiss holds them
  // normalised, and with_vectors answers the vectors as read).
  AnnItems items_;
  std::unique_ptr<faiss::IndexHNSWFlat> hnsw_;
  size_t bytes_ = 0;
};

using AnnIndexPtr = std::shared_ptr<const AnnIndex>;

}  // namespace rankd
