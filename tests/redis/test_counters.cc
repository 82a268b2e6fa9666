// Counters families against a real redis-server (docs/events.md): events written through
// CounterBatch and WriteCounters, read back by `features` and `viewer` at a request's
// time and compared with sums and rates computed here from the events themselves; the
// bound on buckets a key holds under dense, sparse and future-dated writes; expiry;
// a script Redis lost (NOSCRIPT); error replies.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "cache/shard_cache.h"
#include "core/thread_pool.h"
#include "events/counter_layout.h"
#include "events/counter_write.h"
#include "plan/loader.h"
#include "redis_server.h"
#include "sched/scheduler.h"
#include "tasks/cache_families.h"
#include "tasks/task.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;

namespace {

constexpr std::string_view kSchema = R"({
  "schema_version": 1,
  "events": {
    "imp":   {"user": "i64", "item": "i64"},
    "click": {"user": "i64", "item": "i64"},
    "dwell": {"user": "str", "item": "i64", "value": true},
    "cimp":   {"user": "i64", "item": "i64"},
    "cclick": {"user": "i64", "item": "i64"},
    "cdwell": {"user": "str", "item": "i64", "value": true}
  },
  "families": {
    "ic": {"type": "counters", "key": "ic:{id}", "by": "item", "count": ["imp", "click", "dwell"],
           "bucket_s": 60, "keep_s": 3600,
           "fields": {
             "imps_10m":   {"sum": "imp", "window_s": 600},
             "clicks_1h":  {"sum": "click", "window_s": 3600},
             "ctr_30m":    {"rate": ["click", "imp"], "window_s": 1800, "prior": [1, 10]},
             "dwell_1h":   {"sum": "dwell", "window_s": 3600},
             "dwell_per_click": {"rate": ["dwell", "click"], "window_s": 120}
           }},
    "uc": {"type": "counters", "key": "uc:{id}", "id": "str", "by": "user", "count": ["dwell"],
           "bucket_s": 10, "keep_s": 100, "fields": {"dwell_1m": {"sum": "dwell", "window_s": 60}}},
    "short": {"type": "counters", "key": "short:{id}", "by": "item", "count": ["imp", "click"],
              "bucket_s": 1, "keep_s": 5, "fields": {"n": {"sum": "click", "window_s": 5}}},
    "brief": {"type": "counters", "key": "brief:{id}", "by": "item", "count": ["click"],
              "bucket_s": 1, "keep_s": 2, "fields": {"n": {"sum": "click", "window_s": 2}}},
    "icc": {"type": "counters", "key": "icc:{id}", "by": "item",
            "count": ["cimp", "cclick", "cdwell"], "bucket_s": 60, "keep_s": 7200, "cache_ms": 300,
            "fields": {
              "imps_10m":  {"sum": "cimp", "window_s": 600},
              "ctr_30m":   {"rate": ["cclick", "cimp"], "window_s": 1800, "prior": [1, 10]},
              "dwell_1h":  {"sum": "cdwell", "window_s": 3600},
              "dwell_per_click": {"rate": ["cdwell", "cclick"], "window_s": 120}
            }}
  }
})";

constexpr int64_t kNow = 1764590400;  // Unix s of the tests' "now" (a minute's start)

SchemaPtr TestSchemaPtr() {
  static const SchemaPtr s = [] {
    auto r = ParseSchema(kSchema, "counters.json");
    REQUIRE(r.has_value());
    return *r;
  }();
  return s;
}
const Schema& TestSchema() { return *TestSchemaPtr(); }

const TaskRegistry& Registry() {
  static const TaskRegistry* r = [] {
    auto* reg = new TaskRegistry;
    RegisterBuiltinOps(*reg);
    return reg;
  }();
  return *r;
}

struct Event {
  std::string type;
  int64_t user = 0;
  std::string user_str;  // dwell's user id
  int64_t item = 0;
  double value = 1;
  int64_t ts_ms = 0;
};

struct Fixture {
  RedisServer server;
  std::unique_ptr<TestShard> shard;
  Fixture() {
    REQUIRE(server.Start());
    shard = std::make_unique<TestShard>(std::vector<std::string>{server.flag()});
    REQUIRE(shard->WaitReady());
  }

