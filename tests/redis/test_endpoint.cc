// Endpoint flags (--redis NAME=URL) and RESP encoding: no server needed.
#include <doctest/doctest.h>

#include "redis/command.h"
#include "redis/commands.h"
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
      {"x=redis://h:0", "port '0'"},
      {"x=redis://h:99999", "port '99999'"},
      {"x=redis://h:12ab", "port '12ab'"},
      {"x=redis://h:1/-1", "database '-1'"},
      {"x=redis://h:1/zz", "database 'zz'"},
      {"x=redis://:1", "missing host"},
      {"x=redis://h:1?db=2", "unknown query parameter 'db=2'"},
      {"x=redis://h:", "empty port"},
      {"bad name=redis://h:1", "endpoint name"},
      {"redis://h:1", "expected NAME=redis://"},
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
