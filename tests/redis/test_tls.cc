// The Redis transport over TLS against a real redis-server that also listens with
// --tls-port: batches larger than the socket buffer (the ciphertext waits for writable
// events, in order) and replies spanning many TLS records, then a certificate the client
// does not trust. Certificates come from the openssl CLI, into a temporary folder.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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
