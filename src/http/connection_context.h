// ConnectionContext: everything a Connection may use of its Listener, and the few
// things it may ask of it (ConnectionEvents). The Listener owns one and hands every
// connection a reference; nothing else of the Listener is visible to a connection.
// Internal to src/http.
//
// Thread: the listener's loop thread only (the loop's AssertInLoopThread guards the
// entry points that reach it).
#pragma once

#include <cstddef>
#include <memory>

#include "core/event_loop.h"
#include "http/counters.h"
#include "http/handler.h"
#include "http/options.h"
#include "http/request_id.h"

namespace rankd::http {

class Connection;

// What the listener does when a connection asks. None of these is on the per-byte
// path: a connection calls them when it parks, waits or closes, or when a shard budget
// frees room or runs over.
class ConnectionEvents {
 public:
  // The loop turn has used its budget: call c->Unpark in the next turn.
  virtual void ParkUntilNextTurn(std::shared_ptr<Connection> c) = 0;
  // c stopped reading for the shard's input budget: call c->ResumeInput when it has room.
  virtual void WaitForInputRoom(std::shared_ptr<Connection> c) = 0;
  // Some connection's share of the input budget shrank (and the oldest body may have
  // changed).
  virtual void InputReleased() = 0;
  // The shard's unsent output is over its budget: close the slowest readers.
  virtual void UnsentOverBudget() = 0;
  // c's handle is closed (its close callback runs): the listener drops it.
  virtual void ConnectionClosed(Connection* c) = 0;

 protected:
  ~ConnectionEvents() = default;
};

struct ConnectionContext {
  ConnectionContext(EventLoop& loop, HttpOptions options, Handler handler,
                    ErrorRenderer render_error, ConnectionEvents& events)
      : loop(loop),
        options(std::move(options)),
        handler(std::move(handler)),
        render_error(render_error),
        events(events),
        ids(this->options.shard_id, NextListenerInstance()),
        read_buffer(new char[kReadBufferBytes]) {}
  ConnectionContext(const ConnectionContext&) = delete;
  ConnectionContext& operator=(const ConnectionContext&) = delete;

  EventLoop& loop;
  const HttpOptions options;
  const Handler handler;
  const ErrorRenderer render_error;
  ConnectionEvents& events;
  RequestIdGenerator ids;  // for requests without a valid X-Request-Id, and rejects
  HttpCounters counters;   // and the shard budgets: buffered_input, unsent
  bool draining = false;   // every response from now on closes its connection

  // The connections holding part of a request (its head, its body) across reads, in
  // the order they began holding: an intrusive list through Connection
  // (Connection::TrackUnfinished). Only the oldest may read on past the input budget, so
  // that one request at a time always completes and frees its share: bodies larger than
  // what the budget leaves them (or than the budget) do not wait on each other forever,
  // and no other size is let past (each exception is a way to hold memory the budget
  // does not see, times the number of connections).
  Connection* oldest_unfinished = nullptr;
  Connection* newest_unfinished = nullptr;
  bool InputOverBudget() const {
    return counters.buffered_input > options.max_buffered_input_bytes;
  }
  size_t InputRoom() const {
    return InputOverBudget() ? 0 : options.max_buffered_input_bytes - counters.buffered_input;
  }
  void MoveInputShare(size_t& share, size_t now) {
    if (now == share) return;
    counters.buffered_input = counters.buffered_input - share + now;
    bool released = now < share;
    share = now;
    if (released) events.InputReleased();
  }
  void MoveAllocatedShare(size_t& share, size_t now) {
    counters.input_allocated = counters.input_allocated - share + now;
    share = now;
  }
  void MoveUnsentShare(size_t& share, size_t now) {
    if (now == share) return;
    counters.unsent = counters.unsent - share + now;
    share = now;
    if (now > 0 && counters.unsent > options.max_unsent_bytes) events.UnsentOverBudget();
  }

  // One read buffer for every connection of the loop: libuv calls alloc and read back
  // to back on this thread, and a connection copies only what it cannot parse at once.
  static constexpr size_t kReadBufferBytes = 64 * 1024;
  const std::unique_ptr<char[]> read_buffer;
};

}  // namespace rankd::http
