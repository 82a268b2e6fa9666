// Reply builders for hiredis's reader, used where hiredis still reads replies: a
// connection's handshake and the tracker's push mode (data connections read theirs in
// place once live: resp.h). They parse replies straight into our RedisReply instead of
// hiredis's redisReply tree, which we would only copy and free
// (the copy and the tree's one-allocation-per-element were most of the client's CPU).
// The reply handed to a callback is still freed by hiredis when the callback returns,
// so callbacks move the value out (TakeReply) before returning. The builders never
// throw (hiredis is C): an allocation failure fails the reply with hiredis's
// out-of-memory error instead. They trust counts only as far as RespScanner
// (reply_scanner.h) has checked them, and reserve little up front regardless.
//
// Threads: pure functions over the reply being built or delivered; the loop thread that
// owns the context.
#pragma once

#include <hiredis/read.h>

#include "redis/reply.h"

namespace rankd {

// The object functions to install on an async context: ac->c.reader->fn = ...
redisReplyObjectFunctions* RedisReplyBuilders();

// The value of a reply delivered to a callback (non-null `reply` of a context that uses
// RedisReplyBuilders). Move from it: hiredis frees the holder after the callback.
RedisReply& TakeReply(void* reply);

}  // namespace rankd
