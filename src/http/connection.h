// Connection: one accepted HTTP/1.1 connection of a Listener. Internal to src/http.
// Feeds the socket's bytes to its RequestStream (the parser), hands one request at a
// time to the handler, writes responses in request order, enforces the limits and
// timeouts of HttpOptions (and, through its ConnectionContext, the shard's input and
// output budgets), and closes gracefully (our FIN, then read-and-discard for a bounded
// time so the client sees the last response instead of a reset).
//
// Thread: the listener's loop thread only; every public method but the getters
// asserts it (EventLoop::AssertInLoopThread). Owned by the Listener (shared_ptr, so
// that Responders can hold weak references); freed after its handle's close callback.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/error.h"
#include "http/connection_context.h"
#include "http/counters.h"
#include "http/message.h"
#include "http/request_stream.h"

namespace rankd::http {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(ConnectionContext& ctx);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Accepts the listener's pending socket. On failure the handle is closed and the
  // listener is told through ConnectionClosed like any other close.
  int Accept(uv_stream_t* server);

  // From a Responder: answers request `seq` if it is the one the handler holds.
  void Respond(uint64_t seq, const Response& r);
  // The same with the error's answer (the listener's ErrorRenderer).
  void RespondError(uint64_t seq, const Error& e, std::span<const HeaderField> extra_headers);
  // From a Responder: a header for request `seq`'s answer, whatever it will be.
  void AddAnswerHeader(uint64_t seq, std::string_view name, std::string_view value);

  // From the listener's next-turn batch: parse the input that waited (see Park).
  // `first`: the batch's first connection, which parses one step whatever the budget.
  void Unpark(bool first);

  void OnDrain();   // the listener started draining
  void CloseNow();  // closes the socket now (no more reads, writes are cancelled)
  // From the listener: the shard's input budget has room again; read if we may.
  void ResumeInput();

  size_t Unsent() const { return out_front_.size() + out_back_.size(); }
  // Stopped for the shard's input budget, in the listener's list of reads to resume.
  bool waits_for_input_room() const { return input_waits_for_shard_; }
  // Loop time (ms) since which the client has not taken any of our output; 0: none waits.
  uint64_t stalled_since() const { return stalled_since_; }
  // Loop time (ms) of its accept or last request, while nothing of it is with the
  // handler or unsent (it may be in the middle of a head); 0 otherwise. The listener
  // closes the longest idle at its cap (HttpOptions::evict_idle_at_cap).
  uint64_t idle_since() const {
    return phase_ == Phase::kReceiving && Unsent() == 0 ? last_request_ms_ : 0;
  }
  // Closes the connection for a new one at the listener's cap, and counts it.
  void Evict();

  size_t index = 0;  // position in the listener's list

 private:
  // What the connection is doing. Every change goes through Enter, which asserts that
  // it is one of those Allowed.
  enum class Phase : uint8_t {
    kReceiving,       // parsing requests: between two, or inside one (stream_ knows)
    kHandlerPending,  // the handler holds a request; its Responder answers it
    kClosing,         // last response queued: flush it, then send FIN (reads are discarded)
    kShuttingDown,    // uv_shutdown called: our FIN leaves after the queued output
    kLinger,          // FIN sent: discard reads until the client's EOF or linger_ms
    kClosed,          // uv_close called
  };
  enum class TimerMode : uint8_t { kNone, kIdle, kRead, kCloseWait, kLinger };

  // The request the handler holds: what its response needs. Replaced as a whole by
  // each dispatch, so that nothing of one request leaks into the next.
  struct PendingRequest {
    uint64_t seq = 0;  // its Responder's; an answer for another seq is ignored
    bool keep_alive = true;
    bool head = false;       // HEAD: no body bytes
    std::string id;          // the response's X-Request-Id
    std::string extra_head;  // header lines AddAnswerHeader gave ("Name: value\r\n" each)
  };

