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
// Threads: a plain object; one thread at a time.
#pragma once

#include <optional>
#include <string_view>

#include "core/error.h"
#include "redis/options.h"
#include "redis/reply.h"
#include "redis/reply_scanner.h"

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

}  // namespace rankd
