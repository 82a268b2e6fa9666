#include "http/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "http/connection.h"

namespace rankd::http {

namespace {

// An IPv4 or IPv6 address literal ("0.0.0.0", "127.0.0.1", "::", "::1") with the port.
bool ParseListenAddress(const std::string& host, int port, sockaddr_storage* out) {
  *out = {};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(out)) == 0) return true;
  return uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(out)) == 0;
}

socklen_t AddressLength(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace

Status CheckPortFree(std::string_view host, int port) {
  if (port == 0) return {};
  std::string h(host);
  sockaddr_storage addr;
  if (!ParseListenAddress(h, port, &addr))
    return Fail(Error::BadRequest("invalid listen address '" + h +
                                  "': expected an IPv4 or IPv6 address such as 0.0.0.0 or ::"));
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Fail(Error::Internal(std::string("port check: socket(): ") + std::strerror(errno)));
  // SO_REUSEADDR so that TIME_WAIT leftovers of our own previous run do not count;
  // without SO_REUSEPORT, so that any live socket bound to the port makes bind fail.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), AddressLength(addr));
  int err = errno;
  ::close(fd);
  if (rc != 0) {
    return Fail(
        Error::Internal("port " + std::to_string(port) + " on " + h +
                        " is already in use by another socket (bind: " + std::strerror(err) + ")"));
  }
  return {};
}

Listener::Listener(EventLoop& loop, HttpOptions options, Handler handler,
                   ErrorRenderer render_error)
    : ctx_(loop, std::move(options), std::move(handler), render_error, *this) {}

Listener::~Listener() { assert(!listen_open_ && conns_.empty()); }

Result<std::shared_ptr<Listener>> Listener::Start(EventLoop& loop, HttpOptions options,
                                                  Handler handler, ErrorRenderer render_error) {
  loop.AssertInLoopThread();
  std::shared_ptr<Listener> l(
      new Listener(loop, std::move(options), std::move(handler), render_error));
  l->self_ = l;
  if (int rc = l->Bind(); rc < 0) {
    const HttpOptions& opt = l->ctx_.options;
    std::string msg = "http: cannot listen on " + opt.host + ":" + std::to_string(opt.port) + ": " +
                      uv_strerror(rc);
    l->CloseListenSocket();
    l->MaybeFinished();  // when the handle never opened, nothing else releases self_
    return Fail(Error::Internal(std::move(msg)));
  }
  std::weak_ptr<Listener> weak = l;
  loop.AddShutdownHook([weak] {
    if (auto s = weak.lock()) s->CloseNow();
  });
  return l;
}

int Listener::Bind() {
  const HttpOptions& opt = ctx_.options;
  sockaddr_storage addr;
  if (!ParseListenAddress(opt.host, opt.port, &addr)) return UV_EINVAL;
  // libuv 1.44 has no UV_TCP_REUSEPORT: create the socket first (init_ex), set the
  // option on its fd, then bind. Every shard binds the same port this way. An IPv6
  // socket on "::" also takes IPv4 clients unless the host sets net.ipv6.bindv6only.
  int rc = uv_tcp_init_ex(ctx_.loop.uv(), &listen_, addr.ss_family);
  if (rc < 0) return rc;
  listen_open_ = true;
  listen_.data = this;
  uv_os_fd_t fd;
  rc = uv_fileno(reinterpret_cast<uv_handle_t*>(&listen_), &fd);
  if (rc < 0) return rc;
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) return -errno;
  rc = uv_tcp_bind(&listen_, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc < 0) return rc;
  // uv_tcp_bind may defer EADDRINUSE to uv_listen.
  rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listen_), opt.backlog, &Listener::OnConnection);
  if (rc < 0) return rc;
  sockaddr_storage ss{};
  int len = sizeof(ss);
  rc = uv_tcp_getsockname(&listen_, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc < 0) return rc;
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return 0;
}

void Listener::OnConnection(uv_stream_t* server, int status) {
  auto* l = static_cast<Listener*>(server->data);
  if (status < 0 || l->listen_closing_) return;
  if (l->conns_.size() >= l->ctx_.options.max_connections) {
    // Not calling uv_accept makes libuv keep this one socket and stop polling the
    // listener; the next close takes it (ConnectionClosed), which resumes polling.
    if (!l->accept_paused_) {
      l->accept_paused_ = true;
      ++l->ctx_.counters.accept_paused;
      if (l->ctx_.options.evict_idle_at_cap) l->EvictLongestIdle();
    }
    return;
  }
  l->AcceptOne();
}

void Listener::EvictLongestIdle() {
  // O(connections), once per connection accepted at the cap: meant for a listener with
  // a small cap (the metrics address's 256).
  Connection* idlest = nullptr;
  for (const auto& c : conns_) {
    uint64_t since = c->idle_since();
    if (since != 0 && (!idlest || since < idlest->idle_since())) idlest = c.get();
  }
  // Its close callback takes the socket waiting (ConnectionClosed). With nobody idle
  // (every connection has a request under way), accepting waits as without eviction.
  if (idlest) idlest->Evict();
}

void Listener::AcceptOne() {
  auto c = std::make_shared<Connection>(ctx_);
  c->index = conns_.size();
  conns_.push_back(c);
  ++ctx_.counters.connections_accepted;
  ctx_.counters.connections_open = conns_.size();
  c->Accept(reinterpret_cast<uv_stream_t*>(&listen_));  // a failure closes it again
}

