// RedisConnection: one connection to one endpoint, owned by a RedisPool, with its own
// reconnect state machine:
//
//   Backoff --timer--> Connecting --AUTH/SELECT/READONLY/PING ok--> Live
//                     (resolve the host name, if it is one; then TCP connect, then the
//                      TLS handshake for a rediss:// endpoint)
//      ^                   |  (refused, timeout, TLS, AUTH error)  |  (reset, EOF, bad reply)
//      +-------------------+---------------------------------------+
//   Close() from any state -> Closed (pending commands fail; no reconnect).
//
// Every attempt opens a new RedisTransport (transport.h: the socket, plain or TLS, on
// the loop). Every byte read goes through one RespScanner (resp_scanner.h) per attempt:
// the handshake's and push mode's replies through a RespReader (resp_reader.h), read in
// place as RespView; a data connection's, as checked bytes, to the batches awaiting them.
//
// A data connection (raw_replies) writes its own output buffer (Write: commands appended
// during a loop turn, sent in one send(2) just before the loop polls — EventLoop::BeforePoll —
// and only when the socket is full, the rest on writable events) and hands each reply's RESP
// bytes, as RespScanner checked them, to the ReplyWaiter that Await() queued for it, in
// order. Replies awaited are counted here (inflight()), so a reply no command waits for fails
// the connection in O(1). The tracker's connection (not raw_replies) enters push mode
// instead: every reply goes to its PushSink.
//
// Threads: the loop thread of `loop` only (Start, Close, Write and Await check it in
// debug and sanitizer builds).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/event_loop.h"
#include "redis/endpoint.h"
#include "redis/options.h"
#include "redis/resp_reader.h"
#include "redis/resp_scanner.h"
#include "redis/stats.h"
#include "redis/transport.h"

namespace rankd {

class ReplyWaiter;

// What receives the replies of a connection in push mode (EnterPushMode).
class PushSink {
 public:
  // One complete reply, valid during the call. Must not close the connection (schedule
  // that instead).
  virtual void OnPush(RespView reply) = 0;

 protected:
  ~PushSink() = default;
};

class RedisConnection final : private TransportListener {
 public:
  enum class State : uint8_t { kBackoff, kConnecting, kLive, kClosed };

  // `on_change` runs (synchronously, possibly inside the read handler) whenever the
  // state changes; it must only schedule work, not call back into this connection.
  // `raw_replies`: a data connection (Write / Await once live); else the tracker's, which
  // enters push mode.
  RedisConnection(EventLoop& loop, const RedisEndpoint& endpoint, const RedisClientOptions& opts,
                  RedisStats& stats, std::function<void()> on_change, uint64_t seed,
                  bool raw_replies = false);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  void Start();  // first connect attempt
  void Close();

  State state() const { return state_; }
  bool live() const { return state_ == State::kLive; }
  // Replies awaited (raw mode).
  int inflight() const { return inflight_; }
  // Raw mode: bytes written (Write) are not all sent yet; a batch written now leaves
  // with them.
  bool writing() const { return flush_queued_ || watching_write_; }
  // Why the last attempt or connection failed ("connect failed: Connection refused").
  const std::string& last_error() const { return last_error_; }

  // Raw mode. Appends RESP-encoded commands to the output buffer, written when the socket
  // is next writable (after this loop turn: what one turn queues leaves in one write).
  // REQUIRES: live(), raw_replies.
  void Write(std::string_view wire);
  // The next `n` replies (after those already awaited) go to `waiter`, which must stay
  // alive until it has had them all or OnConnectionLost. REQUIRES: live(), raw_replies.
  void Await(ReplyWaiter* waiter, uint32_t n);

  // Push mode: every reply from now on goes to `sink`; send with SendNoReply
  // only. Ends with the connection: after a reconnect the owner enters
  // it again. REQUIRES: live(), nothing in flight.
  void EnterPushMode(PushSink* sink);
  // Queues one RESP-encoded command whose reply goes to the push sink. REQUIRES: in push
  // mode. Returns false when the connection is down.
  bool SendNoReply(std::string_view wire);
  // Drops the current connection (it reconnects after the backoff), saying `why` in the
  // log and last_error(). REQUIRES: not inside a push.
  void Drop(std::string why);

  // Why the commands in flight failed, split by audience: the code their batch fails
  // with (backend_error when the connection went down over a bad reply: over a limit,
  // protocol error; else unavailable), what a client may be told (no address, no raw
  // Redis text), and the detail for the log.
  struct Failure {
    ErrorCode code;
    std::string what;
    std::string detail;
  };
  Failure FailureOf() const;

