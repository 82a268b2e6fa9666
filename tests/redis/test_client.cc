// The async client against a real redis-server: batches, pipelining counters, error
// replies, AUTH/SELECT, and the faults (refused at start, killed mid-request, slow
// against a deadline, closed with commands pending).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <thread>

#include "redis_server.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;
using namespace std::chrono_literals;

namespace {
bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a batch returns one reply per command, in order, errors as values") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"RPUSH", "follow:1", "10", "11", "12"});
  server.Command({"HSET", "user:1", "country", "FR", "age", "31"});
  server.Command({"SET", "str", "x"});
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());

  auto r = shard.Batch({
      RedisCommand{"LRANGE", "follow:1", "0", "1"},
      RedisCommand{"HGETALL", "user:1"},
      RedisCommand{"GET", "missing"},
      RedisCommand{"LRANGE", "str", "0", "1"},  // WRONGTYPE
      RedisCommand{"SISMEMBER", "nope", "1"},
      RedisCommand{"PING"},
  });
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 6);
  const auto& v = *r;
  REQUIRE(v[0].is_array());
  REQUIRE(v[0].size() == 2);
  CHECK(v[0].At(0).str() == "10");
  CHECK(v[0].At(1).str() == "11");
  CHECK(v[1].size() == 4);
  CHECK(v[2].is_nil());
  CHECK(v[3].is_error());
  CHECK(Contains(std::string(v[3].str()), "WRONGTYPE"));
  CHECK(v[4].is_integer());
  CHECK(v[4].integer() == 0);
  CHECK(v[5].kind() == RespKind::kStatus);
  CHECK(v[5].str() == "PONG");
  CHECK(Read(shard.pool().stats().error_replies) == 1);
}

TEST_CASE("an empty batch succeeds without touching Redis") {
  TestShard shard({"redis_default=redis://127.0.0.1:1"}, {.connections_per_endpoint = 1});
  auto r = shard.Batch({});
  REQUIRE(r.has_value());
  CHECK(r->empty());
}

TEST_CASE("a batch of 100 commands leaves in one write and costs one batch") {
  RedisServer server;
  REQUIRE(server.Start());
  for (int i = 0; i < 100; ++i)
    server.Command({"RPUSH", "media:" + std::to_string(i), std::to_string(1000 + i)});
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  const RedisStats& st = shard.pool().stats();
  uint64_t writes0 = Read(st.socket_writes), batches0 = Read(st.batches),
           commands0 = Read(st.commands);

  std::vector<RedisCommand> cmds;
  for (int i = 0; i < 100; ++i) {
    RedisCommand c{"LRANGE"};
    c.Key("", "media:", i).Arg(int64_t{0}).Arg(int64_t{4});
    cmds.push_back(std::move(c));
  }
  auto r = shard.Batch(std::move(cmds));
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 100);
  CHECK((*r)[42].At(0).str() == "1042");
  CHECK(Read(st.batches) - batches0 == 1);
  CHECK(Read(st.commands) - commands0 == 100);
  CHECK(Read(st.socket_writes) - writes0 == 1);
}

TEST_CASE("a batch larger than the socket buffer is sent in pieces as the socket drains") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  const RedisStats& st = shard.pool().stats();
  uint64_t writes0 = Read(st.socket_writes);
  // 16 MiB: more than a loopback socket's send buffer takes at once, so the first send
  // is partial and the rest goes out on writable events.
  const std::string value(64 << 10, 'v');
  std::vector<RedisCommand> cmds;
  for (int i = 0; i < 256; ++i) {
    RedisCommand c{"SET"};
    c.Key("", "big:", i).Arg(value);
    cmds.push_back(std::move(c));
  }
  RedisCommand strlen{"STRLEN"};
  strlen.Key("", "big:", 255);
  cmds.push_back(std::move(strlen));
  auto r = shard.Batch(std::move(cmds));
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 257);
  CHECK((*r)[0].str() == "OK");
  CHECK((*r)[255].str() == "OK");
  CHECK((*r)[256].integer() == 64 << 10);
  CHECK(Read(st.socket_writes) - writes0 >= 2);
}

TEST_CASE("keys can live under an endpoint prefix") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"SET", "tenant7:k", "v"});
  TestShard shard({server.flag() + "?prefix=tenant7:"});
  REQUIRE(shard.WaitReady());
  CHECK(shard.pool().prefix() == "tenant7:");
  RedisCommand get{"GET"};
  get.Key(shard.pool().prefix(), "k");
  auto r = shard.Batch({get});
  REQUIRE(r);
  CHECK((*r)[0].str() == "v");
}