  // Writes `events` as one request read at now_s (its batch kept in `last`).
  Result<CounterWriteResult> Write(const std::vector<Event>& events, int64_t now_s,
                                   bool aggregate = true) {
    CounterBatch& batch = last.emplace(TestSchemaPtr(), now_s * 1000, aggregate);
    for (const Event& e : events) {
      const EventType& type = *TestSchema().FindEvent(e.type);
      const IdRef user = type.user == ColumnType::kStr ? IdRef{0, e.user_str} : IdRef{e.user, {}};
      batch.Add(type, user, IdRef{e.item, {}}, e.value, e.ts_ms);
    }
    return RunSync(shard->loop(),
                   WriteCounters(shard->pool(), batch, Clock::now() + std::chrono::seconds(10)));
  }
  std::optional<CounterBatch> last;

  // The shard's cache, on a clock the test moves (OpenCache).
  uint64_t cache_now = 1000;
  std::unique_ptr<ShardCache> cache;
  CacheLookups lookups;
  void OpenCache() {
    cache = std::make_unique<ShardCache>(ShardCache::Options{.budget_bytes = 8 << 20},
                                         [this] { return cache_now; });
    cache->SetFamilies(CacheFamiliesOf(TestSchema()));
  }

  // Runs `op` (features or viewer) on family `family` with `fields`, at now_ms (through
  // the cache when it is open and `cached`).
  Result<RowSet> Read(const std::string& op, const std::string& family,
                      std::vector<std::string> fields, RowSets inputs, int64_t now_ms,
                      IdRef user = {}, bool cached = false) {
    const TaskSpec* spec = Registry().Find(op);
    REQUIRE(spec != nullptr);
    PlanNode node;
    node.id = "n";
    node.op = op;
    node.schema = spec;
    node.family = TestSchema().Find(family);
    REQUIRE(node.family != nullptr);
    TaskArgs args(&spec->params);
    for (size_t i = 0; i < spec->params.size(); ++i) {
      const std::string& name = spec->params[i].name;
      args.at(i) = name == "family"   ? Value(family)
                   : name == "fields" ? Value(fields)
                   : name == "cache"  ? Value(cached)
                                      : spec->params[i].default_value;
    }
    TaskContext ctx;
    ctx.loop = &shard->loop();
    ctx.redis = &shard->pools();
    ctx.user_id = user;
    ctx.now_ms = now_ms;
    ctx.node = &node;
    ctx.args = &args;
    ctx.cache = cache.get();
    ctx.cache_lookups = &lookups;
    ctx.deadline = Clock::now() + std::chrono::seconds(10);
    ctx.request_deadline = ctx.deadline;
    return RunSync(shard->loop(), spec->run_async(ctx, std::move(inputs)));
  }
};

RowSet Items(std::vector<int64_t> ids) {
  RowSet r;
  r.SetColumn("id", std::make_shared<const Column>(
                        Column::I64(PoolVector<int64_t>(ids.begin(), ids.end()))));
  return r;
}

// The sum of `type`'s values for `id` over the buckets b with now - W < b <= now, as
// docs/events.md defines it (events older than keep_s at their write were not counted).
long double RefSum(const std::vector<Event>& events, const CountersSpec& c, bool by_item,
                   const std::string& type, int64_t id, int64_t now_s, int64_t window_s) {
  long double sum = 0;
  for (const Event& e : events) {
    if (e.type != type || (by_item ? e.item : e.user) != id) continue;
    const int64_t b = BucketStart(e.ts_ms / 1000, c.bucket_s);
    if (now_s - window_s < b && b <= now_s) sum += e.value;
  }
  return sum;
}

