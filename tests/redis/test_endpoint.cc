// Endpoint flags (--redis NAME=URL) and RESP encoding: no server needed.
#include <doctest/doctest.h>

#include "redis/command.h"
#include "redis/command_batch.h"
#include "redis/endpoint.h"

using namespace rankd;

TEST_CASE("a full redis URL parses into every part") {
  auto ep = ParseRedisFlag("feed=redis://:s3cret@10.0.0.7:6380/3?prefix=prod:");
  REQUIRE(ep.has_value());
  CHECK(ep->name == "feed");
  CHECK(ep->host == "10.0.0.7");
  CHECK(ep->port == 6380);
  CHECK(ep->password == "s3cret");
  CHECK(ep->user.empty());
  CHECK(ep->db == 3);
  CHECK(ep->prefix == "prod:");
  CHECK(ep->Label() == "feed (10.0.0.7:6380/3)");
}

TEST_CASE("defaults: port 6379, db 0, no prefix; user:password; IPv6") {
  auto a = ParseRedisUrl("a", "redis://localhost");
  REQUIRE(a);
  CHECK(a->port == 6379);
  CHECK(a->db == 0);
  CHECK(a->prefix.empty());
  auto b = ParseRedisUrl("b", "redis://alice:pw@h:1");
  REQUIRE(b);
  CHECK(b->user == "alice");
  CHECK(b->password == "pw");
  auto c = ParseRedisUrl("c", "redis://[::1]:7000/1");
  REQUIRE(c);
  CHECK(c->host == "::1");
  CHECK(c->port == 7000);
  CHECK(c->db == 1);
}

TEST_CASE("bad URLs are invalid_param errors naming the endpoint and the part") {
  struct Case {
    const char* flag;
    const char* says;
  } cases[] = {
      {"x=http://h:1", "must start with redis://"},
      {"x=redis://h:1?prefix=a&prefix=b", "'prefix' given twice"},
      {"x=redis://h:1?prefix=%4", "bad %-escape in the value of 'prefix'"},
      {"x=redis://h:0", "port '0'"},
      {"x=redis://h:99999", "port '99999'"},
      {"x=redis://h:12ab", "port '12ab'"},
      {"x=redis://h:1/-1", "database '-1'"},
      {"x=redis://h:1/zz", "database 'zz'"},
      {"x=redis://:1", "missing host"},
      {"x=redis://h:1?db=2", "unknown query parameter 'db=2'"},
      {"x=redis://h:", "empty port"},
      {"bad name=redis://h:1", "endpoint name"},
      {"redis://h:1", "'redis://h:1' is not NAME=URL"},
  };
  for (auto& c : cases) {
    CAPTURE(c.flag);
    auto ep = ParseRedisFlag(c.flag);
    REQUIRE_FALSE(ep.has_value());
    CHECK(ep.error().code == ErrorCode::kInvalidParam);
    CHECK(ep.error().message.find(c.says) != std::string::npos);
  }
}

TEST_CASE("error messages never show the password") {
  auto ep = ParseRedisFlag("x=redis://:hunter2@h:0");
  REQUIRE_FALSE(ep);
  CHECK(ep.error().message.find("hunter2") == std::string::npos);
  CHECK(ep.error().message.find("***") != std::string::npos);
}

