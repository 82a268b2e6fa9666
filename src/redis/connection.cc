#include "redis/connection.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/mix.h"
#include "redis/command.h"

namespace rankd {

namespace {
// The handshake's commands, in the order they are sent; PING's reply makes the
// connection live.
enum HandshakeStep : uint8_t { kAuth = 1, kSelect = 2, kReadonly = 3, kPing = 4 };

const char* StepName(uint8_t step) {
  return step == kAuth       ? "AUTH"
         : step == kSelect   ? "SELECT"
         : step == kReadonly ? "READONLY"
                             : "PING";
}

// The address to connect to: the first IPv4 one, else the first IPv6 one (the order
// Redis clients commonly try families in).
std::string PickAddress(const addrinfo* res) {
  char buf[INET6_ADDRSTRLEN] = {};
  for (int family : {AF_INET, AF_INET6}) {
    for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
      if (a->ai_family != family) continue;
      if (family == AF_INET)
        uv_ip4_name(reinterpret_cast<const sockaddr_in*>(a->ai_addr), buf, sizeof buf);
      else
        uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(a->ai_addr), buf, sizeof buf);
      return buf;
    }
  }
  return {};
}

}  // namespace

RedisConnection::RedisConnection(EventLoop& loop, const RedisEndpoint& endpoint,
                                 const RedisClientOptions& opts, RedisStats& stats,
                                 std::function<void()> on_change, uint64_t seed, bool raw_replies)
    : loop_(loop),
      endpoint_(endpoint),
      opts_(opts),
      stats_(stats),
      on_change_(std::move(on_change)),
      rng_(seed),
      raw_replies_(raw_replies) {
  loop_.AssertInLoopThread();
}

RedisConnection::~RedisConnection() {
  assert(state_ == State::kClosed && transport_ == nullptr);
  if (flush_queued_) loop_.CancelBeforePoll(this);
}

void RedisConnection::Start() {
  loop_.AssertInLoopThread();
  StartAttempt();
}

void RedisConnection::Close() {
  if (state_ == State::kClosed) return;
  loop_.AssertInLoopThread();
  if (state_ == State::kLive) stats_.connections_live.fetch_sub(1, std::memory_order_relaxed);
  state_ = State::kClosed;
  DisarmTimer();
  AbandonResolve();
  if (transport_ != nullptr) Lose("client closed", Cause::kLink);
}

void RedisConnection::SetState(State s) {
  if (s == state_) return;
  if (state_ == State::kLive) stats_.connections_live.fetch_sub(1, std::memory_order_relaxed);
  if (s == State::kLive) stats_.connections_live.fetch_add(1, std::memory_order_relaxed);
  state_ = s;
  on_change_();
}

void RedisConnection::ArmTimer(uint64_t ms, uv_timer_cb cb) {
  DisarmTimer();
  timer_ = loop_.AcquireTimer();
  timer_->data = this;
  uv_timer_start(timer_, cb, ms, 0);
}

void RedisConnection::DisarmTimer() {
  if (timer_ != nullptr) loop_.ReleaseTimer(timer_);
  timer_ = nullptr;
}

// The retry it schedules replaces the connect timeout (ArmTimer disarms first).
void RedisConnection::FailAttempt(std::string why) {
  last_error_ = std::move(why);
  Bump(stats_.connect_failures);
  ScheduleRetry();
}

void RedisConnection::StartAttempt() {
  if (state_ == State::kClosed) return;
  last_error_.clear();  // from here on it describes this attempt
  bad_reply_.clear();
  SetState(State::kConnecting);
  // The connect timeout covers the name lookup too.
  ArmTimer(opts_.connect_timeout_ms, [](uv_timer_t* t) {
    auto* self = static_cast<RedisConnection*>(t->data);
    self->DisarmTimer();
    std::string why =
        "connect timed out after " + std::to_string(self->opts_.connect_timeout_ms) + " ms";
    if (self->resolving_ != nullptr) {  // still looking the name up: give up on it
      self->AbandonResolve();
      return self->FailAttempt(why + " (resolving '" + self->endpoint_.host + "')");
    }
    if (self->transport_ == nullptr) return;
    self->Lose(std::move(why), Cause::kLink);
  });
  if (IsIpAddress(endpoint_.host)) return Connect(endpoint_.host);
  auto* r = new Resolve{{}, this};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = uv_getaddrinfo(loop_.uv(), &r->req, &RedisConnection::OnResolved,
                              endpoint_.host.c_str(), nullptr, &hints);
      rc < 0) {
    delete r;
    return FailAttempt("cannot resolve '" + endpoint_.host + "': " + uv_strerror(rc));
  }
  resolving_ = r;
}

