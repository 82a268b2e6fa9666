// The Redis-backed tasks (viewer, follow, recommendation, media, features,
// seen_filter) against hand-built data in a real redis-server: typed columns, missing
// keys, wrong key types (backend_error naming the key), unparsable fields (null and
// counted), one batch per task, and the transport errors.
#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <map>
#include <utility>

#include "cache/cache_sink.h"
#include "cache/shard_cache.h"
#include "data/column_builder.h"
#include "redis_server.h"
#include "tasks/cache_families.h"
#include "tasks/task.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;

namespace {

bool Contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// The redis-server's process id, from INFO.
pid_t ServerPid(const RedisServer& server) {
  const std::string info(server.Command({"INFO", "server"})[0].str());
  size_t at = info.find("process_id:");
  REQUIRE(at != std::string::npos);
  return static_cast<pid_t>(std::stol(info.substr(at + 11)));
}

// The state letter of /proc/PID/stat ('T' once stopped by SIGSTOP), or 0.
char ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');  // the command name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : 0;
}

const TaskRegistry& IoRegistry() {
  static const TaskRegistry* r = [] {
    auto* reg = new TaskRegistry;
    RegisterBuiltinOps(*reg);
    return reg;
  }();
  return *r;
}

RowSet Ids(PoolVector<int64_t> ids) {
  RowSet r;
  r.SetColumn("id", std::make_shared<const Column>(Column::I64(std::move(ids))));
  return r;
}

std::vector<int64_t> IdsOf(const RowSet& r) {
  std::vector<int64_t> out;
  const Column* c = r.column("id");
  for (size_t i = 0; i < r.size(); ++i) out.push_back(c->i64[r.row(i)]);
  return out;
}

// The value of column `col` at logical row `i`.
Value At(const RowSet& r, std::string_view col, size_t i) {
  const Column* c = r.column(col);
  REQUIRE(c != nullptr);
  return c->Get(r.row(i));
}

// Runs one IO task as the scheduler would: on the loop, with a context that outlives
// the run.
Result<RowSet> RunIo(TestShard& shard, const std::string& op, std::map<std::string, Value> given,
                     RowSets inputs, int64_t user_id = 1, int deadline_ms = 5000,
                     ShardCache* cache = nullptr, CacheLookups* lookups = nullptr,
                     const SchemaPtr& schema = nullptr, int64_t now_ms = 0) {
  const TaskSpec* spec = IoRegistry().Find(op);
  REQUIRE(spec != nullptr);
  PlanNode node;
  node.id = "n_" + op;
  node.op = op;
  node.schema = spec;
  TaskArgs args(&spec->params);
  for (size_t i = 0; i < spec->params.size(); ++i) {
    auto it = given.find(spec->params[i].name);
    args.at(i) = it != given.end() ? it->second : spec->params[i].default_value;
  }
  TaskContext ctx;
  ctx.loop = &shard.loop();
  ctx.redis = &shard.pools();
  ctx.cache = cache;
  ctx.cache_lookups = lookups;
  ctx.user_id = {user_id, {}};
  if (std::any_of(spec->params.begin(), spec->params.end(),
                  [](const TaskParamSpec& p) { return p.name == "family"; }))
    node.family = (schema ? schema : DemoSchema())->Find(args.Str("family"));
  ctx.now_ms = now_ms;
  ctx.node = &node;
  ctx.args = &args;
  ctx.deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  ctx.request_deadline = ctx.deadline;
  return RunSync(shard.loop(), spec->run_async(ctx, std::move(inputs)));
}

