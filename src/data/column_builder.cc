#include "data/column_builder.h"

namespace rankd {

ColumnBuilder::ColumnBuilder(ColumnType type, size_t reserve) {
  col_.type = type;
  switch (type) {
    case ColumnType::kI64: col_.i64.reserve(reserve); break;
    case ColumnType::kF64: col_.f64.reserve(reserve); break;
    case ColumnType::kBool: col_.b.reserve(reserve); break;
    case ColumnType::kStr:
      col_.str_code.reserve(reserve);
      dict_ = std::make_shared<StringDict>();
      break;
  }
}

uint32_t ColumnBuilder::Code(std::string_view s) {
  auto [it, inserted] =
      codes_.try_emplace(std::string(s), static_cast<uint32_t>(dict_->values.size()));
  if (inserted) dict_->values.emplace_back(s);
  return it->second;
}

void ColumnBuilder::AppendOne(const Column& col, uint32_t row) {
  bool valid = col.valid(row);
  if (!valid) null_rows_.push_back(size_);
  switch (col_.type) {
    case ColumnType::kI64: col_.i64.push_back(valid ? col.i64[row] : 0); break;
    case ColumnType::kF64: col_.f64.push_back(valid ? col.f64[row] : 0.0); break;
    case ColumnType::kBool: col_.b.push_back(valid ? col.b[row] : 0); break;
    case ColumnType::kStr: col_.str_code.push_back(valid ? Code(col.str(row)) : 0); break;
  }
  ++size_;
}

void ColumnBuilder::Append(const Column& col, std::span<const uint32_t> rows) {
  // Fast path: fixed-width columns without nulls gather with no per-row branch.
  if (col.validity.all_valid() && col_.type == ColumnType::kI64) {
    for (uint32_t r : rows) col_.i64.push_back(col.i64[r]);
    size_ += rows.size();
    return;
  }
  if (col.validity.all_valid() && col_.type == ColumnType::kF64) {
    for (uint32_t r : rows) col_.f64.push_back(col.f64[r]);
    size_ += rows.size();
    return;
  }
  for (uint32_t r : rows) AppendOne(col, r);
}

void ColumnBuilder::AppendNulls(size_t n) {
  for (size_t i = 0; i < n; ++i) null_rows_.push_back(size_ + i);
  switch (col_.type) {
    case ColumnType::kI64: col_.i64.resize(col_.i64.size() + n, 0); break;
    case ColumnType::kF64: col_.f64.resize(col_.f64.size() + n, 0.0); break;
    case ColumnType::kBool: col_.b.resize(col_.b.size() + n, 0); break;
    case ColumnType::kStr: col_.str_code.resize(col_.str_code.size() + n, 0); break;
  }
  size_ += n;
}

Column ColumnBuilder::Finish() && {
  for (size_t r : null_rows_) col_.validity.SetNull(r, size_);
  if (col_.type == ColumnType::kStr) {
    if (dict_->values.empty()) dict_->values.emplace_back();  // code 0 of null rows
    col_.dict = std::move(dict_);
  }
  return std::move(col_);
}

}  // namespace rankd