void RedisConnection::AbandonResolve() {
  if (resolving_ == nullptr) return;
  resolving_->owner = nullptr;                               // its callback only frees it
  uv_cancel(reinterpret_cast<uv_req_t*>(&resolving_->req));  // fails once it runs: fine
  resolving_ = nullptr;
}

void RedisConnection::OnResolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* r = reinterpret_cast<Resolve*>(req);  // req is the first member
  RedisConnection* self = r->owner;
  std::string ip = status == 0 ? PickAddress(res) : std::string();
  uv_freeaddrinfo(res);
  delete r;
  if (self == nullptr) return;  // closed, or the attempt timed out meanwhile
  self->resolving_ = nullptr;
  if (ip.empty()) {
    return self->FailAttempt("cannot resolve '" + self->endpoint_.host + "': " +
                             (status < 0 ? uv_strerror(status) : "no IPv4 or IPv6 address"));
  }
  self->Connect(ip);
}

void RedisConnection::Connect(const std::string& ip) {
  // Certificates name the host of the URL, not the address it resolved to.
  RedisTls tls = endpoint_.tls;
  if (tls.server_name.empty()) tls.server_name = endpoint_.host;
  std::string why;
  transport_ = RedisTransport::Open(loop_.uv(), ip, endpoint_.port, tls, this, &why);
  if (transport_ == nullptr) return FailAttempt(std::move(why));
  mode_ = Mode::kHandshake;
}

void RedisConnection::OnTransportConnected() { QueueHandshake(); }

// AUTH, SELECT, READONLY as configured, then PING: they leave in one write.
void RedisConnection::QueueHandshake() {
  int n = 0;
  if (!endpoint_.password.empty()) {
    RedisCommand auth{"AUTH"};
    if (!endpoint_.user.empty()) auth.Arg(endpoint_.user);
    auth.Arg(endpoint_.password);
    Queue(auth.wire());
    handshake_steps_[n++] = kAuth;
  }
  if (endpoint_.db != 0) {
    Queue(RedisCommand{"SELECT"}.Arg(int64_t{endpoint_.db}).wire());
    handshake_steps_[n++] = kSelect;
  }
  if (endpoint_.read_from_replica) {  // a cluster node that may serve reads as a replica
    Queue(RedisCommand{"READONLY"}.wire());
    handshake_steps_[n++] = kReadonly;
  }
  // PING last: its reply proves the server speaks Redis to us (protected mode, for one,
  // answers the first command with an error).
  Queue(RedisCommand{"PING"}.wire());
  handshake_steps_[n++] = kPing;
  handshake_left_ = n;
  handshake_step_ = 0;
  reader_.emplace(opts_.reply_limits);
}

void RedisConnection::ScheduleRetry() {
  if (state_ == State::kClosed) return;
  ++failures_in_a_row_;
  int shift = std::min(failures_in_a_row_ - 1, 16);
  uint64_t delay = std::min(opts_.backoff_max_ms, opts_.backoff_min_ms << shift);
  uint64_t half = delay / 2;
  uint64_t jittered = half + (half > 0 ? SplitMix64(rng_) % (delay - half + 1) : delay);
  SetState(State::kBackoff);
  ArmTimer(jittered, [](uv_timer_t* t) {
    auto* self = static_cast<RedisConnection*>(t->data);
    self->DisarmTimer();
    self->StartAttempt();
  });
}

void RedisConnection::Write(std::string_view wire) {
  loop_.AssertInLoopThread();
  assert(live() && raw_replies_);
  Queue(wire);
}

void RedisConnection::Queue(std::string_view wire) {
  out_.append(wire);
  // Sent just before the loop polls, with whatever else this turn writes; when the
  // socket is full, the writable event sends the rest.
  if (!flush_queued_ && !watching_write_) {
    flush_queued_ = true;
    loop_.BeforePoll(&RedisConnection::FlushBeforePoll, this);
  }
}

void RedisConnection::FlushBeforePoll(void* self) {
  auto* c = static_cast<RedisConnection*>(self);
  c->flush_queued_ = false;
  if (c->watching_write_ || c->transport_ == nullptr) return;  // the writable event has it
  if (c->SendOut() == SendResult::kPending) {
    c->watching_write_ = true;
    c->transport_->WatchWritable(true);
  }
}

