#include "data/column_builder.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <functional>

#include "core/mix.h"

namespace rankd {

ColumnBuilder::ColumnBuilder(ColumnType type, size_t reserve, uint32_t dim) {
  col_.type = type;
  switch (type) {
    case ColumnType::kVec:
      assert(dim >= 1 && dim <= kMaxVecDim);
      col_.dim = dim;
      col_.vec.reserve(reserve * dim);
      break;
    case ColumnType::kI64: col_.i64.reserve(reserve); break;
    case ColumnType::kF64: col_.f64.reserve(reserve); break;
    case ColumnType::kBool: col_.b.reserve(reserve); break;
    case ColumnType::kStr: {
      col_.str_code.reserve(reserve);
      dict_ = std::allocate_shared<StringDict>(block_pool::Allocator<StringDict>());
      // Room for as many distinct strings as rows, up to a bound (most str columns of a
      // request are ids, each distinct): no growth step per doubling. Reserving touches
      // no memory, so a column of few distinct values pays only the allocations' size.
      const size_t distinct = std::min<size_t>(reserve, 4096);
      known_.reserve(distinct);
      dict_->values.reserve(distinct, 8 * distinct);
      // The table starts at up to 256 slots (1 KiB, cleared): a column of ids grows it a
      // few times less, one of a few codes pays little for it.
      initial_slots_ = std::bit_ceil(std::clamp<size_t>(2 * distinct, 16, 256));
      break;
    }
  }
}

namespace {

uint64_t Load32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// A string's key: up to 8 bytes packed into one word from fixed-size loads (two
// overlapping 4-byte ones, or three single bytes), so that for a given length two keys
// are equal only when the strings are; a longer string's std::hash.
uint64_t KeyOf(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  if (n >= 4 && n <= 8) return Load32(p) | (Load32(p + n - 4) << 32);
  if (n > 0 && n < 4) {
    const auto byte = [](char c) { return static_cast<uint64_t>(static_cast<unsigned char>(c)); };
    return byte(p[0]) | (byte(p[n / 2]) << 8) | (byte(p[n - 1]) << 16);
  }
  return n == 0 ? 0 : std::hash<std::string_view>{}(s);
}

// The slot hash of a key and length.
size_t SlotHash(uint64_t key, size_t size) {
  return static_cast<size_t>(Mix64(key ^ (size * 0x9e3779b97f4a7c15ULL)));
}

}  // namespace

uint32_t ColumnBuilder::Code(std::string_view s) {
  if (slots_.empty()) slots_.assign(initial_slots_, 0);
  const uint64_t key = KeyOf(s);
  const size_t n = s.size();
  size_t mask = slots_.size() - 1;
  size_t i = SlotHash(key, n) & mask;
  for (; slots_[i] != 0; i = (i + 1) & mask) {
    const uint32_t code = slots_[i] - 1;
    const Known& k = known_[code];
    if (k.key == key && k.size == n && (n <= 8 || dict_->values[code] == s)) return code;
  }
  const auto code = static_cast<uint32_t>(dict_->values.size());
  dict_->values.emplace_back(s);
  known_.push_back({key, n});
  slots_[i] = code + 1;
  if (2 * known_.size() > slots_.size()) {  // past half full: double, re-place all
    slots_.assign(2 * slots_.size(), 0);
    mask = slots_.size() - 1;
    for (uint32_t c = 0; c < known_.size(); ++c) {
      size_t j = SlotHash(known_[c].key, known_[c].size) & mask;
      while (slots_[j] != 0) j = (j + 1) & mask;
      slots_[j] = c + 1;
    }
  }
  return code;
}

void ColumnBuilder::AppendOne(const Column& col, uint32_t row) {
  bool valid = col.valid(row);
  if (!valid) null_rows_.push_back(size_);
  switch (col_.type) {
    case ColumnType::kI64: col_.i64.push_back(valid ? col.i64[row] : 0); break;
    case ColumnType::kF64: col_.f64.push_back(valid ? col.f64[row] : 0.0); break;
    case ColumnType::kBool: col_.b.push_back(valid ? col.b[row] : 0); break;
    case ColumnType::kStr: col_.str_code.push_back(valid ? Code(col.str(row)) : 0); break;
    case ColumnType::kVec: {
      // A null row of the source holds zeros already.
      assert(col.dim == col_.dim);
      std::span<const float> v = col.vec_row(row);
      col_.vec.insert(col_.vec.end(), v.begin(), v.end());
      break;
    }
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

void ColumnBuilder::AppendVecBytes(std::string_view bytes) {
  static_assert(std::endian::native == std::endian::little, "vec fields are little-endian float32");
  assert(bytes.size() == 4 * size_t{col_.dim});
  const size_t at = col_.vec.size();
  col_.vec.resize(at + col_.dim);
  std::memcpy(col_.vec.data() + at, bytes.data(), 4 * size_t{col_.dim});
  ++size_;
}

void ColumnBuilder::AppendNulls(size_t n) {
  for (size_t i = 0; i < n; ++i) null_rows_.push_back(size_ + i);
  switch (col_.type) {
    case ColumnType::kI64: col_.i64.resize(col_.i64.size() + n, 0); break;
    case ColumnType::kF64: col_.f64.resize(col_.f64.size() + n, 0.0); break;
    case ColumnType::kBool: col_.b.resize(col_.b.size() + n, 0); break;
    case ColumnType::kStr: col_.str_code.resize(col_.str_code.size() + n, 0); break;
    case ColumnType::kVec: col_.vec.resize(col_.vec.size() + n * col_.dim, 0.0f); break;
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
