// Row sets: the columnar tables that tasks exchange (docs/plan.md, "Row sets and column types").
//
// A Column is immutable once built and shared (shared_ptr<const Column>) between row
// sets, so tasks that add or replace one column copy no other. A RowSet is a list of
// named columns of equal physical length plus an optional selection vector `sel`:
// logical row i is physical row sel[i]. One index vector serves as both selection and
// permutation: filter keeps a subset, sort reorders, take truncates — none copies a
// column. Strings are dictionary-encoded per column.
//
// Threads: immutable values; a RowSet may be read from any thread, built on one.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/block_pool.h"
#include "data/value.h"

namespace rankd {

// Row-set storage (cells, validity, selection vectors, the column list, the columns
// themselves: Share) comes from the thread's block pool (core/block_pool.h, PoolVector):
// a request's columns are freed when the request ends and the next request on the shard
// takes the same blocks again, without malloc.
// Physical row indexes: a selection or permutation of a row set's rows.
using Selection = PoolVector<uint32_t>;

// Validity bitmap: bit i set = row i is non-null. An empty bitmap means "all valid",
// so columns without nulls pay nothing.
class Validity {
 public:
  bool all_valid() const { return bits_.empty(); }
  bool valid(size_t i) const { return bits_.empty() || (bits_[i >> 6] >> (i & 63)) & 1; }
  // Makes the bitmap explicit (all rows valid) for `n` rows, then clears row i.
  void SetNull(size_t i, size_t n);
  const PoolVector<uint64_t>& words() const { return bits_; }
  PoolVector<uint64_t>& mutable_words() { return bits_; }

 private:
  PoolVector<uint64_t> bits_;
};

// The strings of a dictionary, in code order, their bytes in one buffer (a column of
// hundreds of distinct titles is two allocations, not one per string past 15 bytes).
// A view it hands out is valid until the next push_back.
class StringValues {
 public:
  StringValues() = default;
  StringValues(std::initializer_list<std::string_view> values) {
    for (std::string_view v : values) push_back(v);
  }
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  std::string_view operator[](size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(bytes_.data() + begin, ends_[i] - begin);
  }
  void push_back(std::string_view s) {
    bytes_.append(s);
    ends_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  void emplace_back(std::string_view s = {}) { push_back(s); }
  // Room for n strings of `bytes` bytes in all.
  void reserve(size_t n, size_t bytes = 0) {
    ends_.reserve(n);
    bytes_.reserve(bytes);
  }
  friend bool operator==(const StringValues& a, const std::vector<std::string>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < b.size(); ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

 private:
  // From the thread's block pool (core/block_pool.h), as a column's cells: a request's
  // dictionaries take no malloc once the shard is warm.
  PoolString bytes_;
  PoolVector<uint32_t> ends_;  // value i is bytes_[ends_[i - 1], ends_[i])
};

// String dictionary of one column: codes index `values`.
struct StringDict {
  StringValues values;
};

struct Column {
  ColumnType type = ColumnType::kI64;
  // Exactly one storage vector is used, chosen by `type`; each has the physical length
  // (kVec: dim values a row).
  PoolVector<int64_t> i64;
  PoolVector<double> f64;
  PoolVector<uint8_t> b;          // kBool: 0 or 1
  PoolVector<uint32_t> str_code;  // kStr: index into dict->values
  // kVec: row r is vec[r * dim, (r + 1) * dim), contiguous float32 rows (a null row holds
  // zeros), so a block of rows is one array the vector kernels stream through.
  PoolVector<float> vec;
  uint32_t dim = 0;  // kVec: 1..kMaxVecDim; 0 otherwise
  std::shared_ptr<const StringDict> dict;
  Validity validity;

  size_t size() const;
  bool valid(size_t row) const { return validity.valid(row); }
  std::string_view str(size_t row) const { return dict->values[str_code[row]]; }
  // Row `row` of a kVec column: dim floats.
  std::span<const float> vec_row(size_t row) const {
    return {vec.data() + row * dim, static_cast<size_t>(dim)};
  }
  Value Get(size_t row) const;  // null-aware, physical row

  static Column I64(PoolVector<int64_t> v);
  static Column F64(PoolVector<double> v);
  static Column Bool(PoolVector<uint8_t> v);
  // The same from any other container of values (copied; tests and cold paths).
  template <class Values>
  static Column I64(const Values& v) {
    return I64(PoolVector<int64_t>(std::begin(v), std::end(v)));
  }
  template <class Values>
  static Column F64(const Values& v) {
    return F64(PoolVector<double>(std::begin(v), std::end(v)));
  }
  template <class Values>
  static Column Bool(const Values& v) {
    return Bool(PoolVector<uint8_t>(std::begin(v), std::end(v)));
  }
  // Builds a dictionary-encoded string column; nullopt entries are null.
  static Column Str(const std::vector<std::optional<std::string>>& v);
  // A kVec column of dimension `dim` (tests and cold paths); nullopt entries are null.
  // REQUIRES: 1 <= dim <= kMaxVecDim and every value has dim floats.
  static Column Vec(uint32_t dim, const std::vector<std::optional<std::vector<float>>>& v);
  // n nulls of type t (dim: of a kVec column).
  static Column Nulls(ColumnType t, size_t n, uint32_t dim = 0);
};

using ColumnPtr = std::shared_ptr<const Column>;

// A built column made shareable: the one way tasks turn a Column into a ColumnPtr (its
// control block and the Column come from the block pool in one block).
inline ColumnPtr Share(Column c) {
  return std::allocate_shared<const Column>(block_pool::Allocator<Column>(), std::move(c));
}

class RowSet {
 public:
  RowSet() = default;
  // An empty row set with only an (empty) id column.
  static RowSet Empty();

  size_t physical_rows() const { return physical_rows_; }
  size_t size() const { return sel_ ? sel_->size() : physical_rows_; }
  // Physical index of logical row i.
  uint32_t row(size_t i) const { return sel_ ? (*sel_)[i] : static_cast<uint32_t>(i); }
  // The selection vector, if any (nullptr = identity).
  const Selection* selection() const { return sel_ ? &*sel_ : nullptr; }

  size_t num_columns() const { return columns_.size(); }
  const std::string& column_name(size_t i) const { return columns_[i].first; }
  const ColumnPtr& column_at(size_t i) const { return columns_[i].second; }
  // nullptr when absent. Linear scan: row sets have a handful of columns.
  const Column* column(std::string_view name) const;

  // Adds a column or replaces the one of that name.
  // REQUIRES: col->size() == physical_rows() (or this is the first column).
  void SetColumn(std::string name, ColumnPtr col);

  // Views with a new selection vector (indices are physical rows); columns are shared.
  RowSet WithSelection(Selection sel) const;
  // Logical rows [0, n) (take); shares columns and truncates the selection.
  RowSet Take(size_t n) const;
  // The selection vector materialised: identity if there is none.
  Selection LogicalRows() const;

 private:
  size_t physical_rows_ = 0;
  PoolVector<std::pair<std::string, ColumnPtr>> columns_;
  std::optional<Selection> sel_;
};

// A task's inputs, in the plan's listed order (pooled: one per node run).
using RowSets = PoolVector<RowSet>;

}  // namespace rankd