RedisConnection::SendResult RedisConnection::SendOut() {
  if (out_sent_ == out_.size()) return SendResult::kDone;
  Bump(stats_.socket_writes);
  ptrdiff_t n = transport_->Write(std::string_view(out_).substr(out_sent_));
  if (n < 0) {
    Lose(transport_->error(), Cause::kLink);
    return SendResult::kFailed;
  }
  out_sent_ += static_cast<size_t>(n);
  if (out_sent_ < out_.size()) return SendResult::kPending;
  out_sent_ = 0;
  // Keep the buffer for the next batches, unless one huge batch grew it.
  if (out_.capacity() > (1u << 20))
    out_ = std::string();
  else
    out_.clear();
  return SendResult::kDone;
}

void RedisConnection::Await(ReplyWaiter* waiter, uint32_t n) {
  loop_.AssertInLoopThread();
  assert(live() && raw_replies_);
  if (n == 0) return;
  if (awaiting_size_ == awaiting_.size()) {  // full: grow, oldest first
    std::vector<Awaiting> grown;
    grown.reserve(std::max<size_t>(8, 2 * awaiting_.size()));
    for (size_t k = 0; k < awaiting_size_; ++k)
      grown.push_back(awaiting_[(awaiting_head_ + k) % awaiting_.size()]);
    grown.resize(grown.capacity());
    awaiting_ = std::move(grown);
    awaiting_head_ = 0;
  }
  awaiting_[(awaiting_head_ + awaiting_size_) % awaiting_.size()] = {waiter, n};
  ++awaiting_size_;
  inflight_ += static_cast<int>(n);
  Bump(stats_.commands, n);
}

void RedisConnection::Deliver(std::string_view piece, bool last) {
  Awaiting& a = awaiting_[awaiting_head_];
  ReplyWaiter* w = a.waiter;
  if (last) {
    --inflight_;
    if (--a.remaining == 0) {  // done with it before it hears (it may free itself)
      awaiting_head_ = (awaiting_head_ + 1) % awaiting_.size();
      --awaiting_size_;
    }
  }
  w->OnReplyBytes(piece, last);
}

void RedisConnection::OnTransportRead(std::string_view bytes) {
  switch (mode_) {
    case Mode::kRaw: return OnRawRead(bytes);
    case Mode::kHandshake: return OnHandshakeBytes(bytes);
    case Mode::kPush: return OnPushBytes(bytes);
    case Mode::kIdle:
      return Lose("protocol error: a reply no command was waiting for", Cause::kBadReply);
  }
}

void RedisConnection::OnHandshakeBytes(std::string_view bytes) {
  if (auto fed = reader_->Feed(bytes); !fed) return Lose(fed.error().message, Cause::kBadReply);
  const RespReplies& replies = reader_->replies();
  for (size_t i = 0; i < replies.size(); ++i) {
    if (handshake_left_ == 0)
      return Lose("protocol error: a reply no command was waiting for", Cause::kBadReply);
    const uint8_t step = handshake_steps_[handshake_step_++];
    --handshake_left_;
    const RespView reply = replies[i];
    if (reply.is_error())
      return Lose(std::string(StepName(step)) + " failed: " + std::string(reply.str()),
                  Cause::kRefused);
    // Nothing was sent after PING: a byte after its reply answers no command.
    if (step == kPing) return GoLive(i + 1 < replies.size() || reader_->mid_reply());
  }
  reader_->DropComplete();
}

void RedisConnection::GoLive(bool more_bytes) {
  if (more_bytes)
    return Lose("protocol error: a reply no command was waiting for", Cause::kBadReply);
  if (raw_replies_) {
    mode_ = Mode::kRaw;
    scanner_.emplace(opts_.reply_limits);
    reader_.reset();
  } else {
    mode_ = Mode::kIdle;  // until EnterPushMode
    reader_->DropComplete();
  }
  DisarmTimer();
  failures_in_a_row_ = 0;
  last_error_.clear();
  Bump(stats_.connects);
  SetState(State::kLive);
}

void RedisConnection::OnPushBytes(std::string_view bytes) {
  if (auto fed = reader_->Feed(bytes); !fed) return Lose(fed.error().message, Cause::kBadReply);
  const RespReplies& replies = reader_->replies();
  for (size_t i = 0; i < replies.size(); ++i) {
    push_->OnPush(replies[i]);
    if (transport_ == nullptr || mode_ != Mode::kPush) return;  // lost: reader_ is gone
  }
  reader_->DropComplete();
}

