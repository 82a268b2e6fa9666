#include "redis/connection.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/mix.h"
#include "redis/reader.h"

namespace rankd {

namespace {
// Tags passed as privdata to the handshake callbacks; the last one makes the connection
// live.
enum HandshakeStep : uintptr_t { kAuth = 1, kSelect = 2, kReadonly = 3, kPing = 4 };

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The address to connect to: the first IPv4 one, else the first IPv6 one (the order
// hiredis itself tries families in).
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
  assert(state_ == State::kClosed && ac_ == nullptr);
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
  if (ac_ != nullptr) {
    last_error_ = "client closed";
    // Runs every pending callback with a NULL reply, then OnContextCleanup.
    redisAsyncFree(ac_);
  }
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
    if (self->ac_ == nullptr) return;
    self->last_error_ = std::move(why);
    // Not inside a hiredis callback: freeing is safe; cleanup schedules the retry.
    redisAsyncFree(self->ac_);
  });
  if (IsIpLiteral(endpoint_.host)) return Connect(endpoint_.host);
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
  // An address literal: hiredis's own lookup of it does not block.
  redisAsyncContext* ac = redisAsyncConnect(ip.c_str(), endpoint_.port);
  if (ac == nullptr) return FailAttempt("connect failed: out of memory");
  if (ac->err) {
    std::string why = std::string("connect failed: ") + ac->errstr;
    redisAsyncFree(ac);  // never attached: hiredis left it to us
    return FailAttempt(std::move(why));
  }
  ac->data = this;
  ac->c.reader->fn = RedisReplyBuilders();  // replies are parsed into RedisReply directly
  if (int rc = AttachUvAdapter(ac, loop_.uv(), this, opts_.reply_limits); rc < 0) {
    redisAsyncFree(ac);
    return FailAttempt(std::string("connect failed: uv_poll_init: ") + uv_strerror(rc));
  }
  redisAsyncSetConnectCallback(ac, &RedisConnection::OnConnect);
  ac_ = ac;
  // The handshake is queued now and leaves in the first write after the TCP connect.
  if (!endpoint_.password.empty()) {
    if (endpoint_.user.empty()) {
      const char* argv[] = {"AUTH", endpoint_.password.c_str()};
      size_t lens[] = {4, endpoint_.password.size()};
      redisAsyncCommandArgv(ac, &OnHandshakeReply, reinterpret_cast<void*>(kAuth), 2, argv, lens);
    } else {
      const char* argv[] = {"AUTH", endpoint_.user.c_str(), endpoint_.password.c_str()};
      size_t lens[] = {4, endpoint_.user.size(), endpoint_.password.size()};
      redisAsyncCommandArgv(ac, &OnHandshakeReply, reinterpret_cast<void*>(kAuth), 3, argv, lens);
    }
  }
  if (endpoint_.db != 0) {
    std::string db = std::to_string(endpoint_.db);
    const char* argv[] = {"SELECT", db.c_str()};
    size_t lens[] = {6, db.size()};
    redisAsyncCommandArgv(ac, &OnHandshakeReply, reinterpret_cast<void*>(kSelect), 2, argv, lens);
  }
  if (endpoint_.read_from_replica) {  // a cluster node that may serve reads as a replica
    const char* argv[] = {"READONLY"};
    size_t lens[] = {8};
    redisAsyncCommandArgv(ac, &OnHandshakeReply, reinterpret_cast<void*>(kReadonly), 1, argv, lens);
  }
  // PING last: its reply proves the server speaks Redis to us (protected mode, for one,
  // answers the first command with an error).
  redisAsyncCommand(ac, &OnHandshakeReply, reinterpret_cast<void*>(kPing), "PING");
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
  if (c->watching_write_ || c->ac_ == nullptr) return;  // the writable event has it
  if (c->SendOut() == SendResult::kPending) {
    c->watching_write_ = true;
    WatchWritable(c->ac_, true);
  }
}