struct Fixture {
  RedisServer server;
  std::unique_ptr<TestShard> shard;
  Fixture(const std::string& query = "") {
    REQUIRE(server.Start());
    shard = std::make_unique<TestShard>(std::vector<std::string>{server.flag() + query});
    REQUIRE(shard->WaitReady());
  }
  void Cmd(const std::vector<std::string>& args) {
    REQUIRE_FALSE(server.Command(args)[0].is_error());
  }
  const RedisStats& stats() { return shard->pool().stats(); }
  // A demo family's value counter (FamilyValueStats, process-wide) since the fixture began.
  uint64_t Values(const std::string& family, std::atomic<uint64_t> FamilyValueStats::*kind) {
    return Read(DemoSchema()->Find(family)->values->*kind) - start_.at(family + KindName(kind));
  }

 private:
  static std::string KindName(std::atomic<uint64_t> FamilyValueStats::*kind) {
    return kind == &FamilyValueStats::missing_field      ? "/missing"
           : kind == &FamilyValueStats::unparsable_field ? "/unparsable"
           : kind == &FamilyValueStats::bad_id           ? "/bad_id"
                                                         : "/bad_json";
  }
  std::map<std::string, uint64_t> start_ = [] {
    std::map<std::string, uint64_t> m;
    for (const KeyFamily& fam : DemoSchema()->families)
      for (auto kind : {&FamilyValueStats::missing_field, &FamilyValueStats::unparsable_field,
                        &FamilyValueStats::bad_id, &FamilyValueStats::bad_json})
        m[fam.name + KindName(kind)] = Read(fam.values->*kind);
    return m;
  }();
};

}  // namespace

TEST_CASE("viewer: HGETALL user:{uid} gives one typed row; a missing user zero rows") {
  Fixture f;
  f.Cmd(
      {"HSET", "user:7", "country", "FR", "lang", "fr", "age", "31", "premium", "1", "extra", "x"});
  auto r = RunIo(*f.shard, "viewer", {}, {}, 7);
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 1);
  CHECK(std::get<int64_t>(At(*r, "id", 0)) == 7);
  CHECK(std::get<std::string>(At(*r, "country", 0)) == "FR");
  CHECK(std::get<std::string>(At(*r, "lang", 0)) == "fr");
  CHECK(std::get<int64_t>(At(*r, "age", 0)) == 31);
  CHECK(std::get<int64_t>(At(*r, "premium", 0)) == 1);
  CHECK(r->column("extra") == nullptr);

  auto none = RunIo(*f.shard, "viewer", {}, {}, 8);
  REQUIRE(none.has_value());
  CHECK(none->size() == 0);
  CHECK(none->column("country") != nullptr);
  CHECK(none->column("age")->type == ColumnType::kI64);
}

TEST_CASE("viewer: missing and unparsable fields are null and counted") {
  Fixture f;
  f.Cmd({"HSET", "user:1", "country", "US", "age", "31.5", "premium", " 1"});
  auto r = RunIo(*f.shard, "viewer", {}, {}, 1);
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 1);
  CHECK(std::get<std::string>(At(*r, "country", 0)) == "US");
  CHECK(IsNull(At(*r, "lang", 0)));
  CHECK(IsNull(At(*r, "age", 0)));
  CHECK(IsNull(At(*r, "premium", 0)));
  CHECK(f.Values("user", &FamilyValueStats::missing_field) == 1);
  CHECK(f.Values("user", &FamilyValueStats::unparsable_field) == 2);
}

TEST_CASE(
    "viewer: a user key of the wrong type is a backend_error; key and Redis text only in the "
    "detail") {
  Fixture f;
  f.Cmd({"SET", "user:5", "not a hash"});
  auto r = RunIo(*f.shard, "viewer", {}, {}, 5);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kBackendError);
  CHECK(Contains(r.error().detail, "HGETALL user:5"));
  CHECK(Contains(r.error().detail, "WRONGTYPE"));
  CHECK(Contains(r.error().message, "redis_default"));
  CHECK(Contains(r.error().message, "HGETALL"));
  CHECK_FALSE(Contains(r.error().message, "user:5"));
  CHECK_FALSE(Contains(r.error().message, "WRONGTYPE"));
  CHECK_FALSE(Contains(r.error().message, "127.0.0.1"));
}

