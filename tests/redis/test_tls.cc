// The Redis transport over TLS against a real redis-server that also listens with
// --tls-port: batches larger than the socket buffer (the ciphertext waits for writable
// events, in order) and replies spanning many TLS records, then a certificate the client
// does not trust; a server that asks to renegotiate. Certificates come from the openssl
// CLI, into a temporary folder.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "redis_server.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;

namespace {

// A CA and a server certificate for localhost that it signed, and a second CA; in a
// folder removed with the object.
struct Certs {
  std::string dir;
  Certs() {
    char tmpl[] = "/tmp/rankd-tls-unit-XXXXXX";
    dir = mkdtemp(tmpl);
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string cmd =
        "cd " + dir + " && openssl req -x509" + key +
        " -keyout ca.key -out ca.crt -days 2 -subj /CN=ca && openssl req -x509" + key +
        " -keyout other.key -out other.crt -days 2 -subj /CN=other && openssl req -new" + key +
        " -keyout server.key -out server.csr -subj /CN=localhost && printf "
        "'subjectAltName=DNS:localhost\\n' > ext && openssl x509 -req -in server.csr -CA ca.crt "
        "-CAkey ca.key -CAcreateserial -days 2 -out server.crt -extfile ext";
    REQUIRE(std::system((cmd + " >/dev/null 2>&1").c_str()) == 0);
  }
  ~Certs() { std::filesystem::remove_all(dir); }
  std::string operator()(const char* name) const { return dir + "/" + name; }
};

// redis-server's arguments to also listen for TLS on `tls_port` with the test certificate.
std::vector<std::string> TlsArgs(const Certs& certs, int tls_port) {
  return {"--tls-port",         std::to_string(tls_port),
          "--tls-cert-file",    certs("server.crt"),
          "--tls-key-file",     certs("server.key"),
          "--tls-ca-cert-file", certs("ca.crt"),
          "--tls-auth-clients", "no"};
}

bool TlsSays(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// A TLS 1.2 server in front of a plain redis-server, one connection at a time, relaying
// bytes both ways; after Renegotiate() it sends a HelloRequest (asks the client to
// renegotiate) on the connection it relays. Its own thread; blocking sockets polled
// every 10 ms so that the destructor can stop it.
class RenegotiatingRelay {
 public:
  RenegotiatingRelay(const Certs& certs, int redis_port) : redis_port_(redis_port) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    REQUIRE(ctx_ != nullptr);
    SSL_CTX_set_max_proto_version(ctx_, TLS1_2_VERSION);
    REQUIRE(SSL_CTX_use_certificate_chain_file(ctx_, certs("server.crt").c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, certs("server.key").c_str(), SSL_FILETYPE_PEM) == 1);
    listen_ = Listen(&port_);
    thread_ = std::thread([this] { Run(); });
  }
  ~RenegotiatingRelay() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
    SSL_CTX_free(ctx_);
  }
  int port() const { return port_; }
  void Renegotiate() { renegotiate_ = true; }
  int accepted() const { return accepted_; }