void Listener::ConnectionClosed(Connection* c) {
  size_t i = c->index;
  assert(i < conns_.size() && conns_[i].get() == c);
  if (i + 1 != conns_.size()) {
    conns_[i] = std::move(conns_.back());
    conns_[i]->index = i;
  }
  conns_.pop_back();
  ctx_.counters.connections_open = conns_.size();
  if (accept_paused_ && listen_open_ && !listen_closing_) {
    accept_paused_ = false;
    AcceptOne();
  }
  MaybeFinished();
}

void Listener::ParkUntilNextTurn(std::shared_ptr<Connection> c) {
  if (parked_.empty()) {
    ctx_.loop.NextTurn([weak = weak_from_this()] {
      if (auto l = weak.lock()) l->UnparkAll();
    });
  }
  parked_.push_back(std::move(c));
}

void Listener::UnparkAll() {
  // Whoever the budget stops again parks anew, behind the ones that parked meanwhile.
  unparking_.swap(parked_);
  bool first = true;
  for (auto& c : unparking_) {
    c->Unpark(first);
    first = false;
  }
  unparking_.clear();
}

void Listener::WaitForInputRoom(std::shared_ptr<Connection> c) {
  input_waiters_.push_back(std::move(c));
}

void Listener::InputReleased() {
  if (input_waiters_.empty() || input_resume_scheduled_) return;
  // Over the budget, only the oldest request under way may go on (ResumeOldestUnfinished).
  if (ctx_.InputOverBudget() &&
      !(ctx_.oldest_unfinished != nullptr && ctx_.oldest_unfinished->waits_for_input_room()))
    return;
  // Next turn, not now: we are inside some connection's callback.
  input_resume_scheduled_ = true;
  ctx_.loop.NextTurn([weak = weak_from_this()] {
    auto l = weak.lock();
    if (!l) return;
    l->input_resume_scheduled_ = false;
    if (l->ctx_.InputOverBudget()) {
      l->ResumeOldestUnfinished();
      return;
    }
    auto waiters = std::move(l->input_waiters_);
    l->input_waiters_.clear();
    // Whoever finds the budget spent again waits again, behind the others.
    for (auto& c : waiters) c->ResumeInput();
  });
}

void Listener::ResumeOldestUnfinished() {
  Connection* oldest = ctx_.oldest_unfinished;
  if (oldest == nullptr || !oldest->waits_for_input_room()) return;
  // O(waiters), once per body that completes while the shard is over its budget.
  auto it = std::find_if(input_waiters_.begin(), input_waiters_.end(),
                         [oldest](const auto& c) { return c.get() == oldest; });
  if (it == input_waiters_.end()) return;
  std::shared_ptr<Connection> c = std::move(*it);
  input_waiters_.erase(it);
  c->ResumeInput();
}

void Listener::UnsentOverBudget() {
  if (unsent_check_scheduled_) return;
  unsent_check_scheduled_ = true;
  ctx_.loop.NextTurn([weak = weak_from_this()] {
    if (auto l = weak.lock()) {
      l->unsent_check_scheduled_ = false;
      l->CloseSlowestReaders();
    }
  });
}

void Listener::CloseSlowestReaders() {
  // O(connections) per close, and only past the budget: a slow reader holds its
  // output for its whole stall, so closes are rare next to responses.
  while (ctx_.counters.unsent > ctx_.options.max_unsent_bytes) {
    Connection* slowest = nullptr;
    for (const auto& c : conns_) {
      if (c->Unsent() == 0 || c->stalled_since() == 0) continue;
      if (!slowest || c->stalled_since() < slowest->stalled_since() ||
          (c->stalled_since() == slowest->stalled_since() && c->Unsent() > slowest->Unsent()))
        slowest = c.get();
    }
    if (!slowest) return;  // output still going out at once: nobody is stalled yet
    ++ctx_.counters.limit(LimitKind::kShardUnsent);
    slowest->CloseNow();  // stops counting its buffers
  }
}

void Listener::CloseListenSocket() {
  if (!listen_open_ || listen_closing_) return;
  listen_closing_ = true;
  // Closing the listener also closes a socket libuv held for us at the cap.
  uv_close(reinterpret_cast<uv_handle_t*>(&listen_), &Listener::OnListenClosed);
}

void Listener::OnListenClosed(uv_handle_t* h) {
  auto* l = static_cast<Listener*>(h->data);
  l->listen_open_ = false;
  l->MaybeFinished();
}

void Listener::MaybeFinished() {
  if (listen_open_ || !conns_.empty() || !self_) return;
  std::shared_ptr<Listener> keep = std::move(self_);  // may be the last reference
  auto cb = std::move(on_drained_);
  on_drained_ = nullptr;
  if (cb) cb();
}

void Listener::Drain(std::function<void()> on_drained) {
  ctx_.loop.AssertInLoopThread();
  on_drained_ = std::move(on_drained);
  ctx_.draining = true;
  if (!self_) {  // everything is already closed
    auto cb = std::move(on_drained_);
    on_drained_ = nullptr;
    if (cb) cb();
    return;
  }
  CloseListenSocket();
  // A copy: a connection closing now leaves the list only in its close callback, but
  // iterate a snapshot anyway so that no callback can invalidate the loop.
  auto snapshot = conns_;
  for (auto& c : snapshot) c->OnDrain();
}

void Listener::CloseNow() {
  ctx_.loop.AssertInLoopThread();
  ctx_.draining = true;
  CloseListenSocket();
  auto snapshot = conns_;
  for (auto& c : snapshot) c->CloseNow();
}

}  // namespace rankd::http