TEST_CASE("follow and recommendation: LRANGE 0 fanout-1 per input row, in input order") {
  Fixture f;
  f.Cmd({"RPUSH", "follow:1", "10", "11", "12"});
  f.Cmd({"RPUSH", "follow:2", "20", "oops", "21"});
  f.Cmd({"RPUSH", "recs:1", "100", "101", "102", "103"});
  auto r = RunIo(*f.shard, "follow", {{"fanout", int64_t{2}}}, {Ids({1, 3, 2})});
  REQUIRE(r.has_value());
  CHECK(IdsOf(*r) == std::vector<int64_t>{10, 11, 20});
  CHECK(f.Values("follow", &FamilyValueStats::bad_id) == 1);  // "oops" dropped

  auto all = RunIo(*f.shard, "follow", {{"fanout", int64_t{100}}}, {Ids({2})});
  REQUIRE(all);
  CHECK(IdsOf(*all) == std::vector<int64_t>{20, 21});

  auto recs = RunIo(*f.shard, "recommendation", {{"fanout", int64_t{3}}}, {Ids({1})});
  REQUIRE(recs);
  CHECK(IdsOf(*recs) == std::vector<int64_t>{100, 101, 102});

  auto empty = RunIo(*f.shard, "follow", {}, {Ids({})});
  REQUIRE(empty);
  CHECK(empty->size() == 0);
}

TEST_CASE("follow: a list key of the wrong type is a backend_error naming the key") {
  Fixture f;
  f.Cmd({"RPUSH", "follow:1", "10"});
  f.Cmd({"SADD", "follow:2", "20"});
  auto r = RunIo(*f.shard, "follow", {}, {Ids({1, 2})});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kBackendError);
  CHECK(Contains(r.error().detail, "LRANGE follow:2"));
  CHECK(Contains(r.error().detail, "WRONGTYPE"));
}

TEST_CASE("media over 100 authors: one batch, one write; id and author columns") {
  Fixture f;
  for (int a = 1; a <= 100; ++a)
    f.Cmd({"RPUSH", "media:" + std::to_string(a), std::to_string(a * 1000 + 1),
           std::to_string(a * 1000 + 2), std::to_string(a * 1000 + 3)});
  PoolVector<int64_t> authors;
  for (int a = 1; a <= 100; ++a) authors.push_back(a);
  uint64_t batches0 = Read(f.stats().batches), writes0 = Read(f.stats().socket_writes),
           commands0 = Read(f.stats().commands);
  auto r = RunIo(*f.shard, "media", {{"per_author", int64_t{2}}}, {Ids(authors)});
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 200);
  CHECK(Read(f.stats().batches) - batches0 == 1);
  CHECK(Read(f.stats().socket_writes) - writes0 == 1);
  CHECK(Read(f.stats().commands) - commands0 == 100);
  CHECK(std::get<int64_t>(At(*r, "id", 0)) == 1001);
  CHECK(std::get<int64_t>(At(*r, "author", 0)) == 1);
  CHECK(std::get<int64_t>(At(*r, "id", 199)) == 100002);
  CHECK(std::get<int64_t>(At(*r, "author", 199)) == 100);
}

