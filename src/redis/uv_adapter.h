// Our libuv adapter for hiredis's async API, on the public ac->ev hooks.
//
// Why not hiredis's own adapters/libuv.h: its poll callback returns early when libuv
// reports an error, so a refused or reset connection never reaches hiredis, pending
// callbacks never run and the context leaks. Here a poll error is handed to hiredis
// (redisAsyncHandleWrite while connecting, redisAsyncHandleRead after), which then finds
// the socket error and tears the context down, failing every pending callback.
//
// Reads are ours too: hiredis's reader trusts length headers and buffers a bulk string
// whole, so the adapter reads the socket itself, runs the bytes through a RespScanner
// (reply_scanner.h) and only then feeds hiredis's reader and lets it run the callbacks.
// A reply that breaks a ReplyLimits rule, or that no command is waiting for, fails the
// connection before hiredis buffers it.
//
// Raw mode (SetRawMode), for data connections once their handshake is done: hiredis's
// reader and callback list are no longer used at all. Scanned bytes go to the listener
// with where each complete reply ends (OnRawRead), and writability to the listener too
// (OnRawWritable, while WatchWritable is on): the connection writes its own buffer.
//
// Threads: the loop thread that owns `loop`, and only it. AttachUvAdapter is called with
// EventLoop::uv(), which checks that in debug and sanitizer builds; the callbacks then
// run on that loop.
#pragma once

#include <uv.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "redis/options.h"
#include "redis/reply.h"

struct redisAsyncContext;

namespace rankd {

// What the adapter tells the connection that owns the context.
class UvRedisListener {
 public:
  // hiredis is about to flush a non-empty output buffer: one write(2).
  virtual void OnSocketWrite() = 0;
  // libuv reported `uv_status` and hiredis saw nothing wrong on the socket. The listener
  // must take the context down itself (redisAsyncFree): it is not inside a hiredis
  // callback here, so that is safe.
  virtual void OnPollError(int uv_status) = 0;
  // The socket reached EOF or failed (bad_reply == false), or its bytes broke a reply
  // limit or the protocol (bad_reply == true; `why` quotes no bytes of the stream). The
  // listener must take the context down itself (redisAsyncFree); not inside a hiredis
  // callback here either.
  virtual void OnReadFailed(std::string why, bool bad_reply) = 0;
  // hiredis is freeing the context (failed connect, lost connection, or our own
  // redisAsyncFree). Called exactly once per attached context, after every pending
  // callback has run; the context pointer must not be used after this returns.
  virtual void OnContextCleanup(const redisAsyncContext* ac) = 0;
  // Raw mode: bytes read and scanned; `ends` are the offsets in `bytes` where complete
  // replies end. The listener may take the context down (redisAsyncFree): not inside a
  // hiredis callback here.
  virtual void OnRawRead(std::string_view bytes, const std::vector<size_t>& ends) = 0;
  // Raw mode: the socket is writable. Same freedom as OnRawRead.
  virtual void OnRawWritable() = 0;

 protected:
  ~UvRedisListener() = default;
};

// What receives the replies of a context in push mode (SetPushSink).
class PushSink {
 public:
  // One complete reply. Must not free the context (schedule that instead).
  virtual void OnPush(RedisReply reply) = 0;

 protected:
  ~PushSink() = default;
};

// Push mode, for a connection subscribed to a channel (redis/tracker.h): from now on
// every reply read from `ac` goes to `sink`, in order, instead of to hiredis's callbacks.
// hiredis cannot take them itself: in subscribe mode it reads the reply as its own
// redisReply type, which our reply builders (reader.h) do not make. Commands sent after
// this must have no callback (fn == nullptr). REQUIRES: no hiredis callback is waiting
// for a reply (the handshake is over).
void SetPushSink(redisAsyncContext* ac, PushSink* sink);

// Raw mode: from now on every byte read from `ac` goes, scanned, to the listener's
// OnRawRead, and writability to OnRawWritable. REQUIRES: no hiredis callback waits for
// a reply and hiredis's output buffer is empty (the handshake is over); may be called
// from the callback of the handshake's last reply.
void SetRawMode(redisAsyncContext* ac);
// Raw mode: watch for writability (OnRawWritable) while `on`.
void WatchWritable(redisAsyncContext* ac, bool on);

// Attaches `ac` to `loop` and starts watching for writability at once, so that the end
// of the non-blocking connect is noticed even before a command is queued.
// Replies are checked against `limits`. Returns a libuv error code (< 0) on failure,
// leaving `ac` unattached.
int AttachUvAdapter(redisAsyncContext* ac, uv_loop_t* loop, UvRedisListener* listener,
                    const ReplyLimits& limits);

}  // namespace rankd
