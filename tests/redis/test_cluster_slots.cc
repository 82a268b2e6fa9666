// Redis Cluster URLs, key slots and the slot map: no server needed.
#include <doctest/doctest.h>

#include <string>

#include "redis/cluster_slots.h"
#include "redis/endpoint.h"
#include "redis/resp_reader.h"

using namespace rankd;

TEST_CASE("a redis-cluster URL lists its seed nodes; a database is an error naming it") {
  auto ep = ParseRedisFlag("shop=redis-cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002?prefix=p:");
  REQUIRE(ep.has_value());
  CHECK(ep->is_cluster());
  REQUIRE(ep->cluster_seeds.size() == 3);
  CHECK(ep->cluster_seeds[0] == RedisAddress{"10.0.0.1", 7000});
  CHECK(ep->cluster_seeds[1] == RedisAddress{"10.0.0.2", 6379});
  CHECK(ep->cluster_seeds[2] == RedisAddress{"::1", 7002});
  CHECK(ep->host == "10.0.0.1");
  CHECK(ep->port == 7000);
  CHECK(ep->password == "pw");
  CHECK(ep->prefix == "p:");
  CHECK(ep->Label() == "shop (cluster 10.0.0.1:7000,10.0.0.2:6379,::1:7002)");
  RedisEndpoint node = ep->AtNode({"10.0.0.9", 7005});
  CHECK_FALSE(node.is_cluster());
  CHECK(node.Label() == "shop (10.0.0.9:7005)");
  CHECK(node.password == "pw");
  CHECK(node.prefix == "p:");
  CHECK_FALSE(node.read_from_replica);

  auto reads = ParseRedisFlag("shop=redis-cluster://h:1?prefix=p:&read_from=replica");
  REQUIRE(reads);
  CHECK(reads->read_from_replica);
  CHECK(reads->AtNode({"h", 2}).read_from_replica);  // its connections send READONLY
  auto masters = ParseRedisFlag("shop=redis-cluster://h:1?read_from=master");
  REQUIRE(masters);
  CHECK_FALSE(masters->read_from_replica);

  auto single = ParseRedisUrl("a", "redis://h:1/2");
  REQUIRE(single);
  CHECK_FALSE(single->is_cluster());

  struct Case {
    const char* flag;
    const char* says;
  } bad[] = {
      {"x=redis-cluster://h:1/0", "has no databases: remove '/0'"},
      {"x=redis-cluster://h:1,h:2/3?prefix=a", "remove '/3'"},
      {"x=redis-cluster://h:1,,h:2", "missing host"},
      {"x=redis-cluster://h:1,h:0", "port '0'"},
      {"x=redis-cluster://", "missing host"},
      {"x=rediscluster://h:1", "must start with redis://, redis-cluster://"},
      {"x=redis-cluster://h:1?read_from=any", "unknown query parameter 'read_from=any'"},
      {"x=redis://h:1?read_from=replica", "unknown query parameter 'read_from=replica'"},
  };
  for (auto& c : bad) {
    CAPTURE(c.flag);
    auto e = ParseRedisFlag(c.flag);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().code == ErrorCode::kInvalidParam);
    CHECK(e.error().message.find(c.says) != std::string::npos);
  }
}

TEST_CASE("key slots: CRC16/XMODEM modulo 16384, with hash tags") {
  CHECK(Crc16Xmodem("123456789") == 0x31C3);  // the XMODEM check value
  // Two bytes a step, against the definition (bit by bit), odd and even lengths.
  auto bitwise = [](std::string_view bytes) {
    uint16_t crc = 0;
    for (unsigned char c : bytes) {
      crc = static_cast<uint16_t>(crc ^ (c << 8));
      for (int b = 0; b < 8; ++b)
        crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
  };
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    CHECK(Crc16Xmodem(bytes) == bitwise(bytes));
    bytes += static_cast<char>((n * 97 + 13) & 0xff);
  }
  CHECK(KeySlot("foo") == 12182);
  CHECK(KeySlot("bar") == 5061);
  CHECK(KeySlot("") == 0);
  CHECK(KeySlot("{user1000}.following") == KeySlot("{user1000}.followers"));
  CHECK(KeySlot("{user1000}.following") == KeySlot("user1000"));
  // An empty tag "{}" does not count: the whole key is hashed.
  CHECK(KeySlot("foo{}{bar}") == Crc16Xmodem("foo{}{bar}") % 16384);
  // Only the first '{' and the first '}' after it count.
  CHECK(KeySlot("foo{{bar}}zap") == KeySlot("{bar"));
  CHECK(KeySlot("foo{bar}{zap}") == KeySlot("bar"));
  CHECK(KeySlot("foo{bar") == Crc16Xmodem("foo{bar") % 16384);
  // A prefix is part of the key.
  CHECK(KeySlot("p:user:1") != KeySlot("user:1"));
}

namespace {
// Replies written by hand, in RESP.
std::string Int(int64_t v) { return ":" + std::to_string(v) + "\r\n"; }
std::string Str(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}
std::string Arr(const std::vector<std::string>& elements) {
  std::string out = "*" + std::to_string(elements.size()) + "\r\n";
  for (const auto& e : elements) out += e;
  return out;
}
std::string Node(std::string host, int64_t port) { return Arr({Str(host), Int(port), Str("id")}); }

// One reply as a connection reads it: checked by the scanner, kept as its bytes.
RespReplies Reply(const std::string& wire) {
  RespReader reader;
  REQUIRE(reader.Feed(wire).has_value());
  REQUIRE(reader.replies().size() == 1);
  RespReplies out;
  out.Append(reader.replies().raw(0));
  return out;
}
}  // namespace

