// ColumnBuilder: the one way to build a Column cell by cell, in row order: typed values
// (parsed Redis fields, test literals), nulls, or cells gathered from other columns
// (concat). Strings are dictionary-encoded as they come: one code per distinct string,
// in order of first appearance. Vectors are appended as dim floats a row.
//
// One exception, on purpose: `features` writes its numeric columns in place from the
// decoded cells (FillFixed in tasks/io_replies.cc), a value or a null bit per row with no
// per-cell dispatch; it is the hottest column-building loop of a feed request, and it
// must give the same Column as this builder (nulls hold 0), which its tests check.
//
// Threads: one builder per thread; the result is an ordinary immutable Column.
#pragma once

#include <span>
#include <string>

#include "data/row_set.h"

namespace rankd {

class ColumnBuilder {
 public:
  // dim: a kVec column's dimension (1..kMaxVecDim), 0 for the other types.
  ColumnBuilder(ColumnType type, size_t reserve, uint32_t dim = 0);

  ColumnType type() const { return col_.type; }

  // One cell. REQUIRES: the value is of the builder's type (AppendI64 on kI64, ...).
  void AppendI64(int64_t v) { col_.i64.push_back(v), ++size_; }
  void AppendF64(double v) { col_.f64.push_back(v), ++size_; }
  void AppendBool(bool v) { col_.b.push_back(v ? 1 : 0), ++size_; }
  void AppendStr(std::string_view v) { col_.str_code.push_back(Code(v)), ++size_; }
  // REQUIRES: v.size() == the column's dim.
  void AppendVec(std::span<const float> v) {
    col_.vec.insert(col_.vec.end(), v.begin(), v.end()), ++size_;
  }
  // A vector from its bytes: dim float32 in the machine's order (little-endian: rankd
  // builds for x86-64), at any alignment (a hash field's value, a cache entry's spill).
  // REQUIRES: bytes.size() == 4 * the column's dim.
  void AppendVecBytes(std::string_view bytes);
  void AppendNulls(size_t n);
  // col's physical rows `rows`, in that order. REQUIRES: col.type == type() (and, for
  // vectors, the same dim).
  void Append(const Column& col, std::span<const uint32_t> rows);

  Column Finish() &&;

 private:
  void AppendOne(const Column& col, uint32_t row);
  uint32_t Code(std::string_view s);

  Column col_;
  size_t size_ = 0;
  std::vector<size_t> null_rows_;
  std::shared_ptr<StringDict> dict_;
  // The codes of the strings seen so far: open addressing (linear probing, load ≤ 0.5)
  // over code + 1 (0: empty), and per code its string's length and key (column_builder.cc
  // KeyOf: a string of up to 8 bytes packed into one word, which equals another's only
  // when the strings do; a longer one's hash, its bytes compared on a match). One block,
  // no string built and no byte compare per lookup: a feed request encodes ~700 country
  // codes, where a std::unordered_map<std::string, ...> took ~17-25 ns each.
  struct Known {
    uint64_t key;
    size_t size;
  };
  // From the block pool: the builder's own tables, freed with it.
  PoolVector<uint32_t> slots_;
  size_t initial_slots_ = 16;  // the table's size at its first string
  PoolVector<Known> known_;    // by code
};

}  // namespace rankd