TEST_CASE("MaskRedisUrl hides the password of every URL form, where the parser reads it") {
  struct Case {
    const char* url;
    const char* masked;
    const char* user;      // as parsed
    const char* password;  // as parsed
  } cases[] = {
      {"redis://user:s3cret@h:1", "redis://user:***@h:1", "user", "s3cret"},
      {"redis://:s3cret@h:1", "redis://:***@h:1", "", "s3cret"},
      {"redis://s3cret@h:1", "redis://***@h:1", "", "s3cret"},
      {"redis://al%69ce:s3%40c%3Aret@h:1/2", "redis://al%69ce:***@h:1/2", "alice", "s3@c:ret"},
      {"redis://u:s3@cr:et@h:1", "redis://u:***@h:1", "u", "s3@cr:et"},
      {"redis://u:p@ss@[::1]:7000/3?prefix=p:", "redis://u:***@[::1]:7000/3?prefix=p:", "u",
       "p@ss"},
      {"rediss://u:s3cret@h:1?tls_ca=/ca.pem&tls_verify=off",
       "rediss://u:***@h:1?tls_ca=/ca.pem&tls_verify=off", "u", "s3cret"},
      {"redis-cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?read_from=replica",
       "redis-cluster://:***@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?read_from=replica", "",
       "s3cret"},
      {"rediss-cluster://app:s,3@c:r@h1:1,h2:2", "rediss-cluster://app:***@h1:1,h2:2", "app",
       "s,3@c:r"},
      {"redis://app:@h:1?password_file=/run/pw", "redis://app:@h:1?password_file=/run/pw", "app",
       ""},
      {"redis://h:1?password_file=/run/credentials/rankd.service/pw",
       "redis://h:1?password_file=/run/credentials/rankd.service/pw", "", ""},
      {"redis://h:1?prefix=a%40b", "redis://h:1?prefix=a%40b", "", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    CHECK(MaskRedisUrl(c.url) == c.masked);
    CHECK(MaskRedisUrl(std::string("name=") + c.url) == std::string("name=") + c.masked);
    auto ep = ParseRedisUrl("x", c.url);
    REQUIRE(ep.has_value());
    CHECK(ep->user == c.user);
    CHECK(ep->password == c.password);
  }
  // Not a URL at all: whatever comes before the last '@' is hidden.
  CHECK(MaskRedisUrl("x=:s3cret@h") == "***@h");
  CHECK(MaskRedisUrl("no at sign") == "no at sign");
}

TEST_CASE("no error quotes any part of a password, whatever else is wrong with the URL") {
  const std::string secret = "Zq7S3CR3T";
  const std::string forms[] = {
      "redis://u:" + secret + "@",
      "redis://:" + secret + "@",
      "redis://" + secret + "@",
      "redis://u:" + secret + "@x@",
      "redis-cluster://:" + secret + "@",
      "rediss://u:" + secret + ":" + secret + "@",
      "rediss-cluster://u:" + secret + "@",
  };
  const std::string tails[] = {
      "h:0",
      "h:99999",
      "h:1/zz",
      ":1",
      "h:1?db=2",
      "h:1?tls_ca=",
      "h:1?prefix=a&prefix=b",
      "h:1,h:0",
      "h:1?password_file=/pw",
      "h:1?tls_verify=maybe",
  };
  for (const auto& form : forms)
    for (const auto& tail : tails) {
      const std::string url = form + tail;
      CAPTURE(url);
      auto ep = ParseRedisFlag("x=" + url);
      REQUIRE_FALSE(ep.has_value());
      CHECK(ep.error().message.find("Zq7") == std::string::npos);
      CHECK(ep.error().message.find("3CR3T") == std::string::npos);
    }
  // A '/' or '?' before the last '@', a bad %-escape: refused without a trace of the text.
  for (const std::string& url :
       {"redis://u:" + secret + "/x@h:1", "redis://:" + secret + "?x@h:1",
        "redis://h:1?prefix=" + secret + "@x", "redis://u:" + secret + "%zz@h:1",
        "redis://u%4:" + secret + "@h:1", "redis://" + secret + "%@h:1"}) {
    CAPTURE(url);
    auto ep = ParseRedisUrl("x", url);
    REQUIRE_FALSE(ep.has_value());
    CHECK(ep.error().message.find("Zq7") == std::string::npos);
    CHECK(ep.error().message.find("3CR3T") == std::string::npos);
  }
  CHECK(ParseRedisUrl("x", "redis://u:a/b@h").error().message.find("percent-encode") !=
        std::string::npos);
  CHECK(ParseRedisUrl("x", "redis://u:a%zzb@h").error().message.find("%-escape in the password") !=
        std::string::npos);
}

TEST_CASE("rediss:// and rediss-cluster:// turn TLS on, with the URL's files and host name") {
  auto plain = ParseRedisUrl("a", "redis://h:1");
  REQUIRE(plain);
  CHECK_FALSE(plain->tls.enabled);

  auto tls = ParseRedisUrl(
      "a", "rediss://cache.example:6380?tls_ca=/etc/ca.pem&tls_cert=/c.pem&tls_key=/k%20.pem");
  REQUIRE(tls);
  CHECK(tls->tls.enabled);
  CHECK(tls->tls.verify);
  CHECK(tls->tls.ca_file == "/etc/ca.pem");
  CHECK(tls->tls.cert_file == "/c.pem");
  CHECK(tls->tls.key_file == "/k .pem");
  CHECK(tls->tls.server_name == "cache.example");
  CHECK(tls->port == 6380);

  auto off = ParseRedisUrl("a", "rediss://h?tls_verify=off");
  REQUIRE(off);
  CHECK_FALSE(off->tls.verify);
  CHECK(ParseRedisUrl("a", "rediss://h?tls_verify=on")->tls.verify);

  auto cluster = ParseRedisUrl("c", "rediss-cluster://cfg.example:7000,10.0.0.2:7000");
  REQUIRE(cluster);
  CHECK(cluster->is_cluster());
  CHECK(cluster->tls.enabled);
  CHECK(cluster->tls.server_name == "cfg.example");
  // A node announced as an IP address is checked as the seed's host.
  RedisEndpoint node = cluster->AtNode({"10.0.0.9", 7005});
  CHECK(node.tls.enabled);
  CHECK(node.tls.server_name == "cfg.example");
  CHECK(node.host == "10.0.0.9");

  struct Case {
    const char* url;
    const char* says;
  } bad[] = {
      {"redis://h?tls_ca=/ca.pem", "tls_ca: TLS parameters on a URL without TLS"},
      {"redis-cluster://h?tls_verify=off&tls_key=/k",
       "tls_verify, tls_key: TLS parameters on a URL without TLS"},
      {"rediss://h?tls_verify=no", "tls_verify='no' is neither on nor off"},
      {"rediss://h?tls_ca=", "'tls_ca' has no value"},
      {"rediss://h?tls_ca=/a&tls_ca=/b", "'tls_ca' given twice"},
      {"rediss://h?tls_sni=x", "unknown query parameter 'tls_sni=x'"},
      {"redisss://h", "must start with redis://"},
  };
  for (const auto& c : bad) {
    CAPTURE(c.url);
    auto ep = ParseRedisUrl("x", c.url);
    REQUIRE_FALSE(ep.has_value());
    CHECK(ep.error().message.find(c.says) != std::string::npos);
  }
}

TEST_CASE("password_file= names the file the password comes from; not beside a password") {
  auto ep = ParseRedisUrl("a", "redis://alice:@h:1?password_file=/run/secrets/redis%40prod");
  REQUIRE(ep);
  CHECK(ep->user == "alice");
  CHECK(ep->password.empty());
  CHECK(ep->password_file == "/run/secrets/redis@prod");
  for (const char* url : {"redis://:pw@h?password_file=/f", "redis://alice@h?password_file=/f",
                          "redis://u:pw@h?password_file=/f"}) {
    CAPTURE(url);
    auto e = ParseRedisUrl("a", url);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().message.find("a password both in the URL and in password_file") !=
          std::string::npos);
  }
  CHECK(ParseRedisUrl("a", "redis://h?password_file=").error().message.find("has no value") !=
        std::string::npos);
}

