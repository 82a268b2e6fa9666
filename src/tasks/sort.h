// The sort task's ordering, callable on its own (tests poll-count it through `cancelled`).
//
// Threads: a pure function of its arguments; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/row_set.h"
#include "plan/expr.h"  // CancelCheck

namespace rankd {

// The logical rows of `rs` (physical indices) in stable order of `key`, descending when
// `desc`, nulls and NaN last in input order. With first > 0 only the first `first` rows
// need their final place; the others follow in no particular order. Polls `cancelled`
// between blocks of at most a few thousand rows (sort.cc kSortBlock); nullopt once it
// said true.
std::optional<Selection> SortRows(const RowSet& rs, const Column& key, bool desc, size_t first,
                                  const CancelCheck& cancelled);

}  // namespace rankd
