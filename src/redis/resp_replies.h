// RespView and RespReplies: replies kept as the RESP2 bytes Redis sent, read in place.
//
// The one form replies take, on every connection (data, handshake, tracker, cluster).
// Why: a feed request reads hundreds of replies. Building a tree of values for each (a
// std::string per value, a vector per array) and moving the trees around was a large
// share of the request's CPU (malloc, free, copies). A batch's replies are ONE byte
// buffer plus the offset where each reply ends; a RespView reads one value of it without
// copying: its kind, its integer (parsed once, when the view is made), its string as a
// string_view into the buffer, an array's length and its elements in order.
//
// The bytes must have passed RespScanner (resp_scanner.h) whole: the views trust every
// header (digits, CRLFs, lengths that fit the buffer, nesting at most 7 deep), which is
// exactly what the scanner checked. Nothing else may build a RespReplies from raw bytes
// (a connection hands a waiter the bytes the scanner passed; RespReader, resp_reader.h,
// does both steps for everything else).
//
// Buffers are recycled: a RespReplies takes its buffer and offset vector from a small
// free list of the thread that makes it and gives them back when destroyed there, so a
// steady stream of batches does not allocate (free lists are per thread because each
// shard is one loop thread and replies may outlive the pool that filled them).
//
// Gathered replies: a cluster batch's replies come from several node batches, each its
// own RespReplies in its node's order. Rather than copying them into the batch's order,
// the batch's RespReplies keeps them whole as parts (AddPart) and places each of its
// replies by reference (Place: reply i is reply k of part p); reads then take one more
// index step. A RespReplies is either built from bytes or gathered, never both.
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

#include "core/block_pool.h"
#include "core/free_list.h"

namespace rankd {

class RespViewIterator;

enum class RespKind : uint8_t { kNil, kInteger, kString, kArray, kError, kStatus };

std::string_view RespKindName(RespKind k);  // "nil", "integer", ...

class RespView {
 public:
  using Kind = RespKind;

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

  // Element i of an array; a nil when out of range or not an array. Walks the elements
  // before it: for the few fixed positions of a short reply (a tracker message, a slot
  // range's bounds, tests); a pass over all elements iterates instead.
  RespView At(size_t i) const;

  // The first byte after this value (for an array: after its last element).
  const char* End() const;

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
  // Inline: a reply's elements are walked once per element on the request path (hundreds
  // a batch); the step itself is RespView's constructor.
  [[gnu::always_inline]] RespViewIterator& operator++() {
    if (--left_ > 0) cur_ = RespView(cur_.End());
    return *this;
  }
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
  RespView operator[](size_t i) const {
    if (!parts_.empty()) return parts_[PartOf(i)][IndexOf(i)];
    return RespView(buf_->data() + Start(i));
  }
  // The bytes of reply i.
  std::string_view raw(size_t i) const {
    if (!parts_.empty()) return parts_[PartOf(i)].raw(IndexOf(i));
    return std::string_view(*buf_).substr(Start(i), (*ends_)[i] - Start(i));
  }

  // Building (a batch's waiter, RespReader, a cluster batch putting node replies back in
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
  // Forgets the complete replies, keeping the bytes of one not complete yet (a
  // long-lived reader's buffer holds one reply at a time). REQUIRES: not gathered.
  void DropComplete();

  // Gathering (a cluster batch). Makes this `n` replies, each to be placed before it is
  // read. REQUIRES: nothing appended.
  void Gathered(size_t n) { ends_->assign(n, 0); }
  // Keeps `part` (replies built from bytes) as part number part_count() and returns
  // that number. Views into the parts stay valid while this lives, except across an
  // AddPart (a part's string short enough to live in its object moves with it).
  uint32_t AddPart(RespReplies part);
  uint32_t part_count() const { return static_cast<uint32_t>(parts_.size()); }
  // Reply i is reply `index` of part `part` (a later Place of i replaces the earlier).
  void Place(size_t i, uint32_t part, uint32_t index) {
    (*ends_)[i] = (size_t{part} << 32) | index;
  }
  // The part reply i was placed in.
  uint32_t part_of(size_t i) const { return static_cast<uint32_t>(PartOf(i)); }
  // Gathered from one part, every reply in that part's order: the part itself, read
  // without the extra step; else this as it is.
  RespReplies Simplified() &&;

 private:
  size_t Start(size_t i) const { return i == 0 ? 0 : (*ends_)[i - 1]; }
  size_t PartOf(size_t i) const { return (*ends_)[i] >> 32; }
  size_t IndexOf(size_t i) const { return (*ends_)[i] & 0xffffffffu; }

  // The buffers come from this thread's free list (core/free_list.h) and go back to it; a
  // string's own small buffer is not worth keeping, nor a block over these caps.
  Recycled<std::string, 4u << 20, 64> buf_;
  // Where each complete reply ends in buf_; gathered, each reply's part << 32 | index.
  Recycled<std::vector<size_t>, 64u << 10> ends_;
  // Gathered: the parts (a handful, so from the block pool rather than malloc).
  PoolVector<RespReplies> parts_;
};

}  // namespace rankd
