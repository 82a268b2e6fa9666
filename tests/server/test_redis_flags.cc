// The Redis flags every command shares (cli/redis_flags.h), resolved into endpoints:
// password files, the TLS flags as defaults of every TLS endpoint, the errors naming
// the endpoint and the file but never a password.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/redis_flags.h"

using namespace rankd;

namespace {

// A temporary folder for the test's files, removed at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rankd-redis-flags-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

 private:
  std::string dir_;
};

// A self-signed certificate (public, no key): a CA file OpenSSL loads.
constexpr const char* kCaPem = R"(-----BEGIN CERTIFICATE-----
MIIBhzCCAS2gAwIBAgIUQ6TpWca9U1TwtDElNIhytcGMzKcwCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNcmFua2QtdGVzdC1jYTAgFw0yNjExMjgyMDQyNTRaGA8yMTI2
MTEwNDIwNDI1NFowGDEWMBQGA1UEAwwNcmFua2QtdGVzdC1jYTBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABA5fLxM4PlnpMrb9P3yC4kH/ep/J6JMVqlaLLstQ0cRi
yIElnmHtA82GuHrvKv5/jXavkfLdcZU0fkjjsQAuEdejUzBRMB0GA1UdDgQWBBTI
OVhc90yezJVMGA2XH7QxUoGk3zAfBgNVHSMEGDAWgBTIOVhc90yezJVMGA2XH7Qx
UoGk3zAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCICeEBhmplcr+
Z8MHw0hjPlY/OwnFdRLpZE/ySpwBoMBtAiEA4oML65PWnEizPznJYIXYneMwvN9r
EBuUWzUpp91Xlec=
-----END CERTIFICATE-----
)";

const RedisEndpoint* Find(const std::vector<RedisEndpoint>& eps, const std::string& name) {
  for (const auto& ep : eps)
    if (ep.name == name) return &ep;
  return nullptr;
}

}  // namespace

TEST_CASE("a password file's content less one trailing newline is the password") {
  TempDir tmp;
  struct Case {
    const char* content;
    const char* password;
  } cases[] = {{"s3cret", "s3cret"},           {"s3cret\n", "s3cret"},
               {"s3cret\r\n", "s3cret"},       {"s3cret\n\n", "s3cret\n"},
               {"s3 cr\tet \n", "s3 cr\tet "}, {"s3cret\r", "s3cret\r"}};
  for (const auto& c : cases) {
    CAPTURE(c.content);
    RedisFlags f;
    f.endpoints = {"main=redis://alice:@h:1"};
    f.password_files = {"main=" + tmp.Write("pw", c.content)};
    auto eps = ResolveRedisFlags(f);
    REQUIRE(eps.has_value());
    const RedisEndpoint* ep = Find(*eps, "main");
    REQUIRE(ep != nullptr);
    CHECK(ep->user == "alice");
    CHECK(ep->password == c.password);
  }
  // ?password_file= in the URL, the default endpoint by flag.
  RedisFlags f;
  f.endpoints = {"a=redis-cluster://h:1,h:2?password_file=" + tmp.Write("a", "pa\n")};
  f.password_files = {"redis_default=" + tmp.Write("d", "pd")};
  auto eps = ResolveRedisFlags(f);
  REQUIRE(eps.has_value());
  CHECK(Find(*eps, "a")->password == "pa");
  CHECK(Find(*eps, "a")->AtNode({"h", 3}).password == "pa");
  CHECK(Find(*eps, "redis_default")->password == "pd");
}

TEST_CASE("password file errors name the endpoint and the file, never the password") {
  TempDir tmp;
  const std::string big(kMaxRedisPasswordFileBytes + 1, 'Z');
  struct Case {
    std::vector<std::string> endpoints;
    std::vector<std::string> files;
    std::string says;
  } cases[] = {
      {{"m=redis://h:1"}, {"m=" + tmp.Write("empty", "")}, "redis endpoint 'm': password file '"},
      {{"m=redis://h:1"}, {"m=" + tmp.Write("nl", "\n")}, "/nl': empty (no password in it)"},
      {{"m=redis://h:1"}, {"m=" + tmp.Write("big", big)}, "/big': larger than 65536 bytes"},
      {{"m=redis://h:1"}, {"m=/nonexistent/pw"}, "'/nonexistent/pw': cannot read it: No such file"},
      {{"m=redis://h:1"}, {"m=/"}, "password file '/': cannot read it"},
      {{"m=redis://h:1"}, {"n=" + tmp.Write("p", "Zsecret")}, "no --redis endpoint is named 'n'"},
      {{"m=redis://:Zsecret@h:1"},
       {"m=" + tmp.Write("p", "Zsecret")},
       "the endpoint's URL has a password already"},
      {{"m=redis://h:1?password_file=/a"},
       {"m=" + tmp.Write("p", "Zsecret")},
       "has a password file already ('/a')"},
      {{"m=redis://h:1"},
       {"m=" + tmp.Write("p", "Zsecret"), "m=" + tmp.Write("q", "Zsecret")},
       "has a password file already"},
      {{"m=redis://h:1"}, {"m"}, "--redis-password-file 'm': expected NAME=PATH"},
      {{"m=redis://alice:@h:1"}, {}, "user 'alice' without a password"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.says);
    RedisFlags f;
    f.endpoints = c.endpoints;
    f.password_files = c.files;
    auto eps = ResolveRedisFlags(f);
    REQUIRE_FALSE(eps.has_value());
    CHECK(eps.error().code == ErrorCode::kBadRequest);
    CHECK(eps.error().message.find(c.says) != std::string::npos);
    CHECK(eps.error().message.find("Zsecret") == std::string::npos);
    CHECK(eps.error().message.find("ZZZ") == std::string::npos);
  }
}

