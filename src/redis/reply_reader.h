// RedisReplyReader: bytes of a RESP2 reply stream in, RedisReply values out, through
// exactly the path a live connection uses: RespScanner checks the bytes against
// ReplyLimits, then hiredis's reader parses them with our reply builders (reader.h).
// Connections drive the same two pieces from the libuv adapter (uv_adapter.cc); this
// class exists so that tests and fuzz harnesses can drive them without a socket:
//
//   RedisReplyReader r(ReplyLimits{.max_bytes = 1 << 20});
//   if (auto s = r.Feed(bytes); !s) return;          // backend_error: limit or RESP broken
//   while (true) {
//     auto next = r.Next();                            // Result<std::optional<RedisReply>>
//     if (!next || !*next) break;                      // error, or no complete reply yet
//     Use(**next);
//   }
//
// After any error the reader stays failed, like the connection it stands for.
//
// RespReader is the same for the path data connections take since they stopped using
// hiredis's reader: RespScanner, then each complete reply's bytes appended to one
// RespReplies (resp.h), read in place through RespView. Feed(bytes) -> Status; replies()
// holds every complete reply so far. RedisReplyReader stays for the handshake and the
// tracker's push mode, which still go through hiredis.
//
// Threads: plain objects; one thread at a time.
#pragma once

#include <optional>
#include <string_view>

#include "core/error.h"
#include "redis/options.h"
#include "redis/reply.h"
#include "redis/reply_scanner.h"
#include "redis/resp.h"

struct redisReader;

namespace rankd {

class RedisReplyReader {
 public:
  explicit RedisReplyReader(const ReplyLimits& limits = {});
  ~RedisReplyReader();
  RedisReplyReader(const RedisReplyReader&) = delete;
  RedisReplyReader& operator=(const RedisReplyReader&) = delete;

  // Feeds the next bytes of the stream (any split). Fails with backend_error when they
  // break a limit or the protocol; nothing of them reaches hiredis then.
  Status Feed(std::string_view bytes);
  // The next complete reply, std::nullopt when none is complete yet; backend_error when
  // hiredis rejects the stream (it should not, after the scanner) or runs out of memory.
  Result<std::optional<RedisReply>> Next();
  // Replies that ended in the bytes fed so far and that Next has not returned.
  size_t ready() const { return ready_; }

 private:
  Status Failed(Error e);

  RespScanner scanner_;
  redisReader* reader_;
  size_t ready_ = 0;
  std::optional<Error> error_;
};

class RespReader {
 public:
  explicit RespReader(const ReplyLimits& limits = {}) : scanner_(limits) {}

  // Feeds the next bytes of the stream (any split). Fails with backend_error when they
  // break a limit or the protocol; replies() then keeps only the replies before them.
  Status Feed(std::string_view bytes);
  // Every complete reply fed so far.
  const RespReplies& replies() const { return replies_; }

 private:
  RespScanner scanner_;
  RespReplies replies_;
  std::vector<size_t> ends_;
  std::optional<Error> error_;
};

}  // namespace rankd
