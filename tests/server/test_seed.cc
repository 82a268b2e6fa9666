// The demo-data seeder: deterministic for a seed (compared with DEBUG DIGEST), with and
// without an event history (--events, --now-ms), refuses a non-empty database without
// --flush, and writes the shape of docs/data.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "demo/seed.h"
#include "redis_server.h"

using namespace rankd;
using namespace rankd::testing;

namespace {
SeedOptions Small(const RedisServer& s, uint64_t seed) {
  SeedOptions o;
  o.endpoint = *ParseRedisUrl("seed", s.url());
  o.users = 200;
  o.follows = 10;
  o.media = 5;
  o.recs = 20;
  o.seen = 10;
  o.seed = seed;
  o.pipeline = 64;  // several round trips even for a small set
  return o;
}
// The text of one command's reply.
std::string Text(const RedisServer& s, const std::vector<std::string>& args) {
  return std::string(s.Command(args)[0].str());
}
std::string Digest(const RedisServer& s) { return Text(s, {"DEBUG", "DIGEST"}); }
std::vector<int64_t> List(const RedisServer& s, const std::string& key) {
  std::vector<int64_t> out;
  const RespReplies list = s.Command({"LRANGE", key, "0", "-1"});
  for (RespView e : list[0]) out.push_back(std::stoll(std::string(e.str())));
  return out;
}
}  // namespace

TEST_CASE("the same seed gives the same contents; another seed different ones") {
  RedisServer server;
  REQUIRE(server.Start());
  auto first = SeedDemoData(Small(server, 7));
  REQUIRE(first.has_value());
  CHECK(first->users == 200);
  CHECK(first->items == 1000);
  CHECK(first->round_trips > 1);
  CHECK(first->commands < first->round_trips * 64 + 1);
  std::string d1 = Digest(server);
  REQUIRE(d1.size() == 40);

  auto opts = Small(server, 7);
  opts.flush = true;
  REQUIRE(SeedDemoData(opts).has_value());
  CHECK(Digest(server) == d1);

  opts.seed = 8;
  REQUIRE(SeedDemoData(opts).has_value());
  CHECK(Digest(server) != d1);
}

TEST_CASE("events: the same seed and now give the same contents; another now different ones") {
  RedisServer server;
  REQUIRE(server.Start());
  constexpr int64_t kNowMs = 1764590400123;
  auto opts = Small(server, 7);
  opts.events = 25000;  // more than one write of events
  opts.now_ms = kNowMs;
  auto first = SeedDemoData(opts);
  REQUIRE(first.has_value());
  CHECK(first->events == 25000);
  CHECK(first->OneLine().find(", 25000 events in ") != std::string::npos);
  const std::string d1 = Digest(server);
  // Counted as POST /events counts them, marked in the served zsets.
  CHECK(server.Command({"TYPE", "cnt:item:1"})[0].str() == "hash");
  CHECK(server.Command({"TYPE", "cnt:user:1"})[0].str() == "hash");
  CHECK(server.Command({"TYPE", "served:1"})[0].str() == "zset");
  CHECK(server.Command({"ZCARD", "served:1"})[0].integer() <= 500);
  int64_t clicks = 0, imps = 0;
  for (int u = 1; u <= 200; ++u) {
    // The ring of docs/events.md: slots of (bucket index, impression sum, click sum).
    const RespReplies all = server.Command({"HGETALL", "cnt:user:" + std::to_string(u)});
    size_t i = 0;
    for (RespView e : all[0]) {
      if (i++ % 2 == 0) continue;  // the block's number
      const std::string_view slots = e.str();
      REQUIRE(slots.size() % 20 == 0);
      for (size_t at = 0; at < slots.size(); at += 20) {
        double imp, click;
        std::memcpy(&imp, slots.data() + at + 4, 8);
        std::memcpy(&click, slots.data() + at + 12, 8);
        imps += static_cast<int64_t>(imp);
        clicks += static_cast<int64_t>(click);
      }
    }
  }
  CHECK(clicks + imps == 25000);    // every event, once in its user's key
  CHECK(clicks * 100 > 25000 * 8);  // impression:click 9:1, loosely
  CHECK(clicks * 100 < 25000 * 12);

  opts.flush = true;
  REQUIRE(SeedDemoData(opts).has_value());
  CHECK(Digest(server) == d1);

  opts.now_ms = kNowMs + 3600 * 1000;
  REQUIRE(SeedDemoData(opts).has_value());
  CHECK(Digest(server) != d1);
}

