#include "http/body_buffer.h"

#include <algorithm>
#include <cstring>

namespace rankd::http {

namespace {
const size_t kInline = PoolString().capacity();
}  // namespace

void BodyBuffer::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t take;
    if (size_ < kBlock) {
      take = std::min(bytes.size(), kBlock - size_);
      if (first_.capacity() - first_.size() < take) {
        // Amortised growth, but never past one block. Into a new string: reserve on this
        // one would round up to twice its capacity, past the block.
        PoolString grown;
        grown.reserve(std::min(std::max(first_.size() + take, 2 * first_.size()), kBlock));
        grown.append(first_);
        first_.swap(grown);
      }
      first_.append(bytes.data(), take);
    } else {
      size_t used = (size_ - kBlock) % kBlock;
      if (used == 0) blocks_.push_back(std::make_unique_for_overwrite<char[]>(kBlock));
      take = std::min(bytes.size(), kBlock - used);
      std::memcpy(blocks_.back().get() + used, bytes.data(), take);
    }
    size_ += take;
    bytes.remove_prefix(take);
  }
}

size_t BodyBuffer::held() const {
  return (first_.capacity() > kInline ? first_.capacity() : 0) + blocks_.size() * kBlock;
}

PoolString BodyBuffer::Take() {
  PoolString out;
  if (blocks_.empty()) {
    out.swap(first_);
  } else {
    out.reserve(size_);
    out.append(first_);
    size_t left = size_ - kBlock;
    for (const auto& b : blocks_) {
      size_t n = std::min(left, kBlock);
      out.append(b.get(), n);
      left -= n;
    }
    blocks_.clear();
    PoolString().swap(first_);
  }
  size_ = 0;
  return out;
}

}  // namespace rankd::http
