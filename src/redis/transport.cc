#include "redis/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "redis/tls_context.h"

namespace rankd {

namespace {

// One read(2) per readable event: 16 KiB.
constexpr size_t kReadChunk = 16 * 1024;
// With TLS, 64 KiB of ciphertext per read(2): a full TLS record is 16 KiB plus its
// header, so 16 KiB reads would split nearly every record over two reads and two loop
// turns.
constexpr size_t kTlsReadChunk = 64 * 1024;
// Plaintext encrypted per Write: bounds the ciphertext made ahead of a full socket.
constexpr size_t kMaxEncryptAhead = 256 * 1024;

bool WouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

}  // namespace

RedisTransport* RedisTransport::Open(uv_loop_t* loop, const std::string& ip, int port,
                                     const RedisTls& tls, TransportListener* listener,
                                     std::string* why) {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  if (uv_ip4_addr(ip.c_str(), port, reinterpret_cast<sockaddr_in*>(&addr)) == 0) {
    addr_len = sizeof(sockaddr_in);
  } else if (uv_ip6_addr(ip.c_str(), port, reinterpret_cast<sockaddr_in6*>(&addr)) == 0) {
    addr_len = sizeof(sockaddr_in6);
  } else {
    *why = "connect failed: '" + ip + "' is not an IP address";
    return nullptr;
  }
  if (tls.enabled && tls.context == nullptr) {
    *why = "TLS: the endpoint's TLS context was never loaded";
    return nullptr;
  }
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("connect failed: socket: ") + std::strerror(errno);
    return nullptr;
  }
  int one = 1;
  // Batches are whole when written: Nagle would only delay the last segment of each.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A server that vanished without a FIN is found eventually even on an idle connection.
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) < 0 && errno != EINPROGRESS) {
    *why = std::string("connect failed: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  auto* t = new RedisTransport(loop, listener);
  t->fd_ = fd;
  if (tls.enabled && !t->SetupTls(tls)) {
    *why = t->error_;
    delete t;
    return nullptr;
  }
  if (int rc = uv_poll_init_socket(loop, &t->poll_, fd); rc < 0) {
    *why = std::string("connect failed: uv_poll_init: ") + uv_strerror(rc);
    delete t;
    return nullptr;
  }
  t->poll_.data = t;
  t->UpdatePoll();  // writable: the end of the connect
  return t;
}

RedisTransport::~RedisTransport() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees both BIOs
  if (fd_ >= 0) ::close(fd_);
}

bool RedisTransport::SetupTls(const RedisTls& tls) {
  ERR_clear_error();
  ssl_ = SSL_new(tls.context->ctx());
  net_in_ = BIO_new(BIO_s_mem());
  net_out_ = BIO_new(BIO_s_mem());
  if (ssl_ == nullptr || net_in_ == nullptr || net_out_ == nullptr) {
    BIO_free(net_in_);
    BIO_free(net_out_);
    net_in_ = net_out_ = nullptr;
    error_ = "TLS: out of memory";
    return false;
  }
  // An empty input BIO means "no bytes yet", not end of stream.
  BIO_set_mem_eof_return(net_in_, -1);
  SSL_set_bio(ssl_, net_in_, net_out_);
  SSL_set_connect_state(ssl_);
  SSL_set_app_data(ssl_, this);
  SSL_set_info_callback(ssl_, &RedisTransport::OnTlsInfo);
  const std::string& name = tls.server_name;
  const bool ip = IsIpAddress(name);
  // SNI carries host names only (RFC 6066).
  if (!name.empty() && !ip) SSL_set_tlsext_host_name(ssl_, name.c_str());
  if (tls.verify && !name.empty()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    int ok = 1;
    if (ip) {
      ok = X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      ok = X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    }
    if (ok != 1) {
      error_ = "TLS: cannot check the certificate against '" + name + "'";
      return false;
    }
  }
  return true;
}

void RedisTransport::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  // uv_close stops the poll and forgets the fd at once; only then may the fd close.
  uv_close(reinterpret_cast<uv_handle_t*>(&poll_),
           [](uv_handle_t* h) { delete static_cast<RedisTransport*>(h->data); });
  ::close(fd_);
  fd_ = -1;
}

void RedisTransport::Fail(std::string why) {
  phase_ = Phase::kFailed;
  error_ = why;
  UpdatePoll();
  listener_->OnTransportFailed(std::move(why));
}

void RedisTransport::UpdatePoll() {
  int ev = 0;
  const bool cipher_waiting = cipher_sent_ < cipher_out_.size();
  switch (phase_) {
    case Phase::kConnecting: ev = UV_WRITABLE; break;
    case Phase::kHandshaking: ev = UV_READABLE | (cipher_waiting ? UV_WRITABLE : 0); break;
    case Phase::kConnected:
      ev = UV_READABLE | (want_writable_ || cipher_waiting ? UV_WRITABLE : 0);
      break;
    case Phase::kFailed:
    case Phase::kClosed: break;
  }
  if (ev == events_) return;
  events_ = ev;
  if (ev == 0)
    uv_poll_stop(&poll_);
  else
    uv_poll_start(&poll_, ev, &RedisTransport::OnPoll);
}