// The bucket sums a counters key holds, by type, from HGETALL (the ring of
// counter_layout.h): the slots whose bucket is within the ring of the newest one held (a
// reader at that time can see them; older ones are dead, overwritten when their slot is
// written again). `slots`: every slot holding a bucket, dead ones too.
std::map<std::string, std::map<int64_t, long double>> Buckets(const RedisServer& server,
                                                              const std::string& key,
                                                              const CountersSpec& c,
                                                              size_t* slots = nullptr) {
  const CounterRing ring(c);
  std::vector<std::pair<uint32_t, std::string>> held;  // (bucket index, slot bytes)
  RespReplies r = server.Command({"HGETALL", key});
  REQUIRE(r[0].is_array());
  for (auto it = r[0].begin(); it != r[0].end(); ++it) {
    const int64_t block = std::stoll(std::string(it->str()));
    ++it;
    const std::string_view bytes = it->str();
    REQUIRE(bytes.size() % ring.slot_bytes == 0);
    for (size_t at = 0; at < bytes.size(); at += ring.slot_bytes) {
      uint32_t index;
      std::memcpy(&index, bytes.data() + at, 4);
      if (index == 0) continue;
      CHECK(ring.Block(index) == block);
      CHECK(ring.Offset(index) == at);
      held.emplace_back(index, std::string(bytes.substr(at, ring.slot_bytes)));
    }
  }
  if (slots) *slots = held.size();
  uint32_t newest = 0;
  for (const auto& h : held) newest = std::max(newest, h.first);
  std::map<std::string, std::map<int64_t, long double>> out;
  for (const auto& [index, bytes] : held) {
    if (index + ring.slots <= newest) continue;  // dead
    for (size_t t = 0; t < c.count.size(); ++t) {
      double x;
      std::memcpy(&x, bytes.data() + 4 + 8 * t, 8);
      if (x != 0) out[c.count[t]][int64_t{index} * c.bucket_s] = x;
    }
  }
  return out;
}

const CountersSpec& Spec(const char* family) { return *TestSchema().Find(family)->counters; }

bool Close(double got, long double want) {
  return std::fabs(static_cast<long double>(got) - want) <= 1e-9L * std::fabs(want) + 1e-12L;
}

}  // namespace

TEST_CASE(
    "counters: random events over many buckets read back as docs/events.md's sums and rates") {
  Fixture f;
  std::mt19937_64 rng(42);
  std::vector<Event> events;
  // 3,000 events over 2 keep_s (the first half too old to count), 40 items, in 10 requests.
  for (int i = 0; i < 3000; ++i) {
    Event e;
    const int kind = static_cast<int>(rng() % 3);
    e.type = kind == 0 ? "imp" : kind == 1 ? "click" : "dwell";
    e.item = static_cast<int64_t>(rng() % 40);
    e.user = static_cast<int64_t>(rng() % 10);
    e.user_str = "u" + std::to_string(e.user);
    if (e.type == "dwell")
      e.value = std::ldexp(static_cast<double>(rng() % 1000000), -10) - 300.0;  // negative too
    e.ts_ms = (kNow - 7200) * 1000 + static_cast<int64_t>(rng() % 7200000);
    events.push_back(e);
  }
  for (size_t i = 0; i < events.size(); i += 300) {
    std::vector<Event> part(events.begin() + static_cast<ptrdiff_t>(i),
                            events.begin() + static_cast<ptrdiff_t>(i + 300));
    auto w = f.Write(part, kNow);
    REQUIRE(w.has_value());
    CHECK(w->keys == f.last->keys());
    CHECK(w->late == 0);
    CHECK(f.last->too_old() > 0);
  }
  const KeyFamily& ic = *TestSchema().Find("ic");
  const CountersSpec& c = *ic.counters;
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < 42; ++id) ids.push_back(id % 42);  // 40, 41: no events
  ids.push_back(3);                                            // a repeated id
  size_t nonzero = 0;                                          // the reference is not all zeros
  for (int64_t now_s : {kNow, kNow + 59, kNow - 1, kNow + 1234}) {
    auto rows = f.Read("features", "ic",
                       {"imps_10m", "clicks_1h", "ctr_30m", "dwell_1h", "dwell_per_click"},
                       {Items(ids)}, now_s * 1000 + 999);
    REQUIRE(rows.has_value());
    REQUIRE(rows->size() == ids.size());
    // Events the writes dropped (older than keep_s when written) are not in the reference.
    std::vector<Event> kept;
    for (const Event& e : events)
      if (e.ts_ms >= (kNow - 3600) * 1000) kept.push_back(e);
    for (size_t r = 0; r < ids.size(); ++r) {
      const int64_t id = ids[r];
      CAPTURE(id);
      CAPTURE(now_s);
      auto at = [&](const char* col) { return rows->column(col)->Get(rows->row(r)); };
      const long double imps = RefSum(kept, c, true, "imp", id, now_s, 600);
      nonzero += imps > 0;
      CHECK(std::get<double>(at("imps_10m")) == static_cast<double>(imps));
      CHECK(std::get<double>(at("clicks_1h")) ==
            static_cast<double>(RefSum(kept, c, true, "click", id, now_s, 3600)));
      const long double clicks30 = RefSum(kept, c, true, "click", id, now_s, 1800);
      const long double imps30 = RefSum(kept, c, true, "imp", id, now_s, 1800);
      CHECK(Close(std::get<double>(at("ctr_30m")), (clicks30 + 1) / (imps30 + 11)));
      CHECK(
          Close(std::get<double>(at("dwell_1h")), RefSum(kept, c, true, "dwell", id, now_s, 3600)));
      const long double clicks2m = RefSum(kept, c, true, "click", id, now_s, 120);
      if (clicks2m == 0)
        CHECK(IsNull(at("dwell_per_click")));
      else
        CHECK(Close(std::get<double>(at("dwell_per_click")),
                    RefSum(kept, c, true, "dwell", id, now_s, 120) / clicks2m));
    }
  }
  CHECK(nonzero > 50);
}

