#include "redis/uv_adapter.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "redis/reader.h"
#include "redis/reply_scanner.h"

// Exported by libhiredis 0.14.1 (and later) but not declared in its headers: the second
// half of redisAsyncHandleRead, run after the bytes are in the reader. It delivers every
// complete reply to its callback and disconnects on a reader error.
extern "C" void redisProcessCallbacks(redisAsyncContext* ac);

namespace rankd {

namespace {

// hiredis reads 16 KiB per readable event; so do we.
constexpr size_t kReadChunk = 16 * 1024;

// One per attached context. Freed by the uv_close callback, which libuv runs after the
// handle is fully closed, so a poll callback already on the stack may still read it.
struct UvRedisEvents {
  uv_poll_t poll{};
  redisAsyncContext* ac = nullptr;  // nullptr once hiredis called cleanup
  UvRedisListener* listener = nullptr;
  int events = 0;
  RespScanner scanner;
  PushSink* push = nullptr;  // push mode: replies go here, not to hiredis's callbacks
  bool raw = false;          // raw mode: bytes and writability go to the listener
  std::vector<size_t> ends;  // raw mode: where replies end in the last read (reused)

  UvRedisEvents(const ReplyLimits& limits) : scanner(limits) {}
};

// True when hiredis holds at least `n` callbacks waiting for replies. A reply nobody
// asked for would hit an assert inside hiredis (redisProcessCallbacks expects one only
// in subscribe or monitor mode, which we never use).
bool AwaitingAtLeast(const redisAsyncContext* ac, size_t n) {
  for (const redisCallback* cb = ac->replies.head; cb != nullptr && n > 0; cb = cb->next) --n;
  return n == 0;
}

// The writable half; counts a flush of a non-empty output buffer as one socket write.
void HandleWritable(UvRedisEvents* self) {
  if (self->raw) return self->listener->OnRawWritable();
  redisAsyncContext* ac = self->ac;
  bool flushing = ac->c.obuf != nullptr && sdslen(ac->c.obuf) > 0;
  redisAsyncHandleWrite(ac);  // also completes a pending connect
  if (self->ac != nullptr && flushing && (ac->c.flags & REDIS_CONNECTED))
    self->listener->OnSocketWrite();
}

// Push mode's half of HandleReadable: the bytes go through hiredis's reader (with our
// builders) and each complete reply to the sink.
void DeliverPushes(UvRedisEvents* self, std::string_view bytes) {
  redisReader* reader = self->ac->c.reader;
  if (redisReaderFeed(reader, bytes.data(), bytes.size()) != REDIS_OK)
    return self->listener->OnReadFailed("out of memory buffering a reply", true);
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader, &reply) != REDIS_OK)
      return self->listener->OnReadFailed("protocol error", true);
    if (reply == nullptr) return;
    RedisReply value = std::move(TakeReply(reply));
    reader->fn->freeObject(reply);
    self->push->OnPush(std::move(value));
  }
}

// Our redisAsyncHandleRead: read, scan, feed, run callbacks. May free the context
// (self->ac becomes nullptr).
void HandleReadable(UvRedisEvents* self) {
  redisAsyncContext* ac = self->ac;
  if (!(ac->c.flags & REDIS_CONNECTED)) {
    // Finish the connect without hiredis's read, which would take unscanned bytes.
    HandleWritable(self);
    if (self->ac == nullptr || !(ac->c.flags & REDIS_CONNECTED)) return;
  }
  char buf[kReadChunk];
  ssize_t n = read(ac->c.fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    self->listener->OnReadFailed(n == 0 ? "server closed the connection" : std::strerror(errno),
                                 false);
    return;
  }
  auto ended = self->scanner.Scan({buf, static_cast<size_t>(n)}, self->raw ? &self->ends : nullptr);
  if (!ended) return self->listener->OnReadFailed(std::move(ended.error().message), true);
  if (self->raw) return self->listener->OnRawRead({buf, static_cast<size_t>(n)}, self->ends);
  if (self->push != nullptr) return DeliverPushes(self, {buf, static_cast<size_t>(n)});
  if (!AwaitingAtLeast(ac, *ended))
    return self->listener->OnReadFailed("protocol error: a reply no command was waiting for", true);
  if (redisReaderFeed(ac->c.reader, buf, static_cast<size_t>(n)) != REDIS_OK)
    return self->listener->OnReadFailed("out of memory buffering a reply", true);
  redisProcessCallbacks(ac);
}