void RedisTransport::OnPoll(uv_poll_t* handle, int status, int events) {
  static_cast<RedisTransport*>(handle->data)->HandleEvents(status, events);
}

void RedisTransport::HandleEvents(int status, int events) {
  if (phase_ == Phase::kClosed || phase_ == Phase::kFailed) return;
  if (status < 0) {
    // libuv saw POLLERR and stopped the handle. The socket says what went wrong
    // (SO_ERROR while connecting, read(2) after): let the handlers find it, and fail
    // with libuv's word if they do not.
    events_ = 0;
    const Phase before = phase_;
    if (before == Phase::kConnecting) {
      FinishConnect();
    } else if (before == Phase::kConnected) {
      if (ssl_ != nullptr)
        ReadTls();
      else
        ReadPlain();
    }
    if (phase_ == before)
      Fail(std::string(before == Phase::kConnected ? "" : "connect failed: ") +
           "poll error: " + uv_strerror(status));
    return;
  }
  switch (phase_) {
    case Phase::kConnecting:
      if (events & UV_WRITABLE) FinishConnect();
      break;
    case Phase::kHandshaking:
      if (events & UV_READABLE) {
        char buf[kReadChunk];
        ssize_t n = read(fd_, buf, sizeof buf);
        if (n == 0) return Fail("TLS handshake failed: the server closed the connection");
        if (n < 0 && !WouldBlock(errno))
          return Fail(std::string("TLS handshake failed: read: ") + std::strerror(errno));
        if (n > 0) BIO_write(net_in_, buf, static_cast<int>(n));
      }
      StepHandshake();
      break;
    case Phase::kConnected:
      if (events & UV_READABLE) {
        if (ssl_ != nullptr)
          ReadTls();
        else
          ReadPlain();
        if (phase_ != Phase::kConnected) return;
      }
      if (events & UV_WRITABLE) {
        if (!FlushCipher()) return Fail(error_);
        if (cipher_sent_ < cipher_out_.size()) break;  // still full
        if (want_writable_) {
          listener_->OnTransportWritable();
          if (phase_ != Phase::kConnected) return;
        }
      }
      UpdatePoll();
      break;
    case Phase::kFailed:
    case Phase::kClosed: break;
  }
}

void RedisTransport::FinishConnect() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err == EINPROGRESS || err == EALREADY) return;
  if (err != 0) return Fail(std::string("connect failed: ") + std::strerror(err));
  if (ssl_ != nullptr) {
    phase_ = Phase::kHandshaking;
    return StepHandshake();
  }
  phase_ = Phase::kConnected;
  UpdatePoll();
  listener_->OnTransportConnected();
}

namespace {

// Why OpenSSL failed: the certificate check's verdict when that is what failed, else
// OpenSSL's error queue (emptied), else the SSL_get_error code.
std::string TlsReason(SSL* ssl, int ssl_error) {
  long v = SSL_get_verify_result(ssl);
  std::string queue = TakeOpenSslErrors("");
  if (v != X509_V_OK)
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(v);
  if (!queue.empty()) return queue;
  if (ssl_error == SSL_ERROR_SYSCALL) return "unexpected end of the TLS stream";
  return "SSL error " + std::to_string(ssl_error);
}

}  // namespace

void RedisTransport::StepHandshake() {
  ERR_clear_error();
  int rc = SSL_do_handshake(ssl_);
  int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, rc);
  std::string reason = e == SSL_ERROR_NONE || e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE
                           ? std::string()
                           : TlsReason(ssl_, e);
  // Send what the handshake made even when it failed: the alert tells the server why.
  if (!FlushCipher() && reason.empty()) return Fail("TLS handshake failed: " + error_);
  if (!reason.empty()) return Fail("TLS handshake failed: " + reason);
  if (rc != 1) return UpdatePoll();
  phase_ = Phase::kConnected;
  UpdatePoll();
  listener_->OnTransportConnected();
}

void RedisTransport::ReadPlain() {
  char buf[kReadChunk];
  ssize_t n = read(fd_, buf, sizeof buf);
  if (n < 0 && WouldBlock(errno)) return;
  if (n <= 0) return Fail(n == 0 ? "server closed the connection" : std::strerror(errno));
  listener_->OnTransportRead({buf, static_cast<size_t>(n)});
}

void RedisTransport::OnTlsInfo(const SSL* ssl, int where, int ret) {
  // Called on handshake steps and alerts only, not per record: off the read path's cost.
  if ((where & SSL_CB_WRITE_ALERT) == SSL_CB_WRITE_ALERT && (ret & 0xff) == SSL_AD_NO_RENEGOTIATION)
    static_cast<RedisTransport*>(SSL_get_app_data(ssl))->renegotiation_asked_ = true;
}

