// The sort task's ordering, callable on its own (tests poll-count it through `cancelled`;
// diversify orders its new scores with it).
//
// Threads: a pure function of its arguments; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/row_set.h"
#include "plan/expr.h"  // CancelCheck
#include "plan/plan.h"

namespace rankd {

// The logical rows of `rs` (physical indices) in stable order of `key`, descending when
// `desc`, nulls and NaN last in input order. With first > 0 only the first `first` rows
// need their final place; the others follow in no particular order. Polls `cancelled`
// between blocks of at most a few thousand rows (sort.cc kSortBlock); nullopt once it
// said true.
std::optional<Selection> SortRows(const RowSet& rs, const Column& key, bool desc, size_t first,
                                  const CancelCheck& cancelled);

// How many of `node`'s first output rows must be in order (SortRows' `first`): the
// node's rows_read, or this request's count of the take that reads it when smaller;
// 0 when every row may be read. `node` and `params` may be null (tests, benchmarks).
size_t RowsToOrder(const PlanNode* node, const ParamValues* params);

}  // namespace rankd
