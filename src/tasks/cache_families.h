// What the shard cache and its tracking need of a schema (plan/schema.h): the families it
// may hold (ShardCache::SetFamilies) and the BCAST prefixes that cover the tracked ones
// (Redis refuses overlapping ones on one client: the shortest of each overlapping group is
// kept). A counters family with cache_ms is held but never tracked: Redis would push an
// invalidation for every event.
//
// Threads: pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "cache/cached_values.h"
#include "plan/schema.h"

namespace rankd {

std::vector<CacheFamily> CacheFamiliesOf(const Schema& schema);
std::vector<std::string> TrackingPrefixesOf(const Schema& schema);

}  // namespace rankd