RedisConnection::SendResult RedisConnection::SendOut() {
  if (out_sent_ == out_.size()) return SendResult::kDone;
  Bump(stats_.socket_writes);
  ssize_t n = send(ac_->c.fd, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return SendResult::kPending;
    OnReadFailed(std::string("write: ") + std::strerror(errno), false);
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

void RedisConnection::OnRawRead(std::string_view bytes, const std::vector<size_t>& ends) {
  // Replies these bytes touch: the complete ones, and one begun and not ended.
  const size_t tail = ends.empty() ? 0 : ends.back();
  const size_t touched = ends.size() + (tail < bytes.size() ? 1 : 0);
  if (touched > static_cast<size_t>(inflight_))
    return OnReadFailed("protocol error: a reply no command was waiting for", true);
  size_t from = 0;
  for (size_t end : ends) {
    Deliver(bytes.substr(from, end - from), true);
    from = end;
  }
  if (from < bytes.size()) Deliver(bytes.substr(from), false);
}

void RedisConnection::OnRawWritable() {
  if (SendOut() != SendResult::kDone) return;  // the rest at the next writable event
  watching_write_ = false;
  WatchWritable(ac_, false);
}

void RedisConnection::FailWaiters(const redisAsyncContext* ac) {
  out_.clear();
  out_sent_ = 0;
  watching_write_ = false;
  inflight_ = 0;
  if (awaiting_size_ == 0) return;
  const Failure f = FailureOf(ac);
  while (awaiting_size_ > 0) {
    ReplyWaiter* w = awaiting_[awaiting_head_].waiter;
    awaiting_head_ = (awaiting_head_ + 1) % awaiting_.size();
    --awaiting_size_;
    w->OnConnectionLost(f);
  }
}

void RedisConnection::EnterPushMode(PushSink* sink) {
  loop_.AssertInLoopThread();
  assert(live() && inflight_ == 0);
  SetPushSink(ac_, sink);
}

bool RedisConnection::SendNoReply(std::string_view wire) {
  loop_.AssertInLoopThread();
  assert(live());
  if (redisAsyncFormattedCommand(ac_, nullptr, nullptr, wire.data(), wire.size()) != REDIS_OK)
    return false;
  Bump(stats_.commands);
  return true;
}

void RedisConnection::Drop(std::string why) {
  loop_.AssertInLoopThread();
  if (ac_ == nullptr || state_ == State::kClosed) return;
  last_error_ = std::move(why);
  LogWarn("redis endpoint " + endpoint_.Label() + ": dropped a connection: " + last_error_);
  redisAsyncFree(ac_);  // cleanup schedules the reconnect
}

std::string RedisConnection::FailureReason(const redisAsyncContext* ac) const {
  if (ac != nullptr && ac->err != 0 && ac->errstr[0] != '\0')
    return std::string("connection lost: ") + ac->errstr;
  if (!last_error_.empty()) return last_error_;
  return "connection closed";
}

namespace {
// hiredis's own reader errors: the bytes, not the link, were bad.
bool IsReplyError(int err) { return err == REDIS_ERR_PROTOCOL || err == REDIS_ERR_OOM; }
}  // namespace

RedisConnection::Failure RedisConnection::FailureOf(const redisAsyncContext* ac) const {
  std::string detail = FailureReason(ac);
  if (ac != nullptr && ac->err != 0 && IsReplyError(ac->err))
    return {ErrorCode::kBackendError,
            ac->err == REDIS_ERR_OOM ? "out of memory reading a reply" : "protocol error",
            std::move(detail)};
  if (!bad_reply_.empty()) return {ErrorCode::kBackendError, bad_reply_, std::move(detail)};
  return {ErrorCode::kUnavailable, state_ == State::kClosed ? "client closed" : "connection lost",
          std::move(detail)};
}

void RedisConnection::OnConnect(const redisAsyncContext* ac, int status) {
  if (status == REDIS_OK) return;  // the handshake replies decide
  // hiredis frees the context right after this returns; OnContextCleanup retries.
  From(ac)->last_error_ = std::string("connect failed: ") + ac->errstr;
}

void RedisConnection::OnHandshakeReply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = From(ac);
  if (reply == nullptr) return;  // the context is going down; cleanup handles it
  const RedisReply& r = TakeReply(reply);
  auto step = reinterpret_cast<uintptr_t>(privdata);
  if (r.is_error()) {
    if (self->last_error_.empty()) {  // the first failure of the handshake says why
      const char* what = step == kAuth       ? "AUTH"
                         : step == kSelect   ? "SELECT"
                         : step == kReadonly ? "READONLY"
                                             : "PING";
      self->last_error_ = std::string(what) + " failed: " + r.str;
    }
    // Safe inside a callback: hiredis disconnects once the pending replies are in.
    redisAsyncDisconnect(ac);
    return;
  }
  if (step != kPing || (ac->c.flags & REDIS_DISCONNECTING)) return;
  // hiredis is done with this context's replies: a data connection reads its own.
  if (self->raw_replies_) SetRawMode(ac);
  self->DisarmTimer();
  self->failures_in_a_row_ = 0;
  self->last_error_.clear();
  Bump(self->stats_.connects);
  self->SetState(State::kLive);
}

void RedisConnection::OnSocketWrite() { Bump(stats_.socket_writes); }

void RedisConnection::OnPollError(int uv_status) {
  last_error_ = std::string("connection lost: poll error: ") + uv_strerror(uv_status);
  redisAsyncFree(ac_);
}

void RedisConnection::OnReadFailed(std::string why, bool bad_reply) {
  if (bad_reply) {
    bad_reply_ = why;  // quotes no stream bytes: fit for clients
    last_error_ = "bad reply: " + why;
  } else {
    last_error_ = "connection lost: " + why;
  }
  redisAsyncFree(ac_);
}

void RedisConnection::OnContextCleanup(const redisAsyncContext* ac) {
  ac_ = nullptr;
  FailWaiters(ac);  // as hiredis's NULL replies would have, before the state changes
  if (!bad_reply_.empty() || (ac->err != 0 && IsReplyError(ac->err))) {
    Bump(stats_.bad_replies);
    LogWarn("redis endpoint " + endpoint_.Label() + ": dropped a connection over a bad reply: " +
            (bad_reply_.empty() ? std::string(ac->errstr) : bad_reply_));
  }
  if (state_ == State::kClosed) return;
  if (state_ == State::kLive) {
    Bump(stats_.disconnects);
    last_error_ = FailureReason(ac);
    ScheduleRetry();
    return;
  }
  if (ac->err != 0 && last_error_.empty())
    last_error_ = std::string("connect failed: ") + ac->errstr;
  if (last_error_.empty()) last_error_ = "connect failed";
  Bump(stats_.connect_failures);
  ScheduleRetry();
}

}  // namespace rankd