 private:
  void StartAttempt();
  void Connect(const std::string& ip);  // the TCP connect and handshake of an attempt
  static void OnResolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
  void AbandonResolve();  // a lookup in flight is left to free itself
  void ScheduleRetry();
  void SetState(State s);
  void ArmTimer(uint64_t ms, uv_timer_cb cb);
  void DisarmTimer();
  void FailAttempt(std::string why);  // before a transport is open

  // How a connection or attempt ended, for Lose.
  enum class Cause : uint8_t {
    kLink,      // reset, EOF, write error, timeout, TLS failure: `why` says which
    kBadReply,  // a reply broke a limit or the protocol: `why` quotes no stream bytes
    kRefused,   // the server answered the handshake with an error (AUTH failed: ...)
  };
  // Closes the transport, fails every waiter and schedules the reconnect (unless
  // closed). Safe from inside the transport's callbacks.
  void Lose(std::string why, Cause cause);

  void QueueHandshake();
  void OnHandshakeBytes(std::string_view bytes);
  void OnPushBytes(std::string_view bytes);
  // The handshake's PING was answered; `more_bytes`: bytes followed its reply.
  void GoLive(bool more_bytes);

  // TransportListener
  void OnTransportConnected() override;
  void OnTransportRead(std::string_view bytes) override;
  void OnTransportWritable() override;
  void OnTransportFailed(std::string why) override;

  void Queue(std::string_view wire);  // into out_, sent before the loop polls
  // Sends what out_ holds. kFailed: the connection failed (Lose ran).
  enum class SendResult : uint8_t { kDone, kPending, kFailed };
  SendResult SendOut();
  static void FlushBeforePoll(void* self);

  void OnRawRead(std::string_view bytes);
  void Deliver(std::string_view piece, bool last);  // to the first waiter
  void FailWaiters();                               // the connection is going away

  EventLoop& loop_;
  const RedisEndpoint& endpoint_;
  const RedisClientOptions& opts_;
  RedisStats& stats_;
  std::function<void()> on_change_;

  State state_ = State::kBackoff;
  RedisTransport* transport_ = nullptr;  // the current attempt's, until it ends
  // What the bytes read now are: handshake replies, data replies (raw), pushes.
  enum class Mode : uint8_t { kHandshake, kRaw, kPush, kIdle };
  Mode mode_ = Mode::kHandshake;
  int handshake_left_ = 0;  // handshake replies still awaited
  int handshake_step_ = 0;  // the handshake command the next reply answers
  uint8_t handshake_steps_[4] = {};
  std::optional<RespReader> reader_;    // handshake and push mode
  std::optional<RespScanner> scanner_;  // raw mode
  std::vector<size_t> ends_;            // raw mode: where replies end (reused)
  PushSink* push_ = nullptr;
  // A host name is resolved on libuv's worker pool (getaddrinfo blocks; the loop must
  // not). The request outlives us if Close comes first: it then only frees itself.
  struct Resolve {
    uv_getaddrinfo_t req;
    RedisConnection* owner;
  };
  Resolve* resolving_ = nullptr;
  uv_timer_t* timer_ = nullptr;  // connect timeout or backoff delay
  int inflight_ = 0;
  int failures_in_a_row_ = 0;  // drives the backoff
  std::string last_error_;
  std::string bad_reply_;  // set when we dropped the context over a reply
  uint64_t rng_;           // jitter

  // Waiters in reply order: a ring over a vector that only grows, so a steady state of
  // batches allocates nothing.
  struct Awaiting {
    ReplyWaiter* waiter;
    uint32_t remaining;
  };
  std::vector<Awaiting> awaiting_;
  size_t awaiting_head_ = 0;
  size_t awaiting_size_ = 0;
  std::string out_;      // raw mode: bytes to write
  size_t out_sent_ = 0;  // of out_, already written
  bool watching_write_ = false;
  bool flush_queued_ = false;  // a BeforePoll call will send out_
  bool raw_replies_;
};

// What a data connection hands replies to (RedisConnection::Await). Called on the
// connection's loop thread, from its read handler; the
// waiter must not close or free the connection there (schedule that instead).
class ReplyWaiter {
 public:
  // A piece of the next reply this waiter awaits, in stream order; `last` when that
  // reply ends with it. The pieces of one reply concatenate to its RESP bytes, which
  // RespScanner has checked.
  virtual void OnReplyBytes(std::string_view piece, bool last) = 0;
  // The connection went down before the remaining replies came: none will. `f` says
  // why (RedisConnection::FailureOf).
  virtual void OnConnectionLost(const RedisConnection::Failure& f) = 0;

 protected:
  ~ReplyWaiter() = default;
};

}  // namespace rankd