  static bool Allowed(Phase from, Phase to);
  void Enter(Phase next);
  bool Open() const { return phase_ == Phase::kReceiving || phase_ == Phase::kHandlerPending; }
  bool CanParse() const;
  // The loop turn has used its budget: input read now is parsed in the next turn, so
  // that a burst of ready connections cannot hold the loop's timers back.
  bool TurnOverBudget() const { return ctx_.loop.TurnOverBudget(); }
  void Park();
  void OnReadEnd(ssize_t status);  // EOF or a read error
  void Receive(const char* data, size_t n);
  size_t Process(const char* data, size_t n);  // returns the bytes consumed
  void Dispatch();
  void Reject(RejectKind kind, const Error& e);  // error response + graceful close
  // After any event: parse what waits, flush, closing, reads, timer. `must_progress`:
  // parse one step even when the loop turn is over budget (see Unpark).
  void Settle(bool must_progress = false);
  void ParseWaiting(bool& must_progress);  // Settle's first half: buffered input, end of stream
  bool Flush();                            // true when output went out at once (parsing may go on)
  void Shutdown();                         // our FIN (kClosing, all output sent)
  void OnClientReading();                  // output left: the client reads, its timers restart
  void UpdateReading();
  bool OpenWantsInput();  // UpdateReading for an open connection (records why not)
  // Reading on would only add to what this connection buffers (unparsed input, a request
  // head or body under way): it waits while the shard is over its input budget.
  bool ReadingOnlyBuffers() const;
  void UpdateTimer();
  TimerMode WantedTimer() const;
  void Expire(TimerMode mode);
  // Move this connection's shares of the shard's budgets to what it holds now: its
  // unparsed input and the head and body of the request it is reading (until the
  // handler takes it), and its unsent output.
  void AccountInput();
  void AccountOutput();
  // Joins or leaves the context's list of requests under way (oldest_unfinished ...).
  void TrackUnfinished(bool holds_part);

  static void OnAlloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  static void OnWrite(uv_write_t* req, int status);
  static void OnShutdown(uv_shutdown_t* req, int status);
  static void OnTimer(uv_timer_t* t);
  static void OnClose(uv_handle_t* h);

  ConnectionContext& ctx_;
  uv_tcp_t tcp_{};
  uv_write_t write_req_{};
  uv_shutdown_t shutdown_req_{};
  uv_timer_t* timer_ = nullptr;  // pooled by the EventLoop
  TimerMode timer_mode_ = TimerMode::kNone;
  uint64_t timer_due_ = 0;        // loop time (ms) the current mode expires; 0: none
  uint64_t timer_armed_due_ = 0;  // when the uv timer fires; 0: not armed
  Phase phase_ = Phase::kReceiving;
  std::shared_ptr<Connection> self_;  // held from uv_tcp_init until the close callback

  // --- input -------------------------------------------------------------------------
  RequestStream stream_;
  bool in_process_ = false;          // inside Process: responses are flushed at its end
  bool restart_read_timer_ = false;  // a new request began: its read time starts now
  // The first request's head must be complete by header_due_ (loop ms), counted from
  // the accept: until head_seen_, the idle and read timers fire no later than that.
  bool head_seen_ = false;
  uint64_t header_due_ = 0;
  uint64_t last_request_ms_ = 0;  // loop time of the accept, then of each dispatch

  // Unparsed input (pipelined requests waiting behind an unanswered one).
  std::string in_buf_;
  size_t in_off_ = 0;
  bool reading_ = false;  // uv_read_start is in effect
  bool peer_eof_ = false;
  bool parked_ = false;                 // in the listener's list for the next turn
  bool input_waits_for_shard_ = false;  // in the listener's list of reads to resume
  size_t input_accounted_ = 0;          // our share of the shard's buffered input
  size_t allocated_accounted_ = 0;      // our share of the input buffers' heap bytes
  // Our place in the context's list of requests under way (see TrackUnfinished).
  bool in_unfinished_list_ = false;
  Connection* older_unfinished_ = nullptr;
  Connection* newer_unfinished_ = nullptr;

  PendingRequest pending_;

  // --- output: responses append to out_back_; out_front_ is in flight (a uv_write
  // is pending exactly while it is not empty) -------------------------------------------
  std::string out_front_;
  std::string out_back_;
  size_t queued_responses_ = 0;  // answered, not yet all sent (max_pipeline_depth)
  size_t output_accounted_ = 0;  // our share of the shard's unsent output
  uint64_t stalled_since_ = 0;
};

}  // namespace rankd::http
