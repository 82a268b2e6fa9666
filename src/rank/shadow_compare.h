// How a shadow plan's answer compares with the primary's (docs/experiments.md, "Shadow
// plans"): the overlap of their first k items and the rank correlation of the items
// both returned. Items are compared by their `id` column, as 64-bit keys.
//
// Threads: any thread; pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "data/row_set.h"

namespace rankd {

// The answer's ids in order as keys: an i64 id itself, a str id its 64-bit hash; rows
// with a null id (or an answer without an id column) are left out.
std::vector<uint64_t> IdKeys(const RowSet& rows);

// |A_k n B_k| / min(k, |A|, |B|); nullopt when that denominator is 0.
std::optional<double> OverlapAtK(std::span<const uint64_t> a, std::span<const uint64_t> b,
                                 size_t k);

// Kendall's tau-a of the order of the items in both a and b: (concordant - discordant)
// pairs / (n (n - 1) / 2); nullopt under 2 common items. A repeated id counts at its
// first position.
std::optional<double> KendallTauA(std::span<const uint64_t> a, std::span<const uint64_t> b);

}  // namespace rankd