TEST_CASE(
    "counters with cache_ms: cached reads equal uncached ones at every now their blocks cover, "
    "and live cache_ms") {
  Fixture f;
  f.OpenCache();
  std::mt19937_64 rng(7);
  std::vector<Event> events;
  for (int i = 0; i < 2000; ++i) {
    const int kind = static_cast<int>(rng() % 3);
    Event e;
    e.type = kind == 0 ? "cimp" : kind == 1 ? "cclick" : "cdwell";
    e.item = static_cast<int64_t>(rng() % 30);
    e.user_str = "u";
    if (e.type == "cdwell") e.value = std::ldexp(static_cast<double>(rng() % 100000), -7) - 300;
    e.ts_ms = (kNow - 3600) * 1000 + static_cast<int64_t>(rng() % 3600000);
    events.push_back(e);
  }
  // A block that is not whole slots for item 5 (the newest bucket's): its fields are null
  // both ways.
  REQUIRE(f.Write(events, kNow).has_value());
  const CounterRing ring(Spec("icc"));
  f.server.Command({"HSET", "icc:5", RingField(ring.Block(*ring.IndexOf(kNow))), "xyz"});
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < 32; ++id) ids.push_back(id);  // 30, 31: no events
  const std::vector<std::string> all = {"imps_10m", "ctr_30m", "dwell_1h", "dwell_per_click"};
  const std::vector<std::string> some = {"dwell_per_click", "imps_10m"};
  auto same = [&](const RowSet& a, const RowSet& b, const std::vector<std::string>& cols) {
    REQUIRE(a.size() == b.size());
    for (const std::string& col : cols)
      for (size_t r = 0; r < a.size(); ++r) {
        CAPTURE(col);
        CAPTURE(r);
        const Value x = a.column(col)->Get(a.row(r)), y = b.column(col)->Get(b.row(r));
        CHECK(x.index() == y.index());
        if (x.index() == y.index() && std::holds_alternative<double>(x))  // bit for bit
          CHECK(std::bit_cast<uint64_t>(std::get<double>(x)) ==
                std::bit_cast<uint64_t>(std::get<double>(y)));
      }
  };
  // The blocks holding the 60 newest buckets at now_s (all fields' longest window).
  auto blocks_at = [&](int64_t now_s) {
    std::set<int64_t> out;
    for (int64_t k = 0; k < 60; ++k)
      out.insert(ring.Block(*ring.IndexOf(BucketStart(now_s, 60) - 60 * k)));
    return out;
  };
  // The first cached read stores every id (the blocks of every field of the family); later
  // ones hit, whatever fields they ask, while their windows lie in the stored blocks.
  const int64_t t0 = kNow * 1000 + 5;
  auto cold = f.Read("features", "icc", some, {Items(ids)}, t0, {}, true);
  REQUIRE(cold.has_value());
  CHECK(f.lookups.misses == ids.size());
  CHECK(f.cache->stats().entries.load() == static_cast<int64_t>(ids.size()));
  CHECK(IsNull(cold->column("dwell_per_click")->Get(cold->row(5))));
  // Minutes later (the fake clock of the cache has not moved): other buckets of the same
  // blocks, or buckets in blocks the entries lack (a miss, which stores the entries anew).
  std::set<int64_t> stored = blocks_at(kNow);
  int misses = 0;
  for (int64_t now_ms : {t0, t0 + 59000, t0 + 60000, t0 - 60000, t0 + 300000, t0 + 1500000,
                         t0 + 1560000, t0 + 600000}) {
    CAPTURE(now_ms);
    f.lookups = {};
    auto uncached = f.Read("features", "icc", all, {Items(ids)}, now_ms);
    auto cached = f.Read("features", "icc", all, {Items(ids)}, now_ms, {}, true);
    REQUIRE(uncached.has_value());
    REQUIRE(cached.has_value());
    same(*uncached, *cached, all);
    const std::set<int64_t> need = blocks_at(SecondOf(now_ms));
    const bool covered = std::includes(stored.begin(), stored.end(), need.begin(), need.end());
    CHECK(f.lookups.hits == (covered ? ids.size() : 0));
    if (!covered) stored = need, ++misses;
  }
  CHECK(misses >= 2);  // +25 min and back to +10 min
  // A write is not seen by the cached read until the entry is cache_ms old (it was stored
  // within a few ms of real time after its batch was sent: 150 ms of margin).
  REQUIRE(f.Read("features", "icc", {"imps_10m"}, {Items({3})}, t0, {}, true).has_value());
  f.lookups = {};
  REQUIRE(f.Write({{"cimp", 0, "u", 3, 1, kNow * 1000}}, kNow).has_value());
  auto before = f.Read("features", "icc", {"imps_10m"}, {Items({3})}, t0, {}, true);
  auto fresh = f.Read("features", "icc", {"imps_10m"}, {Items({3})}, t0);
  REQUIRE(before.has_value());
  REQUIRE(fresh.has_value());
  CHECK(std::get<double>(fresh->column("imps_10m")->Get(0)) ==
        std::get<double>(before->column("imps_10m")->Get(0)) + 1);
  f.cache_now += 150;
  auto still = f.Read("features", "icc", {"imps_10m"}, {Items({3})}, t0, {}, true);
  REQUIRE(still.has_value());
  same(*before, *still, {"imps_10m"});
  f.cache_now += 150;
  auto after = f.Read("features", "icc", {"imps_10m"}, {Items({3})}, t0, {}, true);
  REQUIRE(after.has_value());
  same(*fresh, *after, {"imps_10m"});
  CHECK(f.lookups.hits == 2);
  CHECK(f.lookups.misses == 1);
  // A family without cache_ms is never cached, `cache: true` or not.
  f.lookups = {};
  auto plain = f.Read("features", "ic", {"imps_10m"}, {Items({3})}, t0, {}, true);
  REQUIRE(plain.has_value());
  CHECK(f.lookups.hits + f.lookups.misses == 0);
}

