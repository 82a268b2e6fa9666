#include "redis/uv_adapter.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

namespace rankd {

namespace {

// One per attached context. Freed by the uv_close callback, which libuv runs after the
// handle is fully closed, so a poll callback already on the stack may still read it.
struct UvRedisEvents {
  uv_poll_t poll{};
  redisAsyncContext* ac = nullptr;  // nullptr once hiredis called cleanup
  UvRedisListener* listener = nullptr;
  int events = 0;
};

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
          redisAsyncHandleRead(ac);
        if (self->ac != nullptr) self->listener->OnPollError(status);
        return;
      }
      if (evs & UV_READABLE) redisAsyncHandleRead(ac);
      if (self->ac != nullptr && (evs & UV_WRITABLE)) {
        if ((ac->c.flags & REDIS_CONNECTED) && ac->c.obuf && sdslen(ac->c.obuf) > 0)
          self->listener->OnSocketWrite();
        redisAsyncHandleWrite(ac);
      }
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

int AttachUvAdapter(redisAsyncContext* ac, uv_loop_t* loop, UvRedisListener* listener) {
  auto* ev = new UvRedisEvents;
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
