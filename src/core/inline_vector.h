// InlineVector<T, N>: a vector of trivially copyable T whose first N elements live
// inside the object. A cache entry holds its small values this way so that they share
// the entry's heap block (a hit reads one block, not two); more than N go to the heap,
// all of them (the inline cells are then unused). Not thread-safe: one owner at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace rankd {

template <class T, size_t N>
class InlineVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr size_t kInline = N;

  InlineVector() = default;
  InlineVector(const InlineVector&) = default;
  InlineVector& operator=(const InlineVector&) = default;
  // A moved-from one is empty.
  InlineVector(InlineVector&& o) noexcept { *this = std::move(o); }
  InlineVector& operator=(InlineVector&& o) noexcept {
    std::copy_n(o.inline_, std::min(o.size_, N), inline_);
    heap_ = std::move(o.heap_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* data() const { return size_ <= N ? inline_ : heap_.data(); }
  T* data() { return size_ <= N ? inline_ : heap_.data(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& operator[](size_t i) { return data()[i]; }

  void reserve(size_t n) {
    if (n > N) heap_.reserve(n);
  }
  void push_back(const T& v) {
    if (size_ < N) {
      inline_[size_++] = v;
      return;
    }
    if (size_ == N) heap_.assign(inline_, inline_ + N);
    heap_.push_back(v);
    ++size_;
  }
  // New elements are value-initialised.
  void resize(size_t n) {
    if (n <= N) {
      if (size_ > N) {
        std::copy_n(heap_.data(), n, inline_);
        heap_ = {};
      } else {
        std::fill(inline_ + std::min(size_, n), inline_ + n, T{});
      }
    } else {
      if (size_ <= N) heap_.assign(inline_, inline_ + size_);
      heap_.resize(n);
    }
    size_ = n;
  }
  void assign(std::span<const T> v) {
    resize(0);
    reserve(v.size());
    for (const T& x : v) push_back(x);
  }
  void shrink_to_fit() { heap_.shrink_to_fit(); }
  // The heap block's capacity, in elements (0 while they are inline).
  size_t heap_capacity() const { return heap_.capacity(); }

  template <class Range>
  friend bool operator==(const InlineVector& a, const Range& b) {
    return std::equal(a.begin(), a.end(), std::begin(b), std::end(b));
  }

 private:
  size_t size_ = 0;
  T inline_[N] = {};     // the elements while size_ <= N
  std::vector<T> heap_;  // the elements while size_ > N
};

}  // namespace rankd
