// Client-side caching support against a real redis-server: the tracker subscribes, data
// connections turn tracking on before their reads, invalidations reach the sink (keys
// without the endpoint's prefix), FLUSHALL and the loss of the tracker's or a data
// connection flush the sink, and tracking resumes once the tracker is back.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "redis_server.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;

namespace {

// Records what the client tells it; called on the loop thread, read by the test's.
class RecordingSink final : public InvalidationSink {
 public:
  void OnInvalidate(std::string_view key) override {
    std::lock_guard lk(mu_);
    keys_.emplace_back(key);
  }
  void OnInvalidateAll() override {
    std::lock_guard lk(mu_);
    ++flushes_;
  }
  bool Saw(const std::string& key) {
    std::lock_guard lk(mu_);
    for (const auto& k : keys_)
      if (k == key) return true;
    return false;
  }
  int flushes() {
    std::lock_guard lk(mu_);
    return flushes_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> keys_;
  int flushes_ = 0;
};

// The client ids of the server's connections of one type (CLIENT LIST TYPE: "pubsub",
// "normal"; the listing's own connection is a normal one).
std::vector<std::string> ClientIds(const RedisServer& server, const std::string& type) {
  std::vector<std::string> ids;
  const RespReplies reply = server.Command({"CLIENT", "LIST", "TYPE", type});
  const std::string list(reply[0].str());
  size_t pos = 0;
  while ((pos = list.find("id=", pos)) != std::string::npos) {
    size_t end = list.find(' ', pos);
    ids.push_back(list.substr(pos + 3, end - pos - 3));
    pos = end;
  }
  return ids;
}

std::vector<std::string> SubscriberIds(const RedisServer& server) {
  return ClientIds(server, "pubsub");
}

struct Tracked {
  explicit Tracked(const RedisServer& server, TrackingMode mode = TrackingMode::kDefault)
      : shard({"redis_default=" + server.url() + "?prefix=app:"}) {
    REQUIRE(shard.WaitReady());
    shard.OnLoop([&] {
      TrackingConfig config;
      config.sink = &sink;
      config.mode = mode;
      config.bcast_prefixes = {"item:"};
      shard.pool().EnableTracking(config);
    });
  }
  bool Ready() {
    return Eventually([&] { return shard.OnLoop([&] { return shard.pool().tracking_ready(); }); });
  }
  // The value of field "likes" of `key`, "" for a nil.
  std::string Read(const std::string& key) {
    auto r = shard.Batch({RedisCommand{"HGET", "app:" + key, "likes"}});
    REQUIRE(r.has_value());
    return std::string((*r)[0].str());
  }

  RecordingSink sink;
  TestShard shard;
};

}  // namespace

TEST_CASE("a key read through a tracked connection is invalidated when written") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"HSET", "app:item:1", "likes", "1"});
  Tracked t(server);
  REQUIRE(t.Ready());
  CHECK(SubscriberIds(server).size() == 1);  // the tracker
  CHECK(t.Read("item:1") == "1");
  server.Command({"HSET", "app:item:1", "likes", "2"});
  CHECK(Eventually([&] { return t.sink.Saw("item:1"); }));  // the prefix is stripped
  // A key never read is not tracked (default mode): no message for it. A key read and then
  // written after them is: the tracker hears invalidations in the order of the writes, so
  // once it has heard that one, it would have heard theirs.
  server.Command({"HSET", "app:item:2", "likes", "2"});
  server.Command({"HSET", "other:item:1", "likes", "2"});
  t.Read("item:9");
  server.Command({"HSET", "app:item:9", "likes", "2"});
  CHECK(Eventually([&] { return t.sink.Saw("item:9"); }));
  CHECK_FALSE(t.sink.Saw("item:2"));
  CHECK(t.sink.flushes() == 0);
}

TEST_CASE("BCAST mode hears every write under the prefixes, read or not") {
  RedisServer server;
  REQUIRE(server.Start());
  Tracked t(server, TrackingMode::kBcast);
  REQUIRE(t.Ready());
  t.Read("user:1");  // turns tracking on for the data connection used
  t.Read("user:1");  // and the other one (connections take turns)
  server.Command({"HSET", "app:item:7", "likes", "2"});
  server.Command({"HSET", "app:user:7", "age", "2"});    // not a tracked prefix
  server.Command({"HSET", "app:item:8", "likes", "2"});  // heard after user:7's, in order
  CHECK(Eventually([&] { return t.sink.Saw("item:8"); }));
  CHECK(t.sink.Saw("item:7"));
  CHECK_FALSE(t.sink.Saw("user:7"));
}

TEST_CASE("FLUSHALL flushes the sink") {
  RedisServer server;
  REQUIRE(server.Start());
  Tracked t(server);
  REQUIRE(t.Ready());
  t.Read("item:1");
  server.Command({"FLUSHALL"});
  CHECK(Eventually([&] { return t.sink.flushes() >= 1; }));
}

TEST_CASE("losing the tracker flushes the sink; tracking resumes with the new one") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"HSET", "app:item:1", "likes", "1"});
  Tracked t(server);
  REQUIRE(t.Ready());
  t.Read("item:1");
  auto ids = SubscriberIds(server);
  REQUIRE(ids.size() == 1);
  server.Command({"CLIENT", "KILL", "ID", ids[0]});
  CHECK(Eventually([&] { return t.sink.flushes() >= 1; }));
  // Back (after the reconnect backoff) with a new id; a read re-points the connection.
  REQUIRE(t.Ready());
  auto again = SubscriberIds(server);
  REQUIRE(again.size() == 1);
  CHECK(again[0] != ids[0]);
  t.Read("item:1");
  t.Read("item:1");
  server.Command({"HSET", "app:item:1", "likes", "5"});
  CHECK(Eventually([&] { return t.sink.Saw("item:1"); }));
}

TEST_CASE("BCAST: losing a data connection loses nothing (the tracker tracks)") {
  RedisServer server;
  REQUIRE(server.Start());
  Tracked t(server, TrackingMode::kBcast);
  REQUIRE(t.Ready());
  t.Read("item:1");
  const std::vector<std::string> before = ClientIds(server, "normal");  // and the listing's
  server.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  // Every data connection back under a new id: the client has handled each loss.
  CHECK(Eventually([&] {
    std::vector<std::string> now = ClientIds(server, "normal");
    if (now.size() != before.size()) return false;
    for (const auto& id : now)
      if (std::find(before.begin(), before.end(), id) != before.end()) return false;
    return true;
  }));
  REQUIRE(t.shard.WaitReady());
  CHECK(t.sink.flushes() == 0);
  server.Command({"HSET", "app:item:3", "likes", "2"});
  CHECK(Eventually([&] { return t.sink.Saw("item:3"); }));
}

TEST_CASE("default mode: losing a tracked data connection flushes the sink") {
  RedisServer server;
  REQUIRE(server.Start());
  Tracked t(server);
  REQUIRE(t.Ready());
  t.Read("item:1");
  t.Read("item:1");
  int before = t.sink.flushes();
  // Every normal (non-subscriber) client: the data connections.
  server.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  CHECK(Eventually([&] { return t.sink.flushes() > before; }));
}
