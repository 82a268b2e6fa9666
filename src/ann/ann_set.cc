// ann_set.h: copy-on-write publication of the index set.
#include "ann/ann_set.h"

#include <algorithm>
#include <map>

namespace rankd {

AnnIndexes::AnnIndexes() : set_(std::make_shared<const AnnSet>()) {}

void AnnIndexes::Install(AnnIndexPtr index) {
  std::lock_guard lock(write_mu_);
  auto next = std::make_shared<AnnSet>(*Current());
  const std::string& name = index->spec().name;
  auto it = std::find_if(next->indexes.begin(), next->indexes.end(),
                         [&](const auto& e) { return e.first == name; });
  if (it != next->indexes.end())
    it->second = std::move(index);
  else
    next->indexes.emplace_back(name, std::move(index));
  set_.store(std::move(next), std::memory_order_release);
}

void AnnIndexes::Retain(const std::vector<std::string>& names) {
  std::lock_guard lock(write_mu_);
  auto next = std::make_shared<AnnSet>(*Current());
  std::erase_if(next->indexes, [&](const auto& e) {
    return std::find(names.begin(), names.end(), e.first) == names.end();
  });
  set_.store(std::move(next), std::memory_order_release);
}

bool AnnIndexes::Has(const std::vector<std::string>& names) const {
  AnnSetPtr set = Current();
  return std::all_of(names.begin(), names.end(),
                     [&](const std::string& n) { return set->Find(n) != nullptr; });
}

size_t AnnIndexes::BytesBesides(std::string_view name) const {
  size_t sum = 0;
  for (const auto& [n, idx] : Current()->indexes)
    if (n != name) sum += idx->bytes();
  return sum;
}

namespace {
std::mutex stats_mu;
std::map<std::string, std::unique_ptr<AnnIndexStats>>& StatsByName() {
  static auto* by_name = new std::map<std::string, std::unique_ptr<AnnIndexStats>>;
  return *by_name;  // never destroyed: a scrape may run while the process exits
}
}  // namespace

AnnIndexStats& AnnIndexStatsOf(const std::string& name) {
  std::lock_guard lock(stats_mu);
  auto& slot = StatsByName()[name];
  if (!slot) slot = std::make_unique<AnnIndexStats>();
  return *slot;
}

void ForEachAnnIndexStats(const std::function<void(const std::string&, const AnnIndexStats&)>& fn) {
  std::lock_guard lock(stats_mu);
  for (const auto& [name, stats] : StatsByName()) fn(name, *stats);
}

}  // namespace rankd
