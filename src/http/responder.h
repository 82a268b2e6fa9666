// Responder: the handler's one-shot handle for answering a request, possibly later.
// Move-only. It holds a weak reference to its connection: if the connection died in
// the meantime (client gone, hard close) completing it is a no-op, never a
// use-after-free. Destroying it unanswered answers 500 "internal", so a forgotten
// request never hangs its connection.
// Thread: Send/SendError, and destruction or move-assignment while unanswered, on the
// connection's loop thread only (answering asserts it: EventLoop::AssertInLoopThread).
// It may be moved across threads in between, e.g. inside a posted closure, and an
// answered (or moved-from) Responder may be destroyed anywhere.
#pragma once

#include <cstdint>
#include <memory>

#include "core/error.h"
#include "http/message.h"

namespace rankd {
class EventLoop;
}

namespace rankd::http {

class Connection;

class Responder {
 public:
  Responder() = default;  // empty: Send does nothing
  // `loop`: the connection's, where the answer must be given.
  Responder(std::weak_ptr<Connection> conn, uint64_t seq, const EventLoop& loop)
      : conn_(std::move(conn)), loop_(&loop), seq_(seq), done_(false) {}
  Responder(Responder&& o) noexcept
      : conn_(std::move(o.conn_)), loop_(o.loop_), seq_(o.seq_), done_(o.done_) {
    o.done_ = true;
  }
  Responder& operator=(Responder&& o) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  // Answers the request (exactly once: later calls do nothing).
  void Send(const Response& r);
  // Answers with the listener's answer to `e` (its ErrorRenderer).
  void SendError(const Error& e, std::span<const HeaderField> extra_headers = {});
  // Adds a header to the answer, whichever it will be and whoever gives it (CORS headers
  // decided at routing, for answers written elsewhere). Before Send or SendError;
  // dropped when the name or value holds CR or LF.
  void AddHeader(std::string_view name, std::string_view value);

 private:
  // Marks the request answered: the connection to answer it on, or null (answered
  // already, or the connection is gone).
  std::shared_ptr<Connection> Take();

  std::weak_ptr<Connection> conn_;
  const EventLoop* loop_ = nullptr;
  uint64_t seq_ = 0;
  bool done_ = true;  // an empty Responder has nothing to answer
};

}  // namespace rankd::http