TEST_CASE("features: HMGET per row, typed columns added or replaced, null where missing") {
  Fixture f;
  f.Cmd({"HSET", "item:1", "likes", "12", "quality", "0.5", "category", "music", "nsfw", "0"});
  f.Cmd({"HSET", "item:2", "likes", "many", "quality", "1e999", "category", "news"});
  // item:3 does not exist.
  RowSet in = Ids({1, 2, 3});
  in.SetColumn("likes", std::make_shared<const Column>(Column::F64({9.0, 9.0, 9.0})));  // replaced
  in.SetColumn("score", std::make_shared<const Column>(Column::F64({0.1, 0.2, 0.3})));  // kept
  auto r =
      RunIo(*f.shard, "features",
            {{"fields", std::vector<std::string>{"likes", "quality", "category", "nsfw"}}}, {in});
  REQUIRE(r.has_value());
  REQUIRE(r->size() == 3);
  CHECK(r->column("likes")->type == ColumnType::kI64);
  CHECK(r->column("quality")->type == ColumnType::kF64);
  CHECK(r->column("category")->type == ColumnType::kStr);
  CHECK(std::get<int64_t>(At(*r, "likes", 0)) == 12);
  CHECK(std::get<double>(At(*r, "quality", 0)) == 0.5);
  CHECK(std::get<std::string>(At(*r, "category", 0)) == "music");
  CHECK(std::get<int64_t>(At(*r, "nsfw", 0)) == 0);
  CHECK(IsNull(At(*r, "likes", 1)));    // "many"
  CHECK(IsNull(At(*r, "quality", 1)));  // out of range
  CHECK(std::get<std::string>(At(*r, "category", 1)) == "news");
  CHECK(IsNull(At(*r, "nsfw", 1)));  // missing field
  for (auto col : {"likes", "quality", "category", "nsfw"}) CHECK(IsNull(At(*r, col, 2)));
  CHECK(std::get<double>(At(*r, "score", 2)) == 0.3);
  CHECK(f.Values("item", &FamilyValueStats::unparsable_field) == 2);
  CHECK(f.Values("item", &FamilyValueStats::missing_field) == 5);
  // The numeric columns are written in place (not by ColumnBuilder): the same Column as
  // the builder makes, nulls holding 0.
  ColumnBuilder likes(ColumnType::kI64, 3);
  likes.AppendI64(12);
  likes.AppendNulls(2);
  const Column want = std::move(likes).Finish();
  const Column& got = *r->column("likes");
  CHECK(std::vector<int64_t>(got.i64.begin(), got.i64.end()) ==
        std::vector<int64_t>(want.i64.begin(), want.i64.end()));
  for (uint32_t row = 0; row < 3; ++row) CHECK(got.valid(row) == want.valid(row));
}

TEST_CASE("features keeps the input's selection and asks only about selected rows") {
  Fixture f;
  f.Cmd({"HSET", "item:3", "likes", "3"});
  f.Cmd({"HSET", "item:1", "likes", "1"});
  RowSet in = Ids({1, 2, 3}).WithSelection({2, 0});
  uint64_t commands0 = Read(f.stats().commands);
  auto r = RunIo(*f.shard, "features", {{"fields", std::vector<std::string>{"likes"}}}, {in});
  REQUIRE(r.has_value());
  CHECK(Read(f.stats().commands) - commands0 == 2);
  CHECK(IdsOf(*r) == std::vector<int64_t>{3, 1});
  CHECK(std::get<int64_t>(At(*r, "likes", 0)) == 3);
  CHECK(std::get<int64_t>(At(*r, "likes", 1)) == 1);
}

TEST_CASE("features asks once per distinct id; every row with that id gets the values") {
  Fixture f;
  f.Cmd({"HSET", "item:7", "likes", "70"});
  f.Cmd({"HSET", "item:8", "likes", "80"});
  RowSet in = Ids({7, 8, 7, 7, 9, 8});  // item:9 does not exist
  uint64_t commands0 = Read(f.stats().commands);
  auto r = RunIo(*f.shard, "features", {{"fields", std::vector<std::string>{"likes"}}}, {in});
  REQUIRE(r.has_value());
  CHECK(Read(f.stats().commands) - commands0 == 3);
  CHECK(IdsOf(*r) == std::vector<int64_t>{7, 8, 7, 7, 9, 8});
  for (size_t i : {0, 2, 3}) CHECK(std::get<int64_t>(At(*r, "likes", i)) == 70);
  for (size_t i : {1, 5}) CHECK(std::get<int64_t>(At(*r, "likes", i)) == 80);
  CHECK(IsNull(At(*r, "likes", 4)));
  CHECK(f.Values("item", &FamilyValueStats::missing_field) == 1);  // per row that shows it
}