TEST_CASE("counters: viewer reads a user-keyed family at the request's time, one row always") {
  Fixture f;
  std::vector<Event> events;
  for (int i = 0; i < 50; ++i)
    events.push_back({"dwell", 0, i % 2 ? "alice" : "bob", 1, 0.25 * i, (kNow - 50 + i) * 1000});
  REQUIRE(f.Write(events, kNow).has_value());
  auto v = f.Read("viewer", "uc", {}, {}, kNow * 1000, IdRef{0, "alice"});
  REQUIRE(v.has_value());
  REQUIRE(v->size() == 1);
  CHECK(std::get<std::string>(v->column("id")->Get(0)) == "alice");
  long double want = 0;
  for (const Event& e : events)
    if (e.user_str == "alice" && BucketStart(e.ts_ms / 1000, 10) > kNow - 60) want += e.value;
  CHECK(Close(std::get<double>(v->column("dwell_1m")->Get(0)), want));
  auto none = f.Read("viewer", "uc", {}, {}, kNow * 1000, IdRef{0, "carol"});
  REQUIRE(none.has_value());
  REQUIRE(none->size() == 1);
  CHECK(std::get<double>(none->column("dwell_1m")->Get(0)) == 0);
}

TEST_CASE("counters: many events on one key and bucket are one increment") {
  Fixture f;
  std::vector<Event> events(100, Event{"click", 1, "", 7, 1, kNow * 1000 + 5});
  events.push_back({"click", 1, "", 7, 1, (kNow - 4000) * 1000});  // older than ic's keep_s
  auto w = f.Write(events, kNow);
  REQUIRE(w.has_value());
  CHECK(f.last->keys() == 3);  // ic:7, short:7, brief:7
  CHECK(f.last->increments() == 3);
  CHECK(f.last->too_old() == 3);  // the old one, in each
  CHECK(Buckets(f.server, "ic:7", Spec("ic"))["click"][kNow] == 100);
  CHECK(Buckets(f.server, "short:7", Spec("short"))["click"][kNow] == 100);
}

