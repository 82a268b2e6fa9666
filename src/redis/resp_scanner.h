// RespScanner: checks the bytes of a RESP2 reply stream against ReplyLimits as they
// arrive, and says where each reply ends, so that they can be kept as they are and read
// in place (resp_replies.h: RespView trusts exactly what the scanner checked).
//
// Why: a length header is a promise the bytes have not kept yet. `*2147483647` must not
// make anything reserve two billion elements, nor a `$1073741824` bulk be buffered whole
// before it is refused. The scanner reads every header as it streams past, so a reply
// that could not fit its budget fails the connection the moment its header is seen,
// before a byte of its payload is kept. It also rejects what a reader could misread (a
// number that is not plain decimal, a negative length other than -1, nil).
//
// Budget of one top-level reply: every byte of it, headers included, counts against
// max_bytes; a bulk header must leave room for its payload and CRLF, an array header for
// 3 bytes per element (the smallest element, "+\r\n"), on top of what the reply has used
// and what its open arrays still owe. Memory per reply is thus bounded by the byte limit;
// max_elements bounds the work of whoever reads its elements.
//
// Threads: a plain object; one stream, one thread at a time (the loop thread that owns
// the connection, or a fuzz harness).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "redis/options.h"

namespace rankd {

class RespScanner {
 public:
  explicit RespScanner(const ReplyLimits& limits) : limits_(limits) {}

  // Scans the next bytes of the stream (any split: a header may straddle calls).
  // Returns how many top-level replies end inside `bytes`, or backend_error naming the
  // broken rule ("reply over the 16777216-byte limit: ..."). The message quotes no bytes
  // of the stream, only sizes. After an error the scanner stays failed: the stream is
  // out of sync and the connection must go. With `ends`, it is cleared and receives
  // where each of those replies ends (the offset in `bytes` just past its last byte):
  // what lets a connection hand every reply's bytes to the batch waiting for it.
  Result<size_t> Scan(std::string_view bytes, std::vector<size_t>* ends = nullptr);

  // A reply is partly scanned (the stream is not at a reply boundary).
  bool mid_reply() const { return state_ != State::kType || depth_ > 0; }

 private:
  enum class State : uint8_t {
    kType,       // the next byte is a type byte
    kHeader,     // digits of a $ * : line
    kSimple,     // text of a + - line (skipped, only counted)
    kPayload,    // bulk payload bytes still to skip
    kPayloadCr,  // the CR after a bulk payload
    kPayloadLf,  // the LF after it
    kFailed,
  };
  // An array being scanned: elements still to come.
  struct Open {
    int64_t remaining;
  };
  static constexpr int kMaxDepth = 7;            // open arrays (--redis-max-reply-depth)
  static constexpr size_t kMaxHeaderChars = 20;  // "-9223372036854775808"

  Result<size_t> Fail(std::string why);
  bool Charge(size_t n);             // counts n bytes of the current reply; false when over budget
  size_t Room() const;               // bytes the current reply may still use
  Status EndHeader(const char* at);  // a complete $ * : line, ending before `at`, is in header_
  // The number `v` of a complete $ * : line: applies it, or returns false when it breaks
  // a rule, which HeaderError(v) then names.
  // `at`: just past the header line.
  bool AcceptHeader(int64_t v, const char* at);
  [[gnu::cold]] Error HeaderError(int64_t v) const;
  // The common case: whole `$ * :` header lines (each with a bulk's payload and CRLF)
  // inside `[p, end)` from a reply element's start on. Returns where it stopped: at the
  // first element that is not whole here, or not simple (the byte-wise states take over).
  Result<const char*> ScanWhole(const char* p, const char* end);
  // An element ended just before `at`: close finished arrays, maybe the reply.
  void EndElement(const char* at);

  ReplyLimits limits_;
  State state_ = State::kType;
  char type_ = 0;        // type byte of the line being read
  bool saw_cr_ = false;  // the line's last byte was CR (CRLF may straddle reads)
  char header_[kMaxHeaderChars];
  size_t header_len_ = 0;
  uint64_t payload_left_ = 0;
  Open open_[kMaxDepth];
  int depth_ = 0;                        // arrays open
  uint64_t used_ = 0;                    // bytes of the current reply so far
  uint64_t owed_ = 0;                    // 3 bytes per element announced and not yet begun
  uint64_t elements_ = 0;                // elements announced by the current reply's arrays
  size_t completed_ = 0;                 // replies ended in the current Scan call
  const char* base_ = nullptr;           // the current Scan call's bytes
  std::vector<size_t>* ends_ = nullptr;  // where its replies end, when asked
};

}  // namespace rankd
