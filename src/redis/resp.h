// RespView and RespReplies: replies kept as the RESP2 bytes Redis sent, read in place.
//
// Why: a feed request reads hundreds of replies. Building a RedisReply tree for each (a
// std::string per value, a vector per array) and moving the trees around was a large
// share of the request's CPU (malloc, free, copies). A batch's replies are now ONE byte
// buffer plus the offset where each reply ends; a RespView reads one value of it without
// copying: its kind, its integer (parsed once, when the view is made), its string as a
// string_view into the buffer, an array's length and its elements in order.
//
// The bytes must have passed RespScanner (reply_scanner.h) whole: the views trust every
// header (digits, CRLFs, lengths that fit the buffer, nesting at most 7 deep), which is
// exactly what the scanner checked. Nothing else may build a RespReplies from raw bytes.
//
// Buffers are recycled: a RespReplies takes its buffer and offset vector from a small
// free list of the thread that makes it and gives them back when destroyed there, so a
// steady stream of batches does not allocate (free lists are per thread because each
// shard is one loop thread and replies may outlive the pool that filled them).
//
// Threads: plain values; a RespReplies is used by one thread at a time (the loop thread
// of the shard that owns the connection). Views are valid while their RespReplies lives
// and is not appended to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/free_list.h"
#include "redis/reply.h"

namespace rankd {

class RespViewIterator;

class RespView {
 public:
  using Kind = RedisReply::Kind;

  RespView() = default;  // a nil
  // The value whose first byte (the type byte) is at `p`. REQUIRES: a whole value
  // checked by RespScanner starts there.
  explicit RespView(const char* p);

  Kind kind() const { return kind_; }
  bool is_nil() const { return kind_ == Kind::kNil; }
  bool is_error() const { return kind_ == Kind::kError; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_integer() const { return kind_ == Kind::kInteger; }

  int64_t integer() const { return kind_ == Kind::kInteger ? num_ : 0; }
  // The text of a string, error or status; "" for other kinds.
  std::string_view str() const { return {data_, len_}; }
  // Elements of an array; 0 for other kinds.
  size_t size() const { return kind_ == Kind::kArray ? static_cast<size_t>(num_) : 0; }

  // An array's elements in order. Each step skips the previous element's bytes (nested
  // arrays are walked), so a full pass is linear in the array's bytes.
  using Iterator = RespViewIterator;
  Iterator begin() const;
  Iterator end() const;

  // The first byte after this value (for an array: after its last element).
  const char* End() const;

  // A deep copy (tests, the seeder, CLUSTER SLOTS): never on the request path.
  RedisReply ToReply() const;

 private:
  Kind kind_ = Kind::kNil;
  const char* data_ = nullptr;  // string payload; an array's first element
  size_t len_ = 0;              // string length
  int64_t num_ = 0;             // integer value; array length
  const char* end_ = nullptr;   // end of a scalar (or of an empty array); arrays: walked
};

class RespViewIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = RespView;
  using difference_type = std::ptrdiff_t;
  using pointer = const RespView*;
  using reference = RespView;

  RespView operator*() const { return cur_; }
  const RespView* operator->() const { return &cur_; }
  RespViewIterator& operator++();
  bool operator==(const RespViewIterator& o) const { return left_ == o.left_; }

 private:
  friend class RespView;
  RespView cur_;
  size_t left_ = 0;
};

inline RespView::Iterator RespView::end() const { return Iterator(); }

class RespReplies {
 public:
  // Complete replies.
  size_t size() const { return ends_->size(); }
  bool empty() const { return ends_->empty(); }
  RespView operator[](size_t i) const { return RespView(buf_->data() + Start(i)); }
  // The bytes of reply i.
  std::string_view raw(size_t i) const {
    return std::string_view(*buf_).substr(Start(i), (*ends_)[i] - Start(i));
  }

  // Building (the connection, RespReader, a cluster batch putting node replies back in
  // order). Bytes of the reply being received, in pieces as they arrive:
  void AppendBytes(std::string_view bytes) { buf_->append(bytes); }
  // The reply whose bytes were appended since the last EndReply is complete.
  void EndReply() { ends_->push_back(buf_->size()); }
  // One whole reply (bytes of another RespReplies).
  void Append(std::string_view reply) {
    AppendBytes(reply);
    EndReply();
  }
  // An error reply made here ("CLUSTERDOWN ..."). REQUIRES: no CR or LF in `message`.
  void AppendError(std::string_view message);
  void Reserve(size_t replies) { ends_->reserve(replies); }

  // Deep copies, for tests and callers off the request path.
  std::vector<RedisReply> ToReplies() const;

 private:
  size_t Start(size_t i) const { return i == 0 ? 0 : (*ends_)[i - 1]; }

  // The buffers come from this thread's free list (core/free_list.h) and go back to it; a
  // string's own small buffer is not worth keeping, nor a block over these caps.
  Recycled<std::string, 4u << 20, 64> buf_;
  Recycled<std::vector<size_t>, 64u << 10> ends_;  // where each complete reply ends in buf_
};

}  // namespace rankd
