#include "metrics/series_set.h"

namespace rankd {

Series* SeriesSet::Retain(SeriesFamily family, std::vector<std::string> labels,
                          std::span<const double> bounds) {
  std::string key(1, static_cast<char>(family));
  for (const auto& l : labels) {
    key += '\0';
    key += l;
  }
  auto [it, made] = entries_.try_emplace(std::move(key));
  Entry& e = it->second;
  if (made) {
    e.family = family;
    e.series = std::make_shared<Series>(std::move(labels), bounds);
    by_series_.emplace(e.series.get(), it);
    changed_ = true;
  }
  ++e.refs;
  return e.series.get();
}

void SeriesSet::Release(const Series* s) {
  auto it = by_series_.find(s);
  if (it == by_series_.end()) return;
  if (--it->second->second.refs > 0) return;
  entries_.erase(it->second);
  by_series_.erase(it);
  changed_ = true;
}

void SeriesSet::Publish() {
  if (!changed_) return;
  changed_ = false;
  auto next = std::make_shared<Snapshot>();
  for (const auto& [key, e] : entries_) (*next)[static_cast<size_t>(e.family)].push_back(e.series);
  published_.Set(std::move(next));
}

}  // namespace rankd