TEST_CASE("the --redis-tls-* flags are the defaults of every TLS endpoint; a URL overrides") {
  TempDir tmp;
  const std::string ca = tmp.Write("ca.pem", kCaPem);
  RedisFlags f;
  f.endpoints = {"a=rediss://cache.example:6380", "b=rediss://h:1?tls_ca=" + ca, "c=redis://h:2",
                 "d=rediss-cluster://cfg.example:7000?tls_verify=off"};
  f.tls_ca = ca;
  auto eps = ResolveRedisFlags(f);
  REQUIRE(eps.has_value());
  for (const char* name : {"a", "b", "d"}) {
    CAPTURE(name);
    const RedisEndpoint* ep = Find(*eps, name);
    CHECK(ep->tls.enabled);
    CHECK(ep->tls.ca_file == ca);
    CHECK(ep->tls.context != nullptr);  // loaded at start-up
  }
  CHECK(Find(*eps, "a")->tls.server_name == "cache.example");
  CHECK(Find(*eps, "d")->tls.server_name == "cfg.example");
  CHECK_FALSE(Find(*eps, "d")->tls.verify);
  CHECK_FALSE(Find(*eps, "c")->tls.enabled);
  CHECK(Find(*eps, "c")->tls.context == nullptr);

  // The URL's file wins over the flag's, one parameter at a time: which file failed says.
  f.endpoints = {"a=rediss://h:1?tls_ca=" + ca};
  f.tls_ca = "/nonexistent/flag-ca.pem";
  REQUIRE(ResolveRedisFlags(f).has_value());
  f.endpoints = {"a=rediss://h:1"};
  auto flag_ca = ResolveRedisFlags(f);
  REQUIRE_FALSE(flag_ca.has_value());
  CHECK(flag_ca.error().message.find("redis endpoint 'a': TLS: cannot load the CA file "
                                     "'/nonexistent/flag-ca.pem'") != std::string::npos);
  f.tls_ca = ca;
  f.tls_cert = "/nonexistent/flag-cert.pem";
  f.tls_key = "/nonexistent/flag-key.pem";
  auto flag_cert = ResolveRedisFlags(f);
  REQUIRE_FALSE(flag_cert.has_value());
  CHECK(flag_cert.error().message.find("'/nonexistent/flag-cert.pem'") != std::string::npos);
  f.endpoints = {"a=rediss://h:1?tls_cert=/nonexistent/url-cert.pem"};
  auto url_cert = ResolveRedisFlags(f);
  REQUIRE_FALSE(url_cert.has_value());
  CHECK(url_cert.error().message.find("'/nonexistent/url-cert.pem'") != std::string::npos);
  f.endpoints = {"a=rediss://h:1"};
  f.tls_key.clear();
  auto half = ResolveRedisFlags(f);
  REQUIRE_FALSE(half.has_value());
  CHECK(half.error().message.find("tls_cert and tls_key go together") != std::string::npos);

  // TLS files but no TLS endpoint: a forgotten "rediss" would send the password in clear.
  for (auto set : {&RedisFlags::tls_ca, &RedisFlags::tls_cert, &RedisFlags::tls_key}) {
    RedisFlags plain;
    plain.endpoints = {"a=redis://h:1"};
    plain.*set = ca;
    auto e = ResolveRedisFlags(plain);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().message.find(": no --redis endpoint uses TLS") != std::string::npos);
  }
}

TEST_CASE("every command's rows: --redis and its companions, each parsed into RedisFlags") {
  RedisFlags f;
  std::vector<Flag> rows = RedisFlagRows(f);
  REQUIRE(
      ParseFlags({"--redis", "a=rediss://h:1", "--redis=b=redis://h:2", "--redis-password-file",
                  "a=/p", "--redis-tls-ca", "/ca", "--redis-tls-cert=/c", "--redis-tls-key", "/k"},
                 rows)
          .has_value());
  CHECK(f.endpoints == std::vector<std::string>{"a=rediss://h:1", "b=redis://h:2"});
  CHECK(f.password_files == std::vector<std::string>{"a=/p"});
  CHECK(f.tls_ca == "/ca");
  CHECK(f.tls_cert == "/c");
  CHECK(f.tls_key == "/k");
  // A mistyped flag is echoed by its name only; a stray URL with its password masked.
  auto typo = ParseFlags({"--rediss=a=redis://:Zsecret@h:1"}, rows);
  REQUIRE_FALSE(typo.has_value());
  CHECK(typo.error().message == "--rediss");
  auto stray = ParseFlags({"a=redis://u:Zsecret@h:1"}, rows);
  REQUIRE_FALSE(stray.has_value());
  CHECK(stray.error().message == "a=redis://u:***@h:1");
}