TEST_CASE("AUTH and SELECT run on connect; a wrong password is a clear error") {
  RedisServer server({"--requirepass", "s3cret"});
  REQUIRE(server.Start());
  server.Command({"SELECT", "2"}, "s3cret");
  // Command() runs each call on a fresh connection: write db 2 through MULTI-free SETs.
  auto set = server.Command(
      {"EVAL", "redis.call('SELECT', 2); return redis.call('SET', 'k', 'in-db-2')", "0"}, "s3cret");
  REQUIRE_FALSE(set[0].is_error());
  {
    TestShard shard(
        {"redis_default=redis://:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/2"});
    REQUIRE(shard.WaitReady());
    auto r = shard.Batch({RedisCommand{"GET", "k"}});
    REQUIRE(r);
    CHECK((*r)[0].str() == "in-db-2");
  }
  {
    TestShard shard({"redis_default=redis://:wrong@127.0.0.1:" + std::to_string(server.port())},
                    {.connections_per_endpoint = 1, .backoff_min_ms = 500, .backoff_max_ms = 500});
    REQUIRE(Eventually([&] {
      return shard.OnLoop([&] { return Contains(shard.pools().NotReadyReason(), "AUTH failed"); });
    }));
    auto r = shard.Batch({RedisCommand{"GET", "k"}});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kUnavailable);
    CHECK(Contains(r.error().detail, "AUTH failed"));
    CHECK(Contains(r.error().detail, "redis_default (127.0.0.1:"));
  }
}

TEST_CASE("refused at start: a clear unavailable error, then recovery in the background") {
  int port = FreeLoopbackPort();
  RedisServer server({}, port);  // not started yet
  TestShard shard({server.flag()}, {.backoff_min_ms = 20, .backoff_max_ms = 100});
  REQUIRE(Eventually([&] {
    return shard.OnLoop([&] { return Contains(shard.pools().NotReadyReason(), "refused"); });
  }));
  CHECK_FALSE(shard.OnLoop([&] { return shard.pools().Ready(); }));
  auto r = shard.Batch({RedisCommand{"PING"}});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
  CHECK(Contains(r.error().detail,
                 "redis endpoint redis_default (127.0.0.1:" + std::to_string(port)));
  CHECK(Contains(r.error().detail, "Connection refused"));
  CHECK(r.error().message == "redis endpoint redis_default: no live connection");
  CHECK(Read(shard.pool().stats().connect_failures) >= 1);

  REQUIRE(server.Start());
  REQUIRE(shard.WaitReady());
  auto ok = shard.Batch({RedisCommand{"PING"}});
  REQUIRE(ok);
  CHECK((*ok)[0].str() == "PONG");
}

TEST_CASE("a host name is looked up off the loop: localhost connects") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({"redis_default=redis://localhost:" + std::to_string(server.port())});
  REQUIRE(shard.WaitReady());
  auto ok = shard.Batch({RedisCommand{"PING"}});
  REQUIRE(ok);
  CHECK((*ok)[0].str() == "PONG");
}

TEST_CASE(
    "a host name that does not resolve: a clear error naming it, retries, the loop serves on") {
  TestShard shard({"redis_default=redis://no-such-host.invalid:6379"},
                  {.connect_timeout_ms = 2000, .backoff_min_ms = 20, .backoff_max_ms = 100});
  // The lookup fails (or, with a slow resolver, the connect timeout ends it): either way
  // the reason names the host, and the loop kept answering meanwhile.
  REQUIRE(Eventually([&] {
    return shard.OnLoop(
        [&] { return Contains(shard.pools().NotReadyReason(), "no-such-host.invalid"); });
  }));
  CHECK(Eventually([&] { return Read(shard.pool().stats().connect_failures) >= 2; }));
  auto r = shard.Batch({RedisCommand{"PING"}});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
}

TEST_CASE("killed mid-request: pending batches fail with unavailable, then reconnect") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()}, {.backoff_min_ms = 20, .backoff_max_ms = 100});
  REQUIRE(shard.WaitReady());

  // Two batches in flight on the two connections; DEBUG SLEEP keeps them pending.
  auto slow = [&] {
    return shard.Batch({RedisCommand{"DEBUG", "SLEEP", "2"}, RedisCommand{"PING"}});
  };
  auto f1 = std::async(std::launch::async, slow);
  auto f2 = std::async(std::launch::async, slow);
  // Sent is enough: read by Redis or still in its socket buffer, both batches are
  // pending (DEBUG SLEEP holds their replies for 2 s) when the connection goes.
  REQUIRE(Eventually([&] { return Read(shard.pool().stats().commands) >= 4; }));
  server.Kill();
  for (auto* f : {&f1, &f2}) {
    auto r = f->get();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kUnavailable);
    CHECK(Contains(r.error().message, "redis endpoint redis_default"));
    CHECK(Contains(r.error().message, "connection lost"));
  }
  CHECK(Read(shard.pool().stats().disconnects) >= 1);

  REQUIRE(server.Start());
  REQUIRE(shard.WaitReady());
  auto ok = shard.Batch({RedisCommand{"PING"}});
  REQUIRE(ok);
}