void Update(UvRedisEvents* ev, int events) {
  if (events == ev->events) return;
  ev->events = events;
  if (events != 0)
    uv_poll_start(&ev->poll, events, [](uv_poll_t* h, int status, int evs) {
      auto* self = static_cast<UvRedisEvents*>(h->data);
      if (self->ac == nullptr) return;
      redisAsyncContext* ac = self->ac;
      if (status < 0) {
        // libuv has stopped the poll (POLLERR/POLLHUP). Let hiredis look at the socket:
        // while connecting it checks SO_ERROR, afterwards read(2) reports the reset.
        self->events = 0;
        if (!(ac->c.flags & REDIS_CONNECTED))
          redisAsyncHandleWrite(ac);
        else
          HandleReadable(self);
        if (self->ac != nullptr) self->listener->OnPollError(status);
        return;
      }
      if (evs & UV_READABLE) HandleReadable(self);
      if (self->ac != nullptr && (evs & UV_WRITABLE)) HandleWritable(self);
    });
  else
    uv_poll_stop(&ev->poll);
}

void AddRead(void* p) {
  auto* ev = static_cast<UvRedisEvents*>(p);
  Update(ev, ev->events | UV_READABLE);
}
void DelRead(void* p) {
  auto* ev = static_cast<UvRedisEvents*>(p);
  Update(ev, ev->events & ~UV_READABLE);
}
void AddWrite(void* p) {
  auto* ev = static_cast<UvRedisEvents*>(p);
  Update(ev, ev->events | UV_WRITABLE);
}
void DelWrite(void* p) {
  auto* ev = static_cast<UvRedisEvents*>(p);
  Update(ev, ev->events & ~UV_WRITABLE);
}
void Cleanup(void* p) {
  auto* ev = static_cast<UvRedisEvents*>(p);
  const redisAsyncContext* ac = ev->ac;
  ev->ac = nullptr;
  uv_poll_stop(&ev->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&ev->poll),
           [](uv_handle_t* h) { delete static_cast<UvRedisEvents*>(h->data); });
  ev->listener->OnContextCleanup(ac);
}

}  // namespace

void SetPushSink(redisAsyncContext* ac, PushSink* sink) {
  static_cast<UvRedisEvents*>(ac->ev.data)->push = sink;
}

void SetRawMode(redisAsyncContext* ac) { static_cast<UvRedisEvents*>(ac->ev.data)->raw = true; }

void WatchWritable(redisAsyncContext* ac, bool on) {
  auto* ev = static_cast<UvRedisEvents*>(ac->ev.data);
  Update(ev, on ? ev->events | UV_WRITABLE : ev->events & ~UV_WRITABLE);
}

int AttachUvAdapter(redisAsyncContext* ac, uv_loop_t* loop, UvRedisListener* listener,
                    const ReplyLimits& limits) {
  auto* ev = new UvRedisEvents(limits);
  // uv_poll_init_socket: the fd is a socket (uv_poll_init would also work on Linux).
  int rc = uv_poll_init_socket(loop, &ev->poll, ac->c.fd);
  if (rc < 0) {
    delete ev;
    return rc;
  }
  ev->poll.data = ev;
  ev->ac = ac;
  ev->listener = listener;
  ac->ev.data = ev;
  ac->ev.addRead = AddRead;
  ac->ev.delRead = DelRead;
  ac->ev.addWrite = AddWrite;
  ac->ev.delWrite = DelWrite;
  ac->ev.cleanup = Cleanup;
  AddWrite(ev);
  return 0;
}

}  // namespace rankd