 private:
  static int Listen(int* port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 8) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    *port = ntohs(a.sin_port);
    return fd;
  }
  bool Readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 10) == 1;
  }
  void Run() {
    while (!stop_) {
      if (!Readable(listen_)) continue;
      int client = ::accept(listen_, nullptr, nullptr);
      if (client < 0) continue;
      ++accepted_;
      Relay(client);
      ::close(client);
    }
  }
  void Relay(int client) {
    int redis = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(redis_port_));
    SSL* ssl = SSL_new(ctx_);
    SSL_set_fd(ssl, client);
    if (::connect(redis, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && SSL_accept(ssl) == 1) {
      char buf[16384];
      while (!stop_) {
        if (renegotiate_.exchange(false)) {
          SSL_renegotiate(ssl);
          SSL_do_handshake(ssl);  // sends the HelloRequest
        }
        pollfd p[2] = {{client, POLLIN, 0}, {redis, POLLIN, 0}};
        if (SSL_pending(ssl) == 0 && ::poll(p, 2, 10) <= 0) continue;
        if (SSL_pending(ssl) > 0 || (p[0].revents & (POLLIN | POLLHUP))) {
          int n = SSL_read(ssl, buf, sizeof buf);
          if (n <= 0) break;  // the client left (or refused to renegotiate)
          if (::write(redis, buf, static_cast<size_t>(n)) != n) break;
        }
        if (p[1].revents & (POLLIN | POLLHUP)) {
          ssize_t n = ::read(redis, buf, sizeof buf);
          if (n <= 0 || SSL_write(ssl, buf, static_cast<int>(n)) <= 0) break;
        }
      }
    }
    SSL_free(ssl);
    ::close(redis);
  }

  SSL_CTX* ctx_ = nullptr;
  const int redis_port_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> renegotiate_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE("TLS: big batches and big replies cross the transport whole and in order") {
  Certs certs;
  const int tls_port = FreeLoopbackPort();
  RedisServer server(TlsArgs(certs, tls_port));
  REQUIRE(server.Start());
  TestShard shard({"redis_default=rediss://localhost:" + std::to_string(tls_port) +
                   "?tls_ca=" + certs("ca.crt")});
  REQUIRE(shard.WaitReady());
  const RedisStats& st = shard.pool().stats();
  const uint64_t writes0 = Read(st.socket_writes);
  // 16 MiB of SETs: more than the socket takes at once, so ciphertext waits for the
  // writable events; each value differs so that a reordering would show.
  std::vector<RedisCommand> cmds;
  for (int i = 0; i < 256; ++i) {
    RedisCommand c{"SET"};
    c.Key("", "big:", i).Arg(std::string(64 << 10, static_cast<char>('a' + i % 26)));
    cmds.push_back(std::move(c));
  }
  auto r = shard.Batch(std::move(cmds));
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 256);
  CHECK((*r)[255].str() == "OK");
  CHECK(Read(st.socket_writes) - writes0 >= 2);
  // Replies of 64 KiB each, 256 of them in one batch: many TLS records per reply.
  std::vector<RedisCommand> gets;
  for (int i = 0; i < 256; ++i) {
    RedisCommand c{"GET"};
    c.Key("", "big:", i);
    gets.push_back(std::move(c));
  }
  auto g = shard.Batch(std::move(gets));
  REQUIRE(g.has_value());
  REQUIRE(g->size() == 256);
  for (int i = 0; i < 256; ++i) {
    REQUIRE((*g)[i].str().size() == (64u << 10));
    CHECK((*g)[i].str().front() == static_cast<char>('a' + i % 26));
  }
}

TEST_CASE("TLS: an untrusted certificate fails the connect with OpenSSL's reason") {
  Certs certs;
  const int tls_port = FreeLoopbackPort();
  RedisServer server(TlsArgs(certs, tls_port));
  REQUIRE(server.Start());
  TestShard shard({"redis_default=rediss://localhost:" + std::to_string(tls_port) +
                   "?tls_ca=" + certs("other.crt")},
                  {.connections_per_endpoint = 1, .backoff_min_ms = 50, .backoff_max_ms = 100});
  REQUIRE(Eventually([&] {
    return shard.OnLoop(
        [&] { return TlsSays(shard.pools().NotReadyReason(), "certificate verify failed"); });
  }));
  auto r = shard.Batch({RedisCommand{"PING"}});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
  CHECK(TlsSays(r.error().detail, "TLS handshake failed"));
  CHECK(Read(shard.pool().stats().connect_failures) >= 1);
}

TEST_CASE("TLS: a server that asks to renegotiate loses the connection") {
  Certs certs;
  RedisServer server;
  REQUIRE(server.Start());
  RenegotiatingRelay relay(certs, server.port());
  // A second's backoff: the reason stays readable while the connection is down.
  TestShard shard({"redis_default=rediss://localhost:" + std::to_string(relay.port()) +
                   "?tls_ca=" + certs("ca.crt")},
                  {.connections_per_endpoint = 1, .backoff_min_ms = 1000, .backoff_max_ms = 1000});
  REQUIRE(shard.WaitReady());
  auto r = shard.Batch({RedisCommand{"PING"}});
  REQUIRE(r.has_value());
  CHECK((*r)[0].str() == "PONG");
  const RedisStats& st = shard.pool().stats();
  REQUIRE(Read(st.disconnects) == 0);
  relay.Renegotiate();
  // OpenSSL alone would answer with a warning alert and go on; rankd ends the connection.
  REQUIRE(Eventually([&] { return Read(st.disconnects) >= 1; }));
  CHECK(Eventually([&] {
    return shard.OnLoop([&] { return TlsSays(shard.pools().NotReadyReason(), "renegotiate"); });
  }));
  // It reconnects (a new handshake, not a renegotiation) and serves on.
  REQUIRE(shard.WaitReady());
  CHECK(relay.accepted() >= 2);
  CHECK(shard.Batch({RedisCommand{"PING"}}).has_value());
}
