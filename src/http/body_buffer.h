// BodyBuffer: a request body while its bytes arrive. The memory it holds follows the
// bytes received: a small body (the usual /rank body is a few hundred bytes) grows in
// one string, a larger one in blocks of kBlock bytes, so that it never holds more than
// its bytes plus one block (no doubling jumps), never allocates ahead of its bytes (a
// Content-Length of 1 MiB costs nothing until the bytes come), and the freed blocks of
// one body fit the next (no heap fragments of every size under a flood of bodies).
// Take joins it into one string of its exact size when the request is complete.
//
// Thread: any, one at a time (a connection's loop thread owns it).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "core/block_pool.h"

namespace rankd::http {

class BodyBuffer {
 public:
  static constexpr size_t kBlock = 16 * 1024;

  void Append(std::string_view bytes);
  size_t size() const { return size_; }
  // Heap bytes held: the first string's capacity (when it left its inline buffer) and
  // the blocks.
  size_t held() const;
  // The whole body in one string; the buffer is empty afterwards.
  PoolString Take();

 private:
  PoolString first_;                             // the first kBlock bytes
  std::vector<std::unique_ptr<char[]>> blocks_;  // the rest; the last one partly filled
  size_t size_ = 0;
};

}  // namespace rankd::http
