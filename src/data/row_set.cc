#include "data/row_set.h"

#include <cassert>
#include <numeric>

#include "data/column_builder.h"

namespace rankd {

std::string_view ColumnTypeName(ColumnType t) {
  switch (t) {
    case ColumnType::kI64: return "i64";
    case ColumnType::kF64: return "f64";
    case ColumnType::kStr: return "str";
    case ColumnType::kBool: return "bool";
    case ColumnType::kVec: return "vec";
  }
  return "?";
}

void Validity::SetNull(size_t i, size_t n) {
  if (bits_.empty()) {
    bits_.assign((n + 63) / 64, ~uint64_t{0});
  }
  bits_[i >> 6] &= ~(uint64_t{1} << (i & 63));
}

size_t Column::size() const {
  switch (type) {
    case ColumnType::kI64: return i64.size();
    case ColumnType::kF64: return f64.size();
    case ColumnType::kStr: return str_code.size();
    case ColumnType::kBool: return b.size();
    case ColumnType::kVec: return dim == 0 ? 0 : vec.size() / dim;
  }
  return 0;
}

Value Column::Get(size_t row) const {
  if (!valid(row)) return std::monostate{};
  switch (type) {
    case ColumnType::kI64: return i64[row];
    case ColumnType::kF64: return f64[row];
    case ColumnType::kStr: return std::string(str(row));
    case ColumnType::kBool: return b[row] != 0;
    case ColumnType::kVec: {
      std::span<const float> v = vec_row(row);
      return std::vector<float>(v.begin(), v.end());
    }
  }
  return std::monostate{};
}

Column Column::I64(PoolVector<int64_t> v) {
  Column c;
  c.type = ColumnType::kI64;
  c.i64 = std::move(v);
  return c;
}

Column Column::F64(PoolVector<double> v) {
  Column c;
  c.type = ColumnType::kF64;
  c.f64 = std::move(v);
  return c;
}

Column Column::Bool(PoolVector<uint8_t> v) {
  Column c;
  c.type = ColumnType::kBool;
  c.b = std::move(v);
  return c;
}

namespace {

// A column of cells given as optionals (nullopt: null), each value appended by `append`.
template <class T, class Append>
Column FromCells(ColumnBuilder b, const std::vector<std::optional<T>>& v, Append append) {
  for (const auto& x : v) {
    if (x)
      append(b, *x);
    else
      b.AppendNulls(1);
  }
  return std::move(b).Finish();
}

}  // namespace

Column Column::Str(const std::vector<std::optional<std::string>>& v) {
  return FromCells(ColumnBuilder(ColumnType::kStr, v.size()), v,
                   [](ColumnBuilder& b, const std::string& s) { b.AppendStr(s); });
}

Column Column::Vec(uint32_t dim, const std::vector<std::optional<std::vector<float>>>& v) {
  return FromCells(ColumnBuilder(ColumnType::kVec, v.size(), dim), v,
                   [](ColumnBuilder& b, const std::vector<float>& x) { b.AppendVec(x); });
}

Column Column::Nulls(ColumnType t, size_t n, uint32_t dim) {
  ColumnBuilder b(t, n, dim);
  b.AppendNulls(n);
  return std::move(b).Finish();
}

RowSet RowSet::Empty() {
  RowSet rs;
  rs.SetColumn("id", Share(Column::I64({})));
  return rs;
}

const Column* RowSet::column(std::string_view name) const {
  for (const auto& [n, c] : columns_)
    if (n == name) return c.get();
  return nullptr;
}

void RowSet::SetColumn(std::string name, ColumnPtr col) {
  if (columns_.empty()) physical_rows_ = col->size();
  assert(col->size() == physical_rows_);
  for (auto& [n, c] : columns_) {
    if (n == name) {
      c = std::move(col);
      return;
    }
  }
  columns_.emplace_back(std::move(name), std::move(col));
}

RowSet RowSet::WithSelection(Selection sel) const {
  RowSet out;
  out.physical_rows_ = physical_rows_;
  out.columns_ = columns_;
  out.sel_ = std::move(sel);
  return out;
}

RowSet RowSet::Take(size_t n) const {
  if (n >= size()) return *this;
  Selection sel;
  if (sel_) {
    sel.assign(sel_->begin(), sel_->begin() + static_cast<ptrdiff_t>(n));
  } else {
    sel.resize(n);
    std::iota(sel.begin(), sel.end(), 0u);
  }
  return WithSelection(std::move(sel));
}

Selection RowSet::LogicalRows() const {
  if (sel_) return *sel_;
  Selection rows(physical_rows_);
  std::iota(rows.begin(), rows.end(), 0u);
  return rows;
}

}  // namespace rankd