TEST_CASE("features: an item key of the wrong type is a backend_error naming the key") {
  Fixture f;
  f.Cmd({"RPUSH", "item:9", "x"});
  auto r = RunIo(*f.shard, "features", {{"fields", std::vector<std::string>{"likes"}}}, {Ids({9})});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kBackendError);
  CHECK(Contains(r.error().detail, "HMGET item:9"));
}

TEST_CASE("seen_filter: one SMISMEMBER drops the seen rows, order kept") {
  Fixture f;
  f.Cmd({"SADD", "seen:42", "2", "4", "99"});
  uint64_t commands0 = Read(f.stats().commands);
  auto r = RunIo(*f.shard, "seen_filter", {}, {Ids({5, 4, 3, 2, 1})}, 42);
  REQUIRE(r.has_value());
  CHECK(IdsOf(*r) == std::vector<int64_t>{5, 3, 1});
  CHECK(Read(f.stats().commands) - commands0 == 1);

  auto nobody = RunIo(*f.shard, "seen_filter", {}, {Ids({1, 2})}, 43);  // no seen set
  REQUIRE(nobody);
  CHECK(IdsOf(*nobody) == std::vector<int64_t>{1, 2});

  auto empty = RunIo(*f.shard, "seen_filter", {}, {Ids({})}, 42);
  REQUIRE(empty);
  CHECK(Read(f.stats().commands) - commands0 == 2);  // none for the empty input

  f.Cmd({"SET", "seen:44", "x"});
  auto wrong = RunIo(*f.shard, "seen_filter", {}, {Ids({1})}, 44);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == ErrorCode::kBackendError);
  CHECK(Contains(wrong.error().detail, "SMISMEMBER seen:44"));
}

TEST_CASE("seen_filter on a zset: one ZMSCORE; within_s counts only recent scores") {
  Fixture f;
  auto schema = ParseSchema(R"({"schema_version": 1, "families": {
    "seen": {"type": "zset", "key": "z:{id}"}}})",
                            "schema.json");
  REQUIRE(schema.has_value());
  const int64_t now = 1'700'000'000'000;
  // 2: just inside 60 s; 4: exactly 60 s old (not within: the window is open at its start);
  // 99: not an input.
  f.Cmd({"ZADD", "z:42", std::to_string(now - 59'999), "2", std::to_string(now - 60'000), "4",
         std::to_string(now + 5), "5", "1", "99"});
  auto run = [&](std::map<std::string, Value> given, int64_t user) {
    return RunIo(*f.shard, "seen_filter", std::move(given), {Ids({5, 4, 3, 2, 1})}, user, 5000,
                 nullptr, nullptr, *schema, now);
  };
  uint64_t commands0 = Read(f.stats().commands);
  auto all = run({}, 42);
  REQUIRE(all.has_value());
  CHECK(IdsOf(*all) == std::vector<int64_t>{3, 1});
  CHECK(Read(f.stats().commands) - commands0 == 1);
  auto recent = run({{"within_s", int64_t{60}}}, 42);
  REQUIRE(recent.has_value());
  CHECK(IdsOf(*recent) == std::vector<int64_t>{4, 3, 1});
  auto nobody = run({{"within_s", int64_t{60}}}, 43);  // no key
  REQUIRE(nobody);
  CHECK(IdsOf(*nobody) == std::vector<int64_t>{5, 4, 3, 2, 1});
  f.Cmd({"SADD", "z:44", "1"});
  auto wrong = run({}, 44);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == ErrorCode::kBackendError);
  CHECK(Contains(wrong.error().detail, "ZMSCORE z:44"));
}

TEST_CASE("keys are read under the endpoint's prefix") {
  Fixture f("?prefix=t1:");
  f.Cmd({"RPUSH", "t1:follow:1", "5"});
  f.Cmd({"RPUSH", "follow:1", "6"});
  auto r = RunIo(*f.shard, "follow", {}, {Ids({1})});
  REQUIRE(r);
  CHECK(IdsOf(*r) == std::vector<int64_t>{5});
}

