#include "tasks/row_keys.h"

#include <algorithm>
#include <cassert>

#include "core/distinct_keys.h"

namespace rankd {

namespace {

// Walks the rows block by block, polling `cancelled` between blocks; id_of(r) is the id
// of the key of physical row r, which is not null.
template <class IdOf>
bool EachId(const RowSet& rs, const Column& key, PoolVector<uint32_t>& ids,
            const CancelCheck& cancelled, IdOf id_of) {
  const size_t n = rs.size();
  for (size_t begin = 0; begin < n; begin += kKeyIdsBlock) {
    if (cancelled && cancelled()) return false;
    const size_t end = std::min(n, begin + kKeyIdsBlock);
    for (size_t i = begin; i < end; ++i) {
      const uint32_t r = rs.row(i);
      ids[i] = key.valid(r) ? id_of(r) : kNullKeyId;
    }
  }
  return true;
}

}  // namespace

std::optional<uint32_t> RowKeyIds(const RowSet& rs, const Column& key, PoolVector<uint32_t>& ids,
                                  const CancelCheck& cancelled) {
  const size_t n = rs.size();
  ids.resize(n);
  if (key.type == ColumnType::kStr) {
    // A row's dictionary code names its string: the first row of each code looks the
    // string up, the others reuse its id (a dictionary may hold a value twice: ids must
    // still be by value).
    const StringValues& dict = key.dict->values;
    PoolVector<uint32_t> id_of_code(dict.size(), kNullKeyId);
    BasicDistinctStrings<block_pool::Allocator> seen(std::min(n, dict.size()));
    bool done = EachId(rs, key, ids, cancelled, [&](uint32_t r) {
      uint32_t& id = id_of_code[key.str_code[r]];
      if (id == kNullKeyId) id = seen.Add(dict[key.str_code[r]]).index;
      return id;
    });
    if (!done) return std::nullopt;
    return static_cast<uint32_t>(seen.keys().size());
  }
  assert(key.type == ColumnType::kI64);
  DistinctKeys<int64_t, block_pool::Allocator> seen(n);
  if (!EachId(rs, key, ids, cancelled, [&](uint32_t r) { return seen.Add(key.i64[r]).index; }))
    return std::nullopt;
  return static_cast<uint32_t>(seen.keys().size());
}

}  // namespace rankd