TEST_CASE("a non-empty database is refused without --flush and left alone") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"SET", "precious", "1"});
  auto r = SeedDemoData(Small(server, 1));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kInvalidParam);
  CHECK(r.error().message.find("holds 1 keys") != std::string::npos);
  CHECK(r.error().message.find("--flush") != std::string::npos);
  CHECK(server.Command({"DBSIZE"})[0].integer() == 1);
  CHECK(server.Command({"GET", "precious"})[0].str() == "1");
}

TEST_CASE("an unreachable Redis is unavailable, naming it") {
  RedisServer server;  // never started
  auto r = SeedDemoData(Small(server, 1));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kUnavailable);
  CHECK(r.error().message.find("127.0.0.1:" + std::to_string(server.port())) != std::string::npos);
}

TEST_CASE("the data has the shape of docs/data.md") {
  RedisServer server;
  REQUIRE(server.Start());
  REQUIRE(SeedDemoData(Small(server, 3)).has_value());
  // Every user has a profile, all four lists/sets and an embedding; every item a hash, and
  // the newest 3 (embedded_media) of each user's 5 an embedding (vec:32: 128 bytes).
  CHECK(server.Command({"DBSIZE"})[0].integer() == 200 * 6 + 1000 + 200 * 3);
  CHECK(Text(server, {"HGET", "emb:user:1", "emb"}).size() == 128);
  CHECK(Text(server, {"HGET", "emb:item:998", "emb"}).size() == 128);  // user 200's 3rd
  CHECK(server.Command({"TYPE", "user:1"})[0].str() == "hash");
  CHECK(server.Command({"TYPE", "follow:1"})[0].str() == "list");
  CHECK(server.Command({"TYPE", "seen:1"})[0].str() == "set");
  auto item = server.Command({"HGETALL", "item:1"});
  CHECK(item[0].size() == 14);  // the 7 fields

  std::map<int64_t, int> followers;
  int seen_in_feed_or_recs = 0, nsfw = 0;
  for (int u = 1; u <= 200; ++u) {
    auto follows = List(server, "follow:" + std::to_string(u));
    CHECK(follows.size() == 10);
    CHECK(std::set<int64_t>(follows.begin(), follows.end()).size() == 10);
    CHECK(std::find(follows.begin(), follows.end(), u) == follows.end());
    for (auto f : follows) ++followers[f];
    auto media = List(server, "media:" + std::to_string(u));
    REQUIRE(media.size() == 5);
    CHECK(media[0] == DemoItemId(u, 0, 5));
    // Newest first: age_s grows along the list.
    auto age0 = std::stoll(Text(server, {"HGET", "item:" + std::to_string(media[0]), "age_s"}));
    auto age4 = std::stoll(Text(server, {"HGET", "item:" + std::to_string(media[4]), "age_s"}));
    CHECK(age0 <= age4);
    auto recs = List(server, "recs:" + std::to_string(u));
    CHECK(recs.size() == 20);
    std::set<int64_t> candidates(recs.begin(), recs.end());
    for (auto f : follows)
      for (int k = 0; k < 5; ++k) candidates.insert(DemoItemId(f, k, 5));
    const RespReplies seen = server.Command({"SMEMBERS", "seen:" + std::to_string(u)});
    for (RespView s : seen[0])
      seen_in_feed_or_recs += candidates.count(std::stoll(std::string(s.str()))) ? 1 : 0;
  }
  for (int i = 1; i <= 1000; ++i)
    nsfw += server.Command({"HGET", "item:" + std::to_string(i), "nsfw"})[0].str() == "1";
  // Zipf-like: the most followed author has many times the median's followers.
  std::vector<int> counts;
  for (auto& [uid, n] : followers) counts.push_back(n);
  std::sort(counts.begin(), counts.end());
  CHECK(counts.back() >= 5 * counts[counts.size() / 2]);
  CHECK(seen_in_feed_or_recs > 200);  // seen-filtering has work to do
  CHECK(nsfw < 100);                  // ~2%, loosely
}

TEST_CASE(
    "the newest embedded_media of each user's items carry an embedding; a bad count is refused") {
  RedisServer server;
  REQUIRE(server.Start());
  SeedOptions o = Small(server, 1);
  o.users = 20;
  o.embedded_media = 2;
  REQUIRE(SeedDemoData(o).has_value());
  for (int u = 1; u <= 20; ++u)
    for (int k = 0; k < 5; ++k)
      CHECK(server.Command({"EXISTS", "emb:item:" + std::to_string(DemoItemId(u, k, 5))})[0]
                .integer() == (k < 2 ? 1 : 0));
  o.embedded_media = 6;
  o.flush = true;
  auto r = SeedDemoData(o);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kInvalidParam);
  CHECK(r.error().message.find("--embedded-media must be in 0..--media (5)") != std::string::npos);
}