TEST_CASE("an unreachable or unknown endpoint is unavailable, naming it") {
  TestShard shard({"redis_default=redis://127.0.0.1:" + std::to_string(FreeLoopbackPort())},
                  {.connections_per_endpoint = 1});
  // Let the first attempt fail so that the error says why.
  REQUIRE(Eventually([&] {
    return shard.OnLoop(
        [&] { return shard.pools().NotReadyReason().find("refused") != std::string::npos; });
  }));
  auto r = RunIo(shard, "follow", {}, {Ids({1})});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnavailable);
  CHECK(Contains(r.error().message, "redis endpoint redis_default"));

  auto unknown = RunIo(shard, "follow", {{"endpoint", std::string("elsewhere")}}, {Ids({1})});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == ErrorCode::kUnavailable);
  CHECK(Contains(unknown.error().message, "'elsewhere' is not configured"));
}

TEST_CASE("a slow Redis against the node's deadline: deadline_exceeded") {
  Fixture f;
  f.Cmd({"RPUSH", "follow:1", "10"});
  pid_t pid = ServerPid(f.server);
  uint64_t late0 = Read(f.stats().late_replies);
  // A stopped redis-server answers nothing until SIGCONT (the kernel still takes the
  // request's bytes), however long the run takes: only the deadline can end it.
  REQUIRE(kill(pid, SIGSTOP) == 0);
  REQUIRE(Eventually([&] { return ProcessState(pid) == 'T'; }));
  auto r = RunIo(*f.shard, "follow", {}, {Ids({1})}, 1, /*deadline_ms=*/50);
  REQUIRE(kill(pid, SIGCONT) == 0);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(Contains(r.error().detail, "LRANGE follow:1"));
  // The LRANGE was sent and its answer comes once the server runs again.
  CHECK(Eventually([&] { return Read(f.stats().late_replies) == late0 + 1; }));
}

namespace {
// A fixture whose shard also has a cache fed by its endpoint's invalidations.
struct CachedFixture : Fixture {
  // The cache's clock in ms: the test moves it (the cache reads it on the shard's loop).
  std::atomic<uint64_t> now_ms{1000};
  std::unique_ptr<ShardCache> cache;
  std::unique_ptr<CacheSink> sink;
  TrackingMode mode;
  explicit CachedFixture(TrackingMode mode = TrackingMode::kBcast) : mode(mode) {
    shard->OnLoop([&] {
      cache = std::make_unique<ShardCache>(ShardCache::Options{.budget_bytes = 1 << 20},
                                           [this] { return now_ms.load(); });
      cache->SetFamilies(CacheFamiliesOf(*DemoSchema()));
      sink = std::make_unique<CacheSink>(*cache, 0);
      TrackingConfig config;
      config.sink = sink.get();
      config.mode = mode;
      config.bcast_prefixes = TrackingPrefixesOf(*DemoSchema());
      shard->pool().EnableTracking(config);
    });
    WaitTracking();
  }
  // Until the endpoint's tracking is ready (reads are looked up and stored only then).
  void WaitTracking() {
    REQUIRE(
        Eventually([&] { return shard->OnLoop([&] { return shard->pool().tracking_ready(); }); }));
  }
  ~CachedFixture() { shard.reset(); }  // the pools go before the sink and the cache
  // Cmd, then (BCAST tracking) until the write's invalidation has reached the cache: it
  // travels on the tracking connection, so it may otherwise arrive after a read that
  // follows on a data connection has stored the key, and evict that entry. (Default
  // tracking only tells of keys this client read: a write before the first read sends
  // nothing.)
  void Write(std::vector<std::string> args) {
    const uint64_t before = shard->OnLoop([&] { return Read(cache->stats().invalidations); });
    Cmd(std::move(args));
    if (mode == TrackingMode::kBcast)
      REQUIRE(Eventually([&] { return Read(cache->stats().invalidations) > before; }));
  }
  // Runs `op` with cache: true; returns its rows and what it looked up.
  std::pair<RowSet, CacheLookups> Run(const std::string& op, std::map<std::string, Value> given,
                                      RowSets inputs, int64_t user_id = 1) {
    given["cache"] = true;
    CacheLookups lookups;
    auto r = RunIo(*shard, op, std::move(given), std::move(inputs), user_id, 5000, cache.get(),
                   &lookups);
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    return {std::move(*r), lookups};
  }
};
}  // namespace