TEST_CASE("counters: unaggregated, each event is an increment of its own in each family") {
  Fixture f;
  std::vector<Event> events(100, Event{"click", 1, "", 7, 1, kNow * 1000 + 5});
  events.push_back({"click", 1, "", 7, 1, (kNow - 4000) * 1000});  // older than ic's keep_s
  auto w = f.Write(events, kNow, /*aggregate=*/false);
  REQUIRE(w.has_value());
  CHECK(f.last->keys() == 300);  // 100 events each on ic:7, short:7, brief:7
  CHECK(f.last->increments() == 300);
  CHECK(f.last->too_old() == 3);
  CHECK(w->keys == 300);
  CHECK(f.last->Calls("", false).size() == 300);
  CHECK(w->calls == 300);
  CHECK(Buckets(f.server, "ic:7", Spec("ic"))["click"][kNow] == 100);
  CHECK(Buckets(f.server, "brief:7", Spec("brief"))["click"][kNow] == 100);
}

TEST_CASE("counters: a key holds at most keep_s / bucket_s + 1 buckets per type after any write") {
  Fixture f;
  std::mt19937_64 rng(7);
  // short: bucket_s 1, keep_s 5 -> at most 6 buckets per type. Dense writes (every second),
  // sparse ones (gaps longer than keep_s), and future-dated events, over 10 x keep_s and more.
  int64_t now = kNow;
  for (int step = 0; step < 120; ++step) {
    now += step < 40 ? 1 : step < 80 ? 1 + static_cast<int64_t>(rng() % 12) : 0;
    std::vector<Event> events;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      // From now - keep_s to now + 300 s (the route's accepted range), mostly recent.
      const int64_t back =
          rng() % 4 == 0 ? -static_cast<int64_t>(rng() % 300) : static_cast<int64_t>(rng() % 6);
      events.push_back({rng() % 2 ? "click" : "imp", 1, "", 9, 1, (now - back) * 1000 + 500});
    }
    auto w = f.Write(events, now);
    REQUIRE(w.has_value());
    CAPTURE(step);
    size_t slots = 0;
    for (const auto& [type, buckets] : Buckets(f.server, "short:9", Spec("short"), &slots)) {
      CHECK(buckets.size() <= 6);
      // Every bucket a reader can see lies within keep_s of the newest.
      CHECK(buckets.rbegin()->first - buckets.begin()->first <= 5);
    }
    // The key holds at most its ring's 6 buckets (each with every type's sum), in 1 block.
    CHECK(slots <= 6);
    CHECK(f.server.Command({"HLEN", "short:9"})[0].integer() == 1);
  }
  // ic (60 buckets) written sparsely over 10 x keep_s: one event an hour and a half.
  for (int i = 0; i < 10; ++i) {
    const int64_t t = kNow + i * 5400;
    REQUIRE(f.Write({{"imp", 1, "", 11, 1, t * 1000}, {"imp", 1, "", 11, 1, (t - 3599) * 1000}}, t)
                .has_value());
    size_t slots = 0;
    auto held = Buckets(f.server, "ic:11", Spec("ic"), &slots);
    CHECK(held["imp"].size() == 2);
    CHECK(held["imp"].begin()->first >= BucketStart(t - 3600, 60));
    CHECK(slots <= 61);  // keep_s / bucket_s + 1, whatever the sparse writes left behind
    CHECK(f.server.Command({"HLEN", "ic:11"})[0].integer() <= 8);  // ceil(61 / 8) blocks
  }
}