void RedisConnection::OnRawRead(std::string_view bytes) {
  auto ended = scanner_->Scan(bytes, &ends_);
  if (!ended) return Lose(std::move(ended.error().message), Cause::kBadReply);
  const std::vector<size_t>& ends = ends_;
  // Replies these bytes touch: the complete ones, and one begun and not ended.
  const size_t tail = ends.empty() ? 0 : ends.back();
  const size_t touched = ends.size() + (tail < bytes.size() ? 1 : 0);
  if (touched > static_cast<size_t>(inflight_))
    return Lose("protocol error: a reply no command was waiting for", Cause::kBadReply);
  size_t from = 0;
  for (size_t end : ends) {
    Deliver(bytes.substr(from, end - from), true);
    from = end;
  }
  if (from < bytes.size()) Deliver(bytes.substr(from), false);
}

void RedisConnection::OnTransportWritable() {
  if (SendOut() != SendResult::kDone) return;  // the rest at the next writable event
  watching_write_ = false;
  transport_->WatchWritable(false);
}

void RedisConnection::FailWaiters() {
  out_.clear();
  out_sent_ = 0;
  watching_write_ = false;
  inflight_ = 0;
  if (awaiting_size_ == 0) return;
  const Failure f = FailureOf();
  while (awaiting_size_ > 0) {
    ReplyWaiter* w = awaiting_[awaiting_head_].waiter;
    awaiting_head_ = (awaiting_head_ + 1) % awaiting_.size();
    --awaiting_size_;
    w->OnConnectionLost(f);
  }
}

void RedisConnection::EnterPushMode(PushSink* sink) {
  loop_.AssertInLoopThread();
  assert(live() && inflight_ == 0 && mode_ == Mode::kIdle);
  push_ = sink;
  mode_ = Mode::kPush;
}

bool RedisConnection::SendNoReply(std::string_view wire) {
  loop_.AssertInLoopThread();
  if (transport_ == nullptr || mode_ != Mode::kPush) return false;
  Queue(wire);
  Bump(stats_.commands);
  return true;
}

void RedisConnection::Drop(std::string why) {
  loop_.AssertInLoopThread();
  if (transport_ == nullptr || state_ == State::kClosed) return;
  LogWarn("redis endpoint " + endpoint_.Label() + ": dropped a connection: " + why);
  Lose(std::move(why), Cause::kLink);
}

RedisConnection::Failure RedisConnection::FailureOf() const {
  std::string detail = last_error_.empty() ? "connection closed" : last_error_;
  if (!bad_reply_.empty()) return {ErrorCode::kBackendError, bad_reply_, std::move(detail)};
  return {ErrorCode::kUnavailable, state_ == State::kClosed ? "client closed" : "connection lost",
          std::move(detail)};
}

void RedisConnection::OnTransportFailed(std::string why) {
  Lose(state_ == State::kLive ? "connection lost: " + why : std::move(why), Cause::kLink);
}

void RedisConnection::Lose(std::string why, Cause cause) {
  const bool was_live = state_ == State::kLive;
  transport_->Close();
  transport_ = nullptr;
  reader_.reset();
  scanner_.reset();
  push_ = nullptr;
  mode_ = Mode::kHandshake;
  handshake_left_ = 0;
  if (cause == Cause::kBadReply) {
    bad_reply_ = why;  // quotes no stream bytes: fit for clients
    last_error_ = "bad reply: " + why;
    Bump(stats_.bad_replies);
    LogWarn("redis endpoint " + endpoint_.Label() +
            ": dropped a connection over a bad reply: " + why);
  } else {
    last_error_ = std::move(why);
  }
  FailWaiters();  // before the state changes, as the old NULL replies did
  if (state_ == State::kClosed) return;
  if (was_live) {
    Bump(stats_.disconnects);
  } else {
    // A TLS endpoint says why it cannot connect (a certificate, a refused client
    // certificate, a plain server) once per streak of failures, not once per retry.
    if (failures_in_a_row_ == 0 && endpoint_.tls.enabled)
      LogWarn("redis endpoint " + endpoint_.Label() + ": " +
              (last_error_.starts_with("TLS") ? "" : "TLS connection failed: ") + last_error_ +
              " (retrying with backoff)");
    Bump(stats_.connect_failures);
  }
  ScheduleRetry();
}

}  // namespace rankd