void RedisTransport::ReadTls() {
  char buf[kTlsReadChunk];
  ssize_t n = read(fd_, buf, sizeof buf);
  if (n < 0 && WouldBlock(errno)) return;
  if (n <= 0) return Fail(n == 0 ? "server closed the connection" : std::strerror(errno));
  BIO_write(net_in_, buf, static_cast<int>(n));  // copies: buf is free again
  ERR_clear_error();
  for (;;) {
    int m = SSL_read(ssl_, buf, static_cast<int>(sizeof buf));
    if (m > 0) {
      listener_->OnTransportRead({buf, static_cast<size_t>(m)});
      if (phase_ != Phase::kConnected) return;
      // Every call costs: no second one only to hear that nothing is left.
      if (BIO_ctrl_pending(net_in_) == 0 && !SSL_has_pending(ssl_)) break;
      continue;
    }
    int e = SSL_get_error(ssl_, m);
    if (e == SSL_ERROR_WANT_READ) break;  // the rest of a record is still on its way
    if (e == SSL_ERROR_ZERO_RETURN) return Fail("server closed the connection (TLS close_notify)");
    return Fail("TLS read failed: " + TlsReason(ssl_, e));
  }
  if (renegotiation_asked_)
    return Fail("TLS: the server asked to renegotiate (refused: rankd never renegotiates)");
  // Reading may have made output of its own (a key update's answer).
  if (BIO_ctrl_pending(net_out_) > 0) {
    if (!FlushCipher()) return Fail(error_);
    UpdatePoll();
  }
}

bool RedisTransport::FlushCipher() {
  if (net_out_ == nullptr) return true;
  // Older ciphertext first.
  if (cipher_sent_ < cipher_out_.size()) {
    ssize_t n = send(fd_, cipher_out_.data() + cipher_sent_, cipher_out_.size() - cipher_sent_,
                     MSG_NOSIGNAL);
    if (n < 0 && !WouldBlock(errno)) {
      error_ = std::string("write: ") + std::strerror(errno);
      return false;
    }
    cipher_sent_ += static_cast<size_t>(std::max<ssize_t>(n, 0));
    if (cipher_sent_ < cipher_out_.size()) return KeepCipher(nullptr, 0);
    cipher_sent_ = 0;
    // Keep the buffer for the next time the socket fills, unless a huge batch grew it.
    if (cipher_out_.capacity() > (1u << 20))
      cipher_out_ = std::string();
    else
      cipher_out_.clear();
  }
  // Then what OpenSSL made, a chunk at a time, straight to the socket.
  char chunk[kTlsReadChunk];
  while (BIO_ctrl_pending(net_out_) > 0) {
    int got = BIO_read(net_out_, chunk, static_cast<int>(sizeof chunk));
    if (got <= 0) break;
    ssize_t n = send(fd_, chunk, static_cast<size_t>(got), MSG_NOSIGNAL);
    if (n < 0 && !WouldBlock(errno)) {
      error_ = std::string("write: ") + std::strerror(errno);
      return false;
    }
    size_t sent = static_cast<size_t>(std::max<ssize_t>(n, 0));
    if (sent < static_cast<size_t>(got)) return KeepCipher(chunk + sent, got - sent);
  }
  return true;
}

// The socket is full: `rest` and everything still in the output BIO wait in
// cipher_out_, in order, for the writable event.
bool RedisTransport::KeepCipher(const char* rest, size_t size) {
  cipher_out_.append(rest, size);
  char chunk[kTlsReadChunk];
  while (BIO_ctrl_pending(net_out_) > 0) {
    int got = BIO_read(net_out_, chunk, static_cast<int>(sizeof chunk));
    if (got <= 0) break;
    cipher_out_.append(chunk, static_cast<size_t>(got));
  }
  return true;
}

ptrdiff_t RedisTransport::Write(std::string_view bytes) {
  if (phase_ != Phase::kConnected) {
    if (error_.empty()) error_ = "not connected";
    return -1;
  }
  if (bytes.empty()) return 0;
  if (ssl_ == nullptr) {
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (WouldBlock(errno)) return 0;
    error_ = std::string("write: ") + std::strerror(errno);
    return -1;
  }
  // TLS: what the socket has not taken yet leaves first.
  if (cipher_sent_ < cipher_out_.size()) {
    if (!FlushCipher()) return -1;
    if (cipher_sent_ < cipher_out_.size()) {
      UpdatePoll();
      return 0;
    }
  }
  // SSL_write returns after each record (partial writes are on): loop until the bytes
  // taken are all encrypted, then send them in one go.
  const size_t take = std::min(bytes.size(), kMaxEncryptAhead);
  size_t done = 0;
  while (done < take) {
    ERR_clear_error();
    int n = SSL_write(ssl_, bytes.data() + done, static_cast<int>(take - done));
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
    error_ = "TLS write failed: " + TlsReason(ssl_, e);
    return -1;
  }
  if (!FlushCipher()) return -1;
  UpdatePoll();
  return static_cast<ptrdiff_t>(done);
}

void RedisTransport::WatchWritable(bool on) {
  want_writable_ = on;
  if (phase_ == Phase::kConnected) UpdatePoll();
}

}  // namespace rankd
