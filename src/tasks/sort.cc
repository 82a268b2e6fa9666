// sort: a stable sort of the selection vector by one column, nulls last in either order.
// Only the index vector moves; no column is copied.
#include <algorithm>
#include <cmath>

#include "tasks/schemas.h"
#include "tasks/task.h"

namespace rankd {

Result<ColumnTypes> SortSchema(const SchemaArgs& a) {
  const std::string& key = a.args.Str("key");
  if (!a.inputs[0].find(key))
    return Fail(Error::BadRequest("params.key: the input has no column '" + key + "' (it has " +
                                  ColumnList(a.inputs[0]) + ")"));
  return a.inputs[0];
}

namespace {

template <class Less>
void StableOrder(std::vector<uint32_t>& rows, bool desc, Less less) {
  if (desc)
    std::stable_sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) { return less(b, a); });
  else
    std::stable_sort(rows.begin(), rows.end(), less);
}

}  // namespace

Result<RowSet> RunSort(const TaskContext& ctx, std::vector<RowSet> in) {
  const RowSet& rs = in[0];
  const std::string& key = ctx.args->Str("key");
  bool desc = ctx.args->Str("order") == "desc";
  const Column* col = rs.column(key);
  if (!col) return Fail(Error::Internal("sort: no column '" + key + "'"));
  std::vector<uint32_t> rows = rs.LogicalRows();
  // Nulls (and NaN, which has no order) go last, in their input order.
  auto has_value = [&](uint32_t r) {
    return col->valid(r) && !(col->type == ColumnType::kF64 && std::isnan(col->f64[r]));
  };
  auto mid = std::stable_partition(rows.begin(), rows.end(), has_value);
  std::vector<uint32_t> nulls(mid, rows.end());
  rows.erase(mid, rows.end());
  switch (col->type) {
    case ColumnType::kI64:
      StableOrder(rows, desc, [&](uint32_t a, uint32_t b) { return col->i64[a] < col->i64[b]; });
      break;
    case ColumnType::kF64:
      StableOrder(rows, desc, [&](uint32_t a, uint32_t b) { return col->f64[a] < col->f64[b]; });
      break;
    case ColumnType::kBool:
      StableOrder(rows, desc, [&](uint32_t a, uint32_t b) { return col->b[a] < col->b[b]; });
      break;
    case ColumnType::kStr:
      StableOrder(rows, desc, [&](uint32_t a, uint32_t b) { return col->str(a) < col->str(b); });
      break;
  }
  rows.insert(rows.end(), nulls.begin(), nulls.end());
  return rs.WithSelection(std::move(rows));
}

}  // namespace rankd