TEST_CASE("cached reads: the same rows as uncached, a warm cache sends nothing, a write is seen") {
  TrackingMode mode = TrackingMode::kBcast;
  SUBCASE("bcast") { mode = TrackingMode::kBcast; }
  SUBCASE("default") { mode = TrackingMode::kDefault; }
  CachedFixture f(mode);
  f.Write({"HSET", "user:7", "country", "FR", "age", "31"});
  f.Write({"RPUSH", "media:1", "10", "x", "11", "12"});  // "x" is not an id
  f.Write({"RPUSH", "media:2", "20"});
  f.Write({"HSET", "item:10", "likes", "5", "category", "news"});
  f.Write({"HSET", "item:11", "likes", "oops"});
  f.Write({"HSET", "item:13", "likes", "1", "category", "longer than a cell"});
  const std::vector<std::string> fields = {"likes", "category"};

  auto uncached_media = RunIo(*f.shard, "media", {{"per_author", int64_t{3}}}, {Ids({1, 2, 1})});
  REQUIRE(uncached_media.has_value());
  auto [cold, cold_lookups] = f.Run("media", {{"per_author", int64_t{3}}}, {Ids({1, 2, 1})});
  CHECK(IdsOf(cold) == IdsOf(*uncached_media));
  CHECK(cold_lookups.misses == 3);
  uint64_t commands = Read(f.stats().commands);
  auto [warm, warm_lookups] = f.Run("media", {{"per_author", int64_t{3}}}, {Ids({1, 2, 1})});
  CHECK(IdsOf(warm) == IdsOf(*uncached_media));
  CHECK(warm_lookups.hits == 3);
  CHECK(warm_lookups.misses == 0);
  CHECK(Read(f.stats().commands) == commands);  // nothing sent
  // A shorter head is served from the cached one; a longer one is asked for.
  auto [shorter, shorter_lookups] = f.Run("media", {{"per_author", int64_t{1}}}, {Ids({1})});
  CHECK(IdsOf(shorter) == std::vector<int64_t>{10});
  CHECK(shorter_lookups.hits == 1);
  auto [longer, longer_lookups] = f.Run("media", {{"per_author", int64_t{10}}}, {Ids({1})});
  CHECK(IdsOf(longer) == std::vector<int64_t>{10, 11, 12});
  CHECK(longer_lookups.misses == 1);

  // features: a hit needs every field asked for; missing and unparsable stay null.
  auto [items, items_lookups] = f.Run("features", {{"fields", fields}}, {Ids({10, 11, 10})});
  CHECK(items_lookups.misses == 2);  // distinct ids
  auto [items2, items2_lookups] = f.Run("features", {{"fields", fields}}, {Ids({10, 11})});
  CHECK(items2_lookups.hits == 2);
  CHECK(std::get<int64_t>(At(items2, "likes", 0)) == 5);
  CHECK(IsNull(At(items2, "likes", 1)));
  CHECK(std::get<std::string>(At(items2, "category", 0)) == "news");
  // Hits and a miss (item:12 does not exist) in one run, then all of them hit (the
  // columns then come from the entries, not copied cells): the same rows both times,
  // and as uncached.
  // item:13's category is too long for its cell (kept in the entry's spill).
  auto uncached_items = RunIo(*f.shard, "features", {{"fields", fields}}, {Ids({11, 12, 10, 13})});
  REQUIRE(uncached_items.has_value());
  auto [mixed, mixed_lookups] = f.Run("features", {{"fields", fields}}, {Ids({11, 12, 10, 13})});
  CHECK(mixed_lookups.hits == 2);
  CHECK(mixed_lookups.misses == 2);
  auto [all_hit, all_hit_lookups] =
      f.Run("features", {{"fields", fields}}, {Ids({11, 12, 10, 13})});
  CHECK(all_hit_lookups.hits == 4);
  CHECK(std::get<std::string>(At(all_hit, "category", 3)) == "longer than a cell");
  for (const RowSet* rs : {&mixed, &all_hit}) {
    for (const char* field : {"likes", "category"}) {
      for (size_t row = 0; row < 4; ++row) {
        CAPTURE(field);
        CAPTURE(row);
        CHECK(At(*rs, field, row) == At(*uncached_items, field, row));
      }
    }
  }
  CHECK(std::get<int64_t>(At(all_hit, "likes", 2)) == 5);
  CHECK(IsNull(At(all_hit, "likes", 1)));

  // A write reaches the cache through the tracker: the next read misses and sees it.
  const uint64_t before = f.shard->OnLoop([&] { return Read(f.cache->stats().invalidations); });
  f.Cmd({"HSET", "item:10", "likes", "6"});
  f.Cmd({"LPUSH", "media:2", "21"});
  REQUIRE(Eventually([&] { return Read(f.cache->stats().invalidations) >= before + 2; }));
  auto [items3, items3_lookups] = f.Run("features", {{"fields", fields}}, {Ids({10})});
  CHECK(items3_lookups.misses == 1);
  CHECK(std::get<int64_t>(At(items3, "likes", 0)) == 6);
  auto [media3, media3_lookups] = f.Run("media", {{"per_author", int64_t{3}}}, {Ids({2})});
  CHECK(IdsOf(media3) == std::vector<int64_t>{21, 20});

  // viewer: hit after the first read; a missing user is cached as missing.
  auto [v1, v1_lookups] = f.Run("viewer", {}, {}, 7);
  auto [v2, v2_lookups] = f.Run("viewer", {}, {}, 7);
  CHECK(v2_lookups.hits == 1);
  CHECK(std::get<std::string>(At(v2, "country", 0)) == "FR");
  auto [none, none_lookups] = f.Run("viewer", {}, {}, 99);
  auto [none2, none2_lookups] = f.Run("viewer", {}, {}, 99);
  CHECK(none2.size() == 0);
  CHECK(none2_lookups.hits == 1);
}

