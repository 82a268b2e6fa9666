// Plans with Redis through the engine's scheduler: an optional node on a dead endpoint
// fails open (degraded, the request succeeds); the feed plan of plans/ on seeded demo
// data costs one batch per IO node however many rows it fans out to.
#include <doctest/doctest.h>

#include <cstdlib>

#include "core/thread_pool.h"
#include "demo/seed.h"
#include "plan/loader.h"
#include "redis_server.h"
#include "sched/scheduler.h"
#include "test_shard.h"

using namespace rankd;
using namespace rankd::testing;

namespace {

Result<RunResult> Run(TestShard& shard, ThreadPool& pool, PlanPtr plan, int64_t user_id,
                      int deadline_ms = 5000) {
  ExecEnv env{.loop = &shard.loop(),
              .pool = &pool,
              .redis = &shard.pools(),
              .node_timeout_ms = 0,
              .inline_cpu_rows = kInlineCpuRows};
  RunRequest req{.plan = plan,
                 .user_id = user_id,
                 .params = {},
                 .deadline = Clock::now() + std::chrono::milliseconds(deadline_ms),
                 .keep_for_log = false,
                 .cancel = {}};
  auto r = RunSync(shard.loop(), RunPlan(env, std::move(req)));
  pool.WaitIdle();
  return r;
}

std::vector<int64_t> Ids(const RowSet& r) {
  std::vector<int64_t> out;
  const Column* c = r.column("id");
  for (size_t i = 0; i < r.size(); ++i) out.push_back(c->i64[r.row(i)]);
  return out;
}

constexpr const char* kDegradedPlan = R"({
  "schema_version": 1, "name": "fail_open", "params": {},
  "nodes": [
    {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "redis_default"}},
    {"node_id": "f", "op": "follow", "inputs": ["v"], "params": {"endpoint": "redis_default", "fanout": 10}},
    {"node_id": "r", "op": "recommendation", "inputs": ["v"], "params": {"endpoint": "down", "fanout": 10},
     "optional": true},
    {"node_id": "c", "op": "concat", "inputs": ["f", "r"], "params": {}}
  ],
  "output": {"node": "c"}
})";

}  // namespace

TEST_CASE("an optional node on a dead endpoint is degraded and the request succeeds") {
  RedisServer server;
  REQUIRE(server.Start());
  server.Command({"HSET", "user:1", "country", "US"});
  server.Command({"RPUSH", "follow:1", "5", "6"});
  TestShard shard({server.flag(), "down=redis://127.0.0.1:" + std::to_string(FreeLoopbackPort())},
                  {.connections_per_endpoint = 1});
  for (int i = 0; i < 2000 && !shard.OnLoop([&] { return shard.pool().live(); }); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto plan = LoadPlanText(kDegradedPlan, "fail_open.plan.json", TaskRegistry::Default());
  REQUIRE_MESSAGE(plan.has_value(), plan.error().message);
  ThreadPool pool(1, "test-cpu");
  auto r = Run(shard, pool, *plan, 1);
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  CHECK(Ids(r->output) == std::vector<int64_t>{5, 6});
  REQUIRE(r->degraded.size() == 1);
  CHECK((*plan)->nodes[r->degraded[0]].id == "r");
}

TEST_CASE("the feed plan on seeded data: ranked rows, one batch per IO node") {
  RedisServer server;
  REQUIRE(server.Start());
  SeedOptions so;
  so.endpoint = *ParseRedisUrl("seed", server.url());
  so.users = 300;
  so.follows = 50;
  so.media = 10;
  so.recs = 100;
  so.seen = 20;
  so.seed = 5;
  REQUIRE(SeedDemoData(so).has_value());
  const char* root = std::getenv("RANKD_SOURCE_ROOT");
  std::string dir = std::string(root ? root : ".") + "/plans/feed.plan.json";
  auto plan = LoadPlanFile(dir, TaskRegistry::Default());
  REQUIRE_MESSAGE(plan.has_value(), plan.error().message);
  int io_nodes = 0;
  for (const auto& n : (*plan)->nodes) io_nodes += n.schema->is_io ? 1 : 0;

  TestShard shard({server.flag()});
  REQUIRE(shard.WaitReady());
  ThreadPool pool(1, "test-cpu");
  const RedisStats& st = shard.pool().stats();
  uint64_t batches0 = Read(st.batches), commands0 = Read(st.commands);
  auto r = Run(shard, pool, *plan, 7);
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  CHECK(r->degraded.empty());
  CHECK(Read(st.batches) - batches0 == static_cast<uint64_t>(io_nodes));
  CHECK(Read(st.commands) - commands0 > 100);  // the fan-out, in those few batches
  const RowSet& out = r->output;
  REQUIRE(out.size() > 0);
  CHECK(out.size() <= 50);
  const Column* score = out.column("score");
  REQUIRE(score != nullptr);
  for (size_t i = 1; i < out.size(); ++i)
    CHECK(score->f64[out.row(i - 1)] >= score->f64[out.row(i)]);
}
