// RowKeyIds: a row set's key column as dense ids, for the ops that count rows per key
// value as they walk the rows (diversify, cap: feed_ops.cc). An id indexes a plain array
// of counters, so the walk itself does no hashing.
//
// Threads: a pure function of its arguments; any thread.
#pragma once

#include <cstdint>
#include <optional>

#include "data/row_set.h"
#include "plan/expr.h"  // CancelCheck

namespace rankd {

// The id of a null key: a null is no key value (diversify and cap treat each null alone).
inline constexpr uint32_t kNullKeyId = UINT32_MAX;

// ids[i] = the id of logical row i's key: 0, 1, ... in order of first appearance among
// the rows, equal ids for equal values; kNullKeyId for a null. Returns the number of
// distinct ids. Strings compare by bytes (a string column hashes each dictionary entry
// its rows use once, not each row). O(rows); its tables come from the block pool. Polls
// `cancelled` every kKeyIdsBlock rows; nullopt once it said true.
// REQUIRES: key is an i64 or str column of `rs`.
std::optional<uint32_t> RowKeyIds(const RowSet& rs, const Column& key, PoolVector<uint32_t>& ids,
                                  const CancelCheck& cancelled);

// Rows between two polls of `cancelled`: well under a millisecond of hashing even when
// every lookup misses the cache.
inline constexpr size_t kKeyIdsBlock = 16384;

}  // namespace rankd