TEST_CASE("the slot map from CLUSTER SLOTS: masters, replicas, holes, bad shapes") {
  const RespReplies slots = Reply(Arr({
      Arr({Int(0), Int(5460), Node("127.0.0.1", 7000), Node("127.0.0.1", 7004)}),
      Arr({Int(5461), Int(10922), Node("", 7001), Node("127.0.0.1", 7005)}),
      Arr({Int(10923), Int(16000), Node("127.0.0.1", 7002), Node("127.0.0.1", 7003)}),
      Arr({Int(16001), Int(16383), Node("127.0.0.1", 7000)}),
  }));
  auto map = SlotMap::FromClusterSlots(slots[0], {"127.0.0.1", 7009}, 1000);
  REQUIRE(map.has_value());
  CHECK(map->nodes().size() == 6);
  CHECK(map->ranges().size() == 4);
  CHECK(map->nodes()[static_cast<size_t>(map->MasterOf(0))] == RedisAddress{"127.0.0.1", 7000});
  CHECK(map->nodes()[static_cast<size_t>(map->MasterOf(16383))] == RedisAddress{"127.0.0.1", 7000});
  // An empty host is the host the reply came from.
  CHECK(map->nodes()[static_cast<size_t>(map->MasterOf(5461))] == RedisAddress{"127.0.0.1", 7001});
  CHECK(map->nodes()[static_cast<size_t>(map->MasterOf(KeySlot("foo")))] ==
        RedisAddress{"127.0.0.1", 7002});
  REQUIRE(map->ranges()[0].replicas.size() == 1);
  CHECK(map->nodes()[static_cast<size_t>(map->ranges()[0].replicas[0])] ==
        RedisAddress{"127.0.0.1", 7004});
  CHECK(map->IndexOf({"127.0.0.1", 7003}) >= 0);
  CHECK(map->IndexOf({"127.0.0.1", 7009}) == -1);

  auto holes =
      SlotMap::FromClusterSlots(Reply(Arr({Arr({Int(0), Int(99), Node("h", 1)})}))[0], {"h", 1}, 1);
  REQUIRE(holes);
  CHECK(holes->MasterOf(99) == 0);
  CHECK(holes->MasterOf(100) == -1);

  const std::string bad[] = {
      "-ERR This instance has cluster support disabled\r\n",
      Str("x"),
      Arr({Arr({Int(0), Int(16384), Node("h", 1)})}),
      Arr({Arr({Int(5), Int(4), Node("h", 1)})}),
      Arr({Arr({Int(0), Int(1)})}),
      Arr({Arr({Int(0), Int(1), Arr({Str("h")})})}),
      Arr({Arr({Int(0), Int(1), Node("h", 0)})}),
      Arr({Arr({Int(0), Int(1), Node("h", 65536)})}),
      Arr({Arr({Int(0), Int(1), Node("h", int64_t{1} << 32 | 6379)})}),
      Arr({Arr({Int(0), Int(10), Node("h", 1)}), Arr({Int(10), Int(20), Node("h", 2)})}),
  };
  for (const auto& r : bad) {
    auto m = SlotMap::FromClusterSlots(Reply(r)[0], {"h", 1}, 1000);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::kBackendError);
    CHECK(m.error().message.starts_with("bad CLUSTER SLOTS reply"));
  }
}

TEST_CASE("CLUSTER SLOTS: nodes bounded by max_nodes, every index kept whole") {
  // 16384 one-slot ranges, each with a master and two replicas of its own: 49152 nodes,
  // past what an int16 index holds, and a reply a quadratic dedup would crawl through.
  std::vector<std::string> ranges;
  for (int s = 0; s < kClusterSlots; ++s)
    ranges.push_back(Arr({Int(s), Int(s), Node("10.0.0.1", 1 + 3 * s), Node("10.0.0.2", 2 + 3 * s),
                          Node("10.0.0.3", 3 + 3 * s)}));
  const RespReplies reply = Reply(Arr(ranges));
  auto map = SlotMap::FromClusterSlots(reply[0], {"h", 1}, 3 * kClusterSlots);
  REQUIRE(map.has_value());
  CHECK(map->nodes().size() == 3 * kClusterSlots);
  for (int s : {0, 10922, 10923, 16383}) {
    CAPTURE(s);
    REQUIRE(map->MasterOf(s) == 3 * s);
    CHECK(map->nodes()[static_cast<size_t>(map->MasterOf(s))] ==
          RedisAddress{"10.0.0.1", 1 + 3 * s});
    CHECK(map->IndexOf({"10.0.0.3", 3 + 3 * s}) == 3 * s + 2);
  }
  // One node over the bound: refused, naming the flag.
  auto over = SlotMap::FromClusterSlots(reply[0], {"h", 1}, 3 * kClusterSlots - 1);
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().message ==
        "bad CLUSTER SLOTS reply: more than 49151 nodes (--redis-max-cluster-nodes)");
  // A node named again and again counts once.
  std::vector<std::string> same;
  for (int s = 0; s < 1000; ++s)
    same.push_back(Arr({Int(s), Int(s), Node("h", 7000), Node("h", 7001), Node("h", 7001)}));
  auto two = SlotMap::FromClusterSlots(Reply(Arr(same))[0], {"h", 1}, 2);
  REQUIRE(two.has_value());
  CHECK(two->nodes().size() == 2);
  CHECK(two->MasterOf(999) == 0);
  CHECK(two->MasterOf(1000) == -1);
}