TEST_CASE("counters: a key untouched for keep_s expires") {
  Fixture f;
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  REQUIRE(f.Write({{"click", 1, "", 5, 1, now * 1000}}, now).has_value());
  const int64_t pttl = f.server.Command({"PTTL", "brief:5"})[0].integer();
  CHECK(pttl > 0);
  CHECK(pttl <= 2000);
  CHECK(f.server.Command({"PTTL", "ic:5"})[0].integer() > 3590000);
  CHECK(Eventually(
      [&] {
        return f.server.Command({"EXISTS", "brief:5"})[0].integer() == 0;
      },
      5000));
  CHECK(f.server.Command({"EXISTS", "ic:5"})[0].integer() == 1);
}

TEST_CASE("counters: the TTL is set when a write starts a bucket, not when it adds to one") {
  Fixture f;
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t b = BucketStart(now, 60);  // ic: 60 s buckets kept 3,600 s
  REQUIRE(f.Write({{"click", 1, "", 6, 1, b * 1000}}, now).has_value());
  CHECK(f.server.Command({"PTTL", "ic:6"})[0].integer() > 3590000);  // a new key: started
  // As if time had passed since that write: a write into the same bucket keeps the TTL
  // (the key still lives keep_s past its newest bucket's start)...
  f.server.Command({"PEXPIRE", "ic:6", "1000000"});
  REQUIRE(f.Write({{"click", 1, "", 6, 1, b * 1000 + 5}}, now).has_value());
  const int64_t kept = f.server.Command({"PTTL", "ic:6"})[0].integer();
  CHECK(kept > 0);
  CHECK(kept <= 1000000);
  // ...and one that starts another bucket sets it to keep_s again.
  REQUIRE(f.Write({{"click", 1, "", 6, 1, (b - 60) * 1000}}, now).has_value());
  CHECK(f.server.Command({"PTTL", "ic:6"})[0].integer() > 3590000);
  CHECK(f.server.Command({"HLEN", "ic:6"})[0].integer() >= 1);
}

TEST_CASE("counters: a script Redis lost is sent again with EVAL") {
  Fixture f;
  REQUIRE(f.Write({{"click", 1, "", 3, 1, kNow * 1000}}, kNow).has_value());
  REQUIRE(f.server.Command({"SCRIPT", "FLUSH"})[0].str() == "OK");
  auto w = f.Write({{"click", 1, "", 3, 1, kNow * 1000}, {"imp", 1, "", 4, 1, kNow * 1000}}, kNow);
  REQUIRE(w.has_value());
  CHECK(w->reloaded == 5);  // ic:3, short:3, brief:3, ic:4, short:4
  CHECK(Buckets(f.server, "ic:3", Spec("ic"))["click"][kNow] == 2);
  auto again = f.Write({{"click", 1, "", 3, 1, kNow * 1000}}, kNow);
  REQUIRE(again.has_value());
  CHECK(again->reloaded == 0);
}

TEST_CASE(
    "counters: an error reply fails the write naming the endpoint; the key only in the detail") {
  Fixture f;
  REQUIRE(f.server.Command({"SET", "ic:8", "not a hash"})[0].str() == "OK");
  auto w = f.Write({{"click", 1, "", 8, 1, kNow * 1000}}, kNow);
  REQUIRE_FALSE(w.has_value());
  CHECK(w.error().code == ErrorCode::kBackendError);
  CHECK(w.error().message.find("redis_default") != std::string::npos);
  CHECK(w.error().message.find("ic:8") == std::string::npos);
  CHECK(w.error().detail.find("ic:8") != std::string::npos);
  CHECK(w.error().detail.find("WRONGTYPE") != std::string::npos);
}

