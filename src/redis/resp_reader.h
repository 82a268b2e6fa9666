// RespReader: bytes of a RESP2 reply stream in, replies read in place out. RespScanner
// (resp_scanner.h) checks each piece against ReplyLimits as it arrives and says where
// replies end; the bytes go into one RespReplies (resp_replies.h), read through RespView.
// What a connection's handshake and push mode (the tracker) read with, and what tests
// and fuzz harnesses drive without a socket. Data connections run the same scanner but
// hand each reply's bytes to the batch waiting for it instead (connection.h).
//
//   RespReader r(ReplyLimits{.max_bytes = 1 << 20});
//   if (auto s = r.Feed(bytes); !s) return;   // backend_error: a limit, or RESP broken
//   for (size_t i = 0; i < r.replies().size(); ++i) Use(r.replies()[i]);
//   r.DropComplete();                         // a long-lived reader keeps only the tail
//
// After any error the reader stays failed, like the connection it stands for.
//
// Threads: a plain object; one thread at a time.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "redis/options.h"
#include "redis/resp_replies.h"
#include "redis/resp_scanner.h"

namespace rankd {

class RespReader {
 public:
  explicit RespReader(const ReplyLimits& limits = {}) : scanner_(limits) {}

  // Feeds the next bytes of the stream (any split). Fails with backend_error when they
  // break a limit or the protocol; replies() then keeps only the replies before them.
  Status Feed(std::string_view bytes);
  // Every complete reply fed since the last DropComplete.
  const RespReplies& replies() const { return replies_; }
  // Forgets the complete replies (views into them go stale); the bytes of a reply not
  // complete yet stay.
  void DropComplete() { replies_.DropComplete(); }
  // Bytes of a reply not complete yet were fed.
  bool mid_reply() const { return scanner_.mid_reply(); }

 private:
  RespScanner scanner_;
  RespReplies replies_;
  std::vector<size_t> ends_;
  std::optional<Error> error_;
};

}  // namespace rankd