TEST_CASE("slow Redis against a deadline: deadline_exceeded, and the late reply is counted") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()}, {.connections_per_endpoint = 1});
  REQUIRE(shard.WaitReady());
  auto r = shard.Batch({RedisCommand{"DEBUG", "SLEEP", "0.3"}}, /*deadline_ms=*/50);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(Contains(r.error().message, "redis endpoint redis_default"));
  CHECK(Contains(r.error().detail, "DEBUG SLEEP"));
  CHECK(Eventually([&] { return Read(shard.pool().stats().late_replies) == 1; }));
  CHECK(Read(shard.pool().stats().failed_deadline) == 1);
  // The connection is still good.
  auto ok = shard.Batch({RedisCommand{"PING"}}, 5000);
  REQUIRE(ok);
}

TEST_CASE("a deadline that has already passed fails before sending") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  auto r = shard.Batch({RedisCommand{"PING"}}, 0);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(Read(shard.pool().stats().commands) == 0);
}

TEST_CASE("Close fails pending batches with unavailable") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  auto f = std::async(std::launch::async, [&] {
    return shard.Batch({RedisCommand{"DEBUG", "SLEEP", "1"}});
  });
  REQUIRE(Eventually([&] { return Read(shard.pool().stats().commands) >= 1; }));
  shard.OnLoop([&] { shard.pools().Close(); });
  auto r = f.get();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
  CHECK(Contains(r.error().message, "client closed"));
  CHECK_FALSE(shard.OnLoop([&] { return shard.pools().Ready(); }));
  auto after = shard.Batch({RedisCommand{"PING"}});
  REQUIRE_FALSE(after);
  CHECK(after.error().code == ErrorCode::kUnavailable);
}

namespace {
struct CapRun {
  std::vector<Result<RespReplies>> results;
  int remaining = 3;
  std::promise<void> done;
};
Coro<void> EchoBatch(RedisClient& pool, int i, std::shared_ptr<CapRun> run) {
  std::vector<RedisCommand> cmds;
  cmds.push_back(RedisCommand{"ECHO", std::to_string(i)});
  cmds.push_back(RedisCommand{"PING"});
  auto r = co_await pool.Batch(std::move(cmds), Clock::now() + 10s);
  run->results.push_back(std::move(r));
  if (--run->remaining == 0) run->done.set_value();
}
}  // namespace

TEST_CASE("batches beyond the in-flight cap wait for a free connection") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()},
                  {.connections_per_endpoint = 1, .max_inflight_per_connection = 2});
  REQUIRE(shard.WaitReady());
  // Three batches of two commands issued in one loop turn: only one fits at a time.
  auto run = std::make_shared<CapRun>();
  auto finished = run->done.get_future();
  shard.OnLoop([&] {
    for (int i = 0; i < 3; ++i) Spawn(EchoBatch(shard.pool(), i, run));
  });
  REQUIRE(finished.wait_for(10s) == std::future_status::ready);
  REQUIRE(run->results.size() == 3);
  for (auto& r : run->results) CHECK(r.has_value());
  CHECK(Read(shard.pool().stats().batches) == 3);
}

TEST_CASE("readiness needs every endpoint live") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag(), "down=redis://127.0.0.1:" + std::to_string(FreeLoopbackPort())},
                  {.connections_per_endpoint = 1});
  REQUIRE(Eventually([&] { return shard.OnLoop([&] { return shard.pool().live(); }); }));
  CHECK_FALSE(shard.OnLoop([&] { return shard.pools().Ready(); }));
  auto why = shard.OnLoop([&] { return shard.pools().NotReadyReason(); });
  CHECK(Contains(why, "redis endpoint down"));
  CHECK_FALSE(Contains(why, "redis_default"));
  CHECK(shard.OnLoop([&] { return shard.pools().Get("nope") == nullptr; }));
}

TEST_CASE("nested arrays, integers, nils and statuses inside arrays are read in place") {
  RedisServer server;
  REQUIRE(server.Start());
  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  auto r = shard.Batch(
      {RedisCommand{"EVAL", "return {1, {2, 'x', {}}, false, {ok='fine'}, {err='bad'}}", "0"}});
  REQUIRE(r);
  const RespView v = (*r)[0];
  REQUIRE(v.is_array());
  REQUIRE(v.size() == 5);
  CHECK(v.At(0).integer() == 1);
  REQUIRE(v.At(1).size() == 3);
  CHECK(v.At(1).At(0).integer() == 2);
  CHECK(v.At(1).At(1).str() == "x");
  CHECK(v.At(1).At(2).is_array());
  CHECK(v.At(1).At(2).size() == 0);
  CHECK(v.At(2).is_nil());
  CHECK(v.At(3).kind() == RespKind::kStatus);
  CHECK(v.At(3).str() == "fine");
  CHECK(v.At(4).is_error());
  CHECK(v.At(4).str() == "bad");
  CHECK(v.At(5).is_nil());  // past the end
}