TEST_CASE("a key with a TTL in Redis is cached no longer than the key lives") {
  CachedFixture f;
  f.Write({"HSET", "item:1", "likes", "1"});
  f.Write({"PEXPIRE", "item:1", "30000"});  // under the cache's own cap (60 s)
  const std::vector<std::string> fields = {"likes"};
  auto [a, a_lookups] = f.Run("features", {{"fields", fields}}, {Ids({1})});
  CHECK(a_lookups.misses == 1);
  CHECK(std::get<int64_t>(At(a, "likes", 0)) == 1);
  // The read took the key's PTTL (30 s, less the few ms since the PEXPIRE) as the entry's
  // life, on the cache's clock: served from the cache 25 s later, gone at 30 s.
  f.now_ms += 25000;
  auto [b, b_lookups] = f.Run("features", {{"fields", fields}}, {Ids({1})});
  CHECK(b_lookups.hits == 1);
  f.now_ms += 5000;
  // Nothing touched the key in Redis meanwhile (no invalidation): the entry expired on its
  // own, and the key, still in Redis, is read again.
  auto [c, c_lookups] = f.Run("features", {{"fields", fields}}, {Ids({1})});
  CHECK(c_lookups.misses == 1);
  CHECK(std::get<int64_t>(At(c, "likes", 0)) == 1);
}