TEST_CASE(
    "counters: a block that is not whole slots, or a sum not finite, nulls the fields it feeds") {
  Fixture f;
  const CounterRing ring(Spec("ic"));  // slots: index, then imp, click, dwell
  const uint32_t now = static_cast<uint32_t>(kNow / 60);
  auto slot = [&](uint32_t index, double imp, double click) {
    std::string s(ring.slot_bytes, '\0');
    std::memcpy(s.data(), &index, 4);
    std::memcpy(s.data() + 4, &imp, 8);
    std::memcpy(s.data() + 12, &click, 8);
    return s;
  };
  auto put = [&](const std::string& key, uint32_t index, const std::string& bytes) {
    // The bytes at the index's offset within its block (earlier slots empty).
    const std::string block(ring.Offset(index), '\0');
    REQUIRE(f.server.Command({"HSET", key, RingField(ring.Block(index)), block + bytes})[0]
                .is_integer());
  };
  const uint64_t before = TestSchema().Find("ic")->values->unparsable_field.load();
  put("ic:1", now, slot(now, 2, 1) + "x");  // not whole slots
  put("ic:2", now, slot(now, std::nan(""), 1));
  put("ic:3", now, slot(now, 2, 1));
  put("ic:4", now, slot(now - 61, 5, 5));  // a bucket a whole ring older: dead, not counted
  auto rows =
      f.Read("features", "ic", {"imps_10m", "clicks_1h"}, {Items({1, 2, 3, 4})}, kNow * 1000);
  REQUIRE(rows.has_value());
  CHECK(IsNull(rows->column("imps_10m")->Get(0)));
  CHECK(IsNull(rows->column("clicks_1h")->Get(0)));
  CHECK(IsNull(rows->column("imps_10m")->Get(1)));
  CHECK(std::get<double>(rows->column("clicks_1h")->Get(1)) == 1);  // its own sum is fine
  CHECK(std::get<double>(rows->column("imps_10m")->Get(2)) == 2);
  CHECK(std::get<double>(rows->column("clicks_1h")->Get(2)) == 1);
  CHECK(std::get<double>(rows->column("imps_10m")->Get(3)) == 0);
  CHECK(TestSchema().Find("ic")->values->unparsable_field.load() == before + 3);
}

TEST_CASE("counters: a plan reads them at its request's ts_ms; viewer needs a family by user") {
  Fixture f;
  REQUIRE(
      f.Write({{"click", 1, "", 2, 1, (kNow - 30) * 1000}, {"imp", 1, "", 2, 1, kNow * 1000}}, kNow)
          .has_value());
  constexpr std::string_view kPlan = R"({"schema_version": 1, "name": "cnt", "params": {},
    "nodes": [{"node_id": "s", "op": "fixed_source", "params": {"count": 2}},
              {"node_id": "f", "op": "features", "inputs": ["s"],
               "params": {"family": "ic", "fields": ["clicks_1h", "ctr_30m"]}}],
    "output": {"node": "f"}})";
  auto plan =
      LoadPlanText(kPlan, "cnt.plan.json", TaskRegistry::WithTestOps(), nullptr, TestSchemaPtr());
  REQUIRE_MESSAGE(plan.has_value(), plan.error().message);
  ThreadPool pool(1, "test-cpu");
  ExecEnv env{.loop = &f.shard->loop(), .pool = &pool, .redis = &f.shard->pools()};
  // At kNow both events count; an hour and a minute later neither does.
  for (auto [ts_s, clicks] : {std::pair{kNow, 1.0}, {kNow + 3660, 0.0}}) {
    RunRequest req;
    req.plan = *plan;
    req.user_id = int64_t{1};
    req.deadline = Clock::now() + std::chrono::seconds(10);
    req.ts_ms = ts_s * 1000;
    auto r = RunSync(f.shard->loop(), RunPlan(env, std::move(req)));
    pool.WaitIdle();
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    REQUIRE(r->output.size() == 2);
    CHECK(std::get<double>(r->output.column("clicks_1h")->Get(1)) == clicks);
    CHECK(std::get<double>(r->output.column("ctr_30m")->Get(1)) == (clicks + 1) / (clicks + 11));
    CHECK(std::get<double>(r->output.column("clicks_1h")->Get(0)) == 0);
  }
  auto viewer = LoadPlanText(R"({"schema_version": 1, "name": "v", "params": {},
    "nodes": [{"node_id": "v", "op": "viewer", "params": {"family": "ic"}}], "output": {"node": "v"}})",
                             "v.plan.json", TaskRegistry::WithTestOps(), nullptr, TestSchemaPtr());
  REQUIRE_FALSE(viewer.has_value());
  CHECK(viewer.error().message.find("node 'v'") != std::string::npos);
  CHECK(viewer.error().message.find("family 'ic' (counters) counts by item") != std::string::npos);
}
