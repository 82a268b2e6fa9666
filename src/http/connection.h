// Connection: one accepted HTTP/1.1 connection of a Listener. Internal to src/http.
// Feeds the socket's bytes to its RequestStream (the parser), hands one request at a
// time to the handler, writes responses in request order, enforces the limits and
// timeouts of HttpOptions (and, with the listener, the shard's input and output
// budgets), and closes gracefully (our FIN, then read-and-discard for a bounded time so
// the client sees the last response instead of a reset).
//
// Thread: the listener's loop thread only. Owned by the Listener (shared_ptr, so that
// Responders can hold weak references); freed after its handle's close callback.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "http/counters.h"
#include "http/message.h"
#include "http/request_stream.h"

namespace rankd::http {

class Listener;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(Listener* listener);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Accepts the listener's pending socket. On failure the handle is closed and the
  // listener is told through OnConnectionClosed like any other close.
  int Accept(uv_stream_t* server);

  // From a Responder: answers request `seq` if it is the one waiting.
  void Respond(uint64_t seq, const Response& r);

  // From the listener's NextTurn batch: parse the input that waited (see Park).
  // `first`: the batch's first connection, which parses one step whatever the budget.
  void Unpark(bool first);

  void OnDrain();   // the listener started draining
  void CloseNow();  // closes the socket now (no more reads, writes are cancelled)
  // From the listener: the shard's input budget has room again; read if we may.
  void ResumeInput();

  size_t Unsent() const { return out_front_.size() + out_back_.size(); }
  // Loop time (ms) since which the client has not taken any of our output; 0: none waits.
  uint64_t stalled_since() const { return stalled_since_; }

  size_t index = 0;  // position in the listener's list

 private:
  enum class Phase : uint8_t {
    kOpen,     // parsing and answering requests
    kClosing,  // last response queued: flush it, then send FIN (reads are discarded)
    kLinger,   // FIN sent: discard reads until the client's EOF or linger_ms
    kClosed,   // uv_close called
  };
  enum class TimerMode : uint8_t { kNone, kIdle, kRead, kCloseWait, kLinger };

  bool CanParse() const;
  // The loop turn has used its budget: input read now is parsed in the next turn, so
  // that a burst of ready connections cannot hold the loop's timers back.
  bool TurnOverBudget() const;
  void Park();
  size_t Process(const char* data, size_t n);  // returns the bytes consumed
  void Dispatch();
  void Reject(RejectKind kind, const Error& e);       // error response + graceful close
  void BeginClose() { phase_ = Phase::kClosing; }
  void Settle();  // after any event: parse what waits, flush, reads, timer, closing
  void ParseWaiting();  // Settle's first half: buffered input, end of stream
  bool Flush();         // true when output went out at once (parsing may go on)
  void OnClientReading();  // output left: the client reads, its timers restart
  void UpdateReading();
  void UpdateTimer();
  // Tell the listener how much input and output this connection holds now (the shard's
  // budgets are sums over its connections).
  void AccountInput();
  void AccountOutput();

  static void OnAlloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void OnWrite(uv_write_t* req, int status);
  static void OnShutdown(uv_shutdown_t* req, int status);
  static void OnTimer(uv_timer_t* t);
  static void OnClose(uv_handle_t* h);

  Listener* listener_;
  uv_tcp_t tcp_{};
  uv_write_t write_req_{};
  uv_shutdown_t shutdown_req_{};
  uv_timer_t* timer_ = nullptr;  // pooled by the EventLoop
  TimerMode timer_mode_ = TimerMode::kNone;
  uint64_t timer_due_ = 0;        // loop time (ms) the current mode expires; 0: none
  uint64_t timer_armed_due_ = 0;  // when the uv timer fires; 0: not armed
  Phase phase_ = Phase::kOpen;
  std::shared_ptr<Connection> self_;  // held from uv_tcp_init until the close callback

  // --- parsing ---------------------------------------------------------------------
  RequestStream stream_;
  bool in_process_ = false;    // inside Process: responses are flushed at its end
  bool restart_read_timer_ = false;  // a new request began: its read time starts now

  // Unparsed input (pipelined requests waiting behind an unanswered one).
  std::string in_buf_;
  size_t in_off_ = 0;
  bool reading_ = false;
  bool parked_ = false;  // in the listener's list of input to parse next turn
  bool must_progress_ = false;  // inside Unpark(first = true)
  bool peer_eof_ = false;
  bool input_waits_for_shard_ = false;  // in the listener's list of reads to resume
  size_t input_accounted_ = 0;          // in_buf_ bytes the listener counts for us

  // --- the request being handled -----------------------------------------------------
  bool handler_pending_ = false;
  uint64_t seq_ = 0;
  bool pending_keep_alive_ = true;
  bool pending_head_ = false;  // HEAD: no body bytes
  std::string pending_id_;

  // --- output: responses append to out_back_; out_front_ is in flight ----------------
  std::string out_front_;
  std::string out_back_;
  bool writing_ = false;
  bool shutdown_started_ = false;
  size_t queued_responses_ = 0;   // answered, not yet all sent (max_pipeline_depth)
  size_t output_accounted_ = 0;   // Unsent() as the listener counts it
  uint64_t stalled_since_ = 0;
};

}  // namespace rankd::http
