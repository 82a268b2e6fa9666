// ColumnBuilder: builds a new Column by appending cells gathered from other columns
// (concat, materialising views) or nulls. Strings are re-dictionary-encoded.
//
// Threads: one builder per thread; the result is an ordinary immutable Column.
#pragma once

#include <span>
#include <string>
#include <unordered_map>

#include "data/row_set.h"

namespace rankd {

class ColumnBuilder {
 public:
  ColumnBuilder(ColumnType type, size_t reserve);

  // Appends col's physical rows `rows`, in that order. REQUIRES: col.type == type.
  void Append(const Column& col, std::span<const uint32_t> rows);
  // Appends col's rows [0, n). REQUIRES: col.type == type, n <= col.size().
  void AppendPrefix(const Column& col, size_t n);
  void AppendNulls(size_t n);
  size_t size() const { return size_; }

  Column Finish() &&;

 private:
  void AppendOne(const Column& col, uint32_t row);
  uint32_t Code(std::string_view s);

  Column col_;
  size_t size_ = 0;
  bool has_nulls_ = false;
  std::vector<size_t> null_rows_;
  std::shared_ptr<StringDict> dict_;
  std::unordered_map<std::string, uint32_t> codes_;
};

}  // namespace rankd
