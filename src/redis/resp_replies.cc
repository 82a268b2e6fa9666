#include "redis/resp_replies.h"

#include <cassert>
#include <utility>

#include "core/free_list.h"
#include "core/parse_int.h"

namespace rankd {

namespace {

// The CR of the line that starts at `p` (a header: no CR before its end).
const char* LineEnd(const char* p) {
  while (*p != '\r') ++p;
  return p;
}

// The CR of the first CRLF from `p` on: where a status or error line ends (a bare CR or
// LF before it is text, as RespScanner reads it).
const char* TextEnd(const char* p) {
  while (true) {
    p = LineEnd(p);
    if (p[1] == '\n') return p;
    ++p;
  }
}

// A length header the scanner accepted: its value, read as the scanner reads it (so
// "-01" is nil like "-1", and "-0" or "-00" is a length of 0, not nil).
int64_t Length(const char* p, const char* cr) {
  const bool negative = *p == '-';
  if (negative) ++p;
  int64_t v = 0;
  for (; p < cr; ++p) v = v * 10 + (*p - '0');
  return negative ? -v : v;
}

}  // namespace

RespView::RespView(const char* p) {
  const char type = *p++;
  if (type == '+' || type == '-') {
    const char* cr = TextEnd(p);
    kind_ = type == '+' ? Kind::kStatus : Kind::kError;
    data_ = p;
    len_ = static_cast<size_t>(cr - p);
    end_ = cr + 2;
    return;
  }
  const char* cr = LineEnd(p);
  end_ = cr + 2;
  if (type == ':') {
    kind_ = Kind::kInteger;
    num_ = ParseStrictInt<int64_t>(std::string_view(p, static_cast<size_t>(cr - p))).value_or(0);
    return;
  }
  const int64_t n = Length(p, cr);
  if (n < 0) return;  // nil bulk or nil array
  if (type == '$') {
    kind_ = Kind::kString;
    data_ = cr + 2;
    len_ = static_cast<size_t>(n);
    end_ = data_ + len_ + 2;
    return;
  }
  kind_ = Kind::kArray;  // '*'
  num_ = n;
  data_ = cr + 2;
  if (n > 0) end_ = nullptr;  // known once the elements are walked
}

const char* RespView::End() const {
  if (end_ != nullptr) return end_;
  const char* p = data_;
  for (int64_t i = 0; i < num_; ++i) p = RespView(p).End();
  return p;
}

RespView::Iterator RespView::begin() const {
  Iterator it;
  if (size() == 0) return it;
  it.cur_ = RespView(data_);
  it.left_ = size();
  return it;
}

RespView RespView::At(size_t i) const {
  if (i >= size()) return RespView();
  auto it = begin();
  for (; i > 0; --i) ++it;
  return *it;
}

std::string_view RespKindName(RespKind k) {
  switch (k) {
    case RespKind::kNil: return "nil";
    case RespKind::kInteger: return "integer";
    case RespKind::kString: return "string";
    case RespKind::kArray: return "array";
    case RespKind::kError: return "error";
    case RespKind::kStatus: return "status";
  }
  return "nil";
}

void RespReplies::AppendError(std::string_view message) {
  *buf_ += '-';
  buf_->append(message);
  *buf_ += "\r\n";
  EndReply();
}

void RespReplies::DropComplete() {
  assert(parts_.empty());
  if (ends_->empty()) return;
  buf_->erase(0, ends_->back());
  ends_->clear();
}

uint32_t RespReplies::AddPart(RespReplies part) {
  assert(buf_->empty() && part.parts_.empty());
  parts_.push_back(std::move(part));
  return static_cast<uint32_t>(parts_.size() - 1);
}

RespReplies RespReplies::Simplified() && {
  if (parts_.size() != 1 || parts_[0].size() != size()) return std::move(*this);
  for (size_t i = 0; i < size(); ++i)
    if ((*ends_)[i] != i) return std::move(*this);  // part 0, index i
  return std::move(parts_[0]);
}

}  // namespace rankd
