#include "rank/shadow_compare.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/mix.h"

namespace rankd {

std::vector<uint64_t> IdKeys(const RowSet& rows) {
  std::vector<uint64_t> out;
  const Column* id = rows.column("id");
  if (!id) return out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    uint32_t r = rows.row(i);
    if (!id->valid(r)) continue;
    if (id->type == ColumnType::kI64)
      out.push_back(static_cast<uint64_t>(id->i64[r]));
    else if (id->type == ColumnType::kStr)
      out.push_back(HashBytes(id->str(r), 0));
  }
  return out;
}

std::optional<double> OverlapAtK(std::span<const uint64_t> a, std::span<const uint64_t> b,
                                 size_t k) {
  size_t denom = std::min({k, a.size(), b.size()});
  if (denom == 0) return std::nullopt;
  std::unordered_set<uint64_t> top_a(a.begin(),
                                     a.begin() + static_cast<ptrdiff_t>(std::min(k, a.size())));
  std::unordered_set<uint64_t> counted;
  size_t common = 0;
  for (size_t i = 0; i < std::min(k, b.size()); ++i)
    if (top_a.contains(b[i]) && counted.insert(b[i]).second) ++common;
  return static_cast<double>(common) / static_cast<double>(denom);
}

std::optional<double> KendallTauA(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  std::unordered_map<uint64_t, size_t> rank_b;
  for (size_t i = 0; i < b.size(); ++i) rank_b.emplace(b[i], i);
  // The common items in a's order, with their rank in b.
  std::vector<size_t> in_b;
  std::unordered_set<uint64_t> seen;
  for (uint64_t id : a) {
    if (!seen.insert(id).second) continue;
    if (auto it = rank_b.find(id); it != rank_b.end()) in_b.push_back(it->second);
  }
  size_t n = in_b.size();
  if (n < 2) return std::nullopt;
  // Pairs (i < j) are in a's order; concordant when b has them in the same order.
  int64_t score = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) score += in_b[i] < in_b[j] ? 1 : -1;
  return static_cast<double>(score) / (static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

}  // namespace rankd
