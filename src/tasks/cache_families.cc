// cache_families.h: the cache's view of a schema.
#include "tasks/cache_families.h"

#include <algorithm>

namespace rankd {

std::vector<CacheFamily> CacheFamiliesOf(const Schema& schema) {
  std::vector<CacheFamily> out;
  for (const KeyFamily& f : schema.families)
    if (f.cacheable())
      out.push_back(
          {f.cache_id, f.key_prefix, f.key_suffix, f.id_type == ColumnType::kStr, f.tracked()});
  return out;
}

std::vector<std::string> TrackingPrefixesOf(const Schema& schema) {
  std::vector<std::string> all;
  for (const KeyFamily& f : schema.families)
    if (f.tracked()) all.push_back(f.key_prefix);
  // Redis refuses overlapping BCAST prefixes on one client: keep the shortest of each
  // overlapping group (it covers the longer ones' keys).
  std::sort(all.begin(), all.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  std::vector<std::string> out;
  for (const std::string& p : all) {
    bool covered = false;
    for (const std::string& q : out) covered |= p.starts_with(q);
    if (!covered) out.push_back(p);
  }
  return out;
}

}  // namespace rankd
