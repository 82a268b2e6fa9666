// DistinctKeys: the distinct 64-bit keys of a sequence, in order of first appearance,
// with each key's position among them. For the tasks that meet each id once: dedupe
// keeps a row per key, features asks Redis (or the cache) once per distinct item.
//
// DistinctStrings: the same for strings (a str id column).
//
// An open-addressing set in one block (linear probing, load ≤ 0.5; a slot holds the
// key's position + 1, 0: empty), not a heap node per key as std::unordered_set would
// take: at a few hundred ids a request, the nodes' allocations were most of the time.
// `Alloc` is where its arrays live: the heap, or the thread's block pool
// (block_pool::Allocator) for a set built and dropped within one task run.
//
// Threads: a value type; one thread at a time per instance.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/mix.h"

namespace rankd {

template <class Key, template <class> class Alloc = std::allocator>
class DistinctKeys {
  static_assert(sizeof(Key) == 8, "a 64-bit integer key");

 public:
  // Room for up to `max_keys` distinct keys (more: undefined).
  explicit DistinctKeys(size_t max_keys)
      : cap_(std::bit_ceil(std::max<size_t>(16, 2 * max_keys))),
        shift_(64 - std::countr_zero(cap_)),
        slots_(cap_, 0) {
    keys_.reserve(max_keys);
  }

  struct Seen {
    uint32_t index;  // the key's position in keys()
    bool first;      // this call added it
  };
  Seen Add(Key k) {
    // Fibonacci hashing: ids are often dense, and the top bits of the product spread them.
    size_t s = static_cast<size_t>((static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ULL) >> shift_);
    while (slots_[s] != 0 && keys_[slots_[s] - 1] != k) s = (s + 1) & (cap_ - 1);
    if (slots_[s] != 0) return {slots_[s] - 1, false};
    keys_.push_back(k);
    slots_[s] = static_cast<uint32_t>(keys_.size());
    return {slots_[s] - 1, true};
  }

  using Keys = std::vector<Key, Alloc<Key>>;
  const Keys& keys() const { return keys_; }
  Keys& keys() { return keys_; }

 private:
  size_t cap_;
  int shift_;
  std::vector<uint32_t, Alloc<uint32_t>> slots_;
  Keys keys_;
};

// The same for strings (views the caller keeps alive while it adds): a slot matches on
// the string's hash (core/mix.h HashBytes), then on its bytes.
template <template <class> class Alloc = std::allocator>
class BasicDistinctStrings {
 public:
  explicit BasicDistinctStrings(size_t max_keys)
      : cap_(std::bit_ceil(std::max<size_t>(16, 2 * max_keys))), slots_(cap_, 0) {
    keys_.reserve(max_keys);
    hashes_.reserve(max_keys);
  }

  using Seen = DistinctKeys<uint64_t>::Seen;
  Seen Add(std::string_view k) {
    const uint64_t h = HashBytes(k, 0x243f6a8885a308d3ULL);
    size_t s = static_cast<size_t>(h) & (cap_ - 1);
    for (; slots_[s] != 0; s = (s + 1) & (cap_ - 1)) {
      const uint32_t i = slots_[s] - 1;
      if (hashes_[i] == h && keys_[i] == k) return {i, false};
    }
    keys_.push_back(k);
    hashes_.push_back(h);
    slots_[s] = static_cast<uint32_t>(keys_.size());
    return {slots_[s] - 1, true};
  }

  const std::vector<std::string_view, Alloc<std::string_view>>& keys() const { return keys_; }

 private:
  size_t cap_;
  std::vector<uint32_t, Alloc<uint32_t>> slots_;
  std::vector<std::string_view, Alloc<std::string_view>> keys_;
  std::vector<uint64_t, Alloc<uint64_t>> hashes_;
};
using DistinctStrings = BasicDistinctStrings<>;

}  // namespace rankd
