// Listener: one shard's HTTP/1.1 server socket and its connections. Binds with
// SO_REUSEPORT so that N shards can listen on one port and the kernel spreads
// connections; hands every complete request to the handler on the loop thread.
// Under load, input read after the loop turn has used its budget is parsed at the start
// of the next turn, after its timers (EventLoop::TurnOverBudget; Connection parks).
// It also keeps the shard's budgets over all its connections: buffered input (reads
// stop past it) and unsent output (the slowest readers are closed past it); at
// max_connections it pauses accepting, or (evict_idle_at_cap) closes the connection idle
// the longest for the new one.
//
// Thread: everything on the owning EventLoop's thread, Start included (Post it there);
// every public method but port() and counters() asserts it (EventLoop::AssertInLoopThread).
// port() and counters() may be read from any thread once Start has returned, and the last
// reference may be dropped on any thread once the listener has closed.
// Lifetime: the Listener keeps itself alive while it has open handles, so the owner
// may drop its shared_ptr at any time; a loop Stop() hard-closes whatever is left.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/event_loop.h"
#include "http/connection_context.h"
#include "http/counters.h"
#include "http/handler.h"
#include "http/message.h"
#include "http/options.h"
#include "http/responder.h"

namespace rankd::http {

class Connection;

// Checks that no socket is bound to host:port (another rankd, or anything else),
// binding a probe socket without SO_REUSEPORT. Call before starting the shards: a
// process that also uses SO_REUSEPORT would otherwise silently share our port.
// Port 0 is always free. Any thread.
Status CheckPortFree(std::string_view host, int port);

class Listener : public std::enable_shared_from_this<Listener>, private ConnectionEvents {
 public:
  // Binds, listens and starts accepting. `render_error` answers the errors this layer
  // gives itself and Responder::SendError. REQUIRES: on loop's thread; render_error set.
  static Result<std::shared_ptr<Listener>> Start(EventLoop& loop, HttpOptions options,
                                                 Handler handler, ErrorRenderer render_error);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The bound port (useful with options.port == 0).
  int port() const { return port_; }
  // Its counters: any thread may read them (they live as long as the listener).
  const HttpCounters& counters() const { return ctx_.counters; }

  // Graceful shutdown: closes the listening socket, closes idle connections at once,
  // lets requests already read finish and answers them with "Connection: close".
  // `on_drained` runs (on the loop thread) once the last connection is gone; it may
  // run before Drain returns when nothing was open. A second call only replaces the
  // callback.
  void Drain(std::function<void()> on_drained);

  // Hard close (the drain timeout): closes the listener and every connection now.
  // Pending responders become no-ops. The drain callback still runs when all is closed.
  void CloseNow();

 private:
  Listener(EventLoop& loop, HttpOptions options, Handler handler, ErrorRenderer render_error);
  int Bind();
  void CloseListenSocket();
  void AcceptOne();
  // At the cap, with options.evict_idle_at_cap: closes the connection idle the longest.
  void EvictLongestIdle();
  void MaybeFinished();
  void UnparkAll();
  // Over the input budget: lets the oldest request under way read on, if it waits.
  void ResumeOldestUnfinished();
  // Past the shard's output budget: closes the connections whose clients have not
  // read for the longest (in the next loop turn, outside any connection's callback).
  void CloseSlowestReaders();
  static void OnConnection(uv_stream_t* server, int status);
  static void OnListenClosed(uv_handle_t* h);

  // ConnectionEvents: what the connections ask of us.
  void ParkUntilNextTurn(std::shared_ptr<Connection> c) override;
  void WaitForInputRoom(std::shared_ptr<Connection> c) override;
  void InputReleased() override;
  void UnsentOverBudget() override;
  void ConnectionClosed(Connection* c) override;

  // What every connection shares (the loop, options, counters, budgets).
  ConnectionContext ctx_;

  uv_tcp_t listen_{};
  int port_ = 0;
  bool listen_open_ = false;  // uv handle initialised and not yet closed
  bool listen_closing_ = false;
  bool accept_paused_ = false;  // libuv holds one accepted fd we have not taken
  std::function<void()> on_drained_;

  // Connections are owned here (Responders only hold weak references); each knows its
  // index for O(1) removal.
  std::vector<std::shared_ptr<Connection>> conns_;

  // Connections whose input waits for the next loop turn (the turn was over budget),
  // in the order they parked; one NextTurn callback serves them all.
  std::vector<std::shared_ptr<Connection>> parked_;
  std::vector<std::shared_ptr<Connection>> unparking_;

  std::vector<std::shared_ptr<Connection>> input_waiters_;  // stopped for the input budget
  bool input_resume_scheduled_ = false;
  bool unsent_check_scheduled_ = false;

  // Keeps this object alive while libuv handles point at it.
  std::shared_ptr<Listener> self_;
};

}  // namespace rankd::http