TEST_CASE("ParseRedisFlags adds redis_default unless given, and rejects duplicates") {
  auto none = ParseRedisFlags({});
  REQUIRE(none);
  REQUIRE(none->size() == 1);
  CHECK(none->at(0).name == "redis_default");
  CHECK(none->at(0).host == "127.0.0.1");
  CHECK(none->at(0).port == 6379);

  auto two = ParseRedisFlags({"other=redis://h:1"});
  REQUIRE(two);
  CHECK(two->size() == 2);

  auto own = ParseRedisFlags({"redis_default=redis://h:2"});
  REQUIRE(own);
  REQUIRE(own->size() == 1);
  CHECK(own->at(0).port == 2);

  auto dup = ParseRedisFlags({"a=redis://h:1", "a=redis://h:2"});
  REQUIRE_FALSE(dup);
  CHECK(dup.error().message.find("'a' given twice") != std::string::npos);
}

TEST_CASE("commands encode to RESP, keys join prefix and id") {
  RedisCommand c{"LRANGE"};
  c.Key("p:", "follow:", 42).Arg(int64_t{0}).Arg(int64_t{-1});
  CHECK(c.wire() == "*4\r\n$6\r\nLRANGE\r\n$11\r\np:follow:42\r\n$1\r\n0\r\n$2\r\n-1\r\n");
  CHECK(c.Describe() == "LRANGE p:follow:42");
  CHECK(c.Argument(3) == "-1");
  // wire() may be called again after more arguments.
  c.Arg("x");
  CHECK(c.wire().starts_with("*5\r\n"));
  RedisCommand empty_arg{"SET", "k", ""};
  CHECK(empty_arg.wire() == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
}

TEST_CASE("a batch encodes each command as RedisCommand does, with its key found in place") {
  const std::string long_arg(150, 'a');
  RedisCommands cmds;
  cmds.Add(4).Arg("LRANGE").Key("p:", "follow:", 42).Arg(int64_t{0}).Arg(int64_t{-1});
  cmds.Add(3).Arg("SET").Key("tenant:", "some-key").Arg(long_arg);
  cmds.Add(12).Arg("SMISMEMBER").Key("", "seen:", -7);
  for (int64_t id = 1; id <= 10; ++id) cmds.Arg(id * 1'000'000'007);
  cmds.Add(2).Arg("GET").Key("", "");

  RedisCommand a{"LRANGE"};
  a.Key("p:", "follow:", 42).Arg(int64_t{0}).Arg(int64_t{-1});
  RedisCommand b{"SET"};
  b.Key("tenant:", "some-key").Arg(long_arg);
  RedisCommand c{"SMISMEMBER"};
  c.Key("", "seen:", -7);
  for (int64_t id = 1; id <= 10; ++id) c.Arg(id * 1'000'000'007);
  RedisCommand d{"GET", ""};

  REQUIRE(cmds.size() == 4);
  CHECK(cmds.wire(0) == a.wire());
  CHECK(cmds.wire(1) == b.wire());
  CHECK(cmds.wire(2) == c.wire());
  CHECK(cmds.wire(3) == d.wire());
  CHECK(cmds.wire() == std::string(a.wire()) + std::string(b.wire()) + std::string(c.wire()) +
                           std::string(d.wire()));
  CHECK(cmds.key(0) == "p:follow:42");
  CHECK(cmds.key(1) == "tenant:some-key");
  CHECK(cmds.key(2) == "seen:-7");
  CHECK(cmds.key(3) == "");
  CHECK(cmds.Argument(1, 2) == long_arg);
  CHECK(cmds.Argument(2, 11) == "10000000070");
}
