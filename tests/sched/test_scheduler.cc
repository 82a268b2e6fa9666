// The async DAG scheduler: its test table (with fixed_source, sleep and busy_cpu),
// fail-open optional nodes, fail-fast teardown, per-request params.
#include <doctest/doctest.h>

#include <thread>

#include "core/awaitables.h"
#include "core/timeout.h"
#include "engine_fixture.h"
#include "tasks/schemas.h"

using namespace rankd;
using rankd::test::Engine;
using rankd::test::MustLoad;
using rankd::test::PlanDoc;

namespace {

std::string Sleep(const std::string& id, const std::string& inputs, int ms, bool fail = false,
                  const std::string& extra = "") {
  return R"({"node_id": ")" + id + R"(", "op": "sleep", "inputs": [)" + inputs +
         R"(], "params": {"duration_ms": )" + std::to_string(ms) +
         (fail ? R"(, "fail_after_sleep": true)" : "") + "}" + extra + "}";
}
std::string Busy(const std::string& id, const std::string& inputs, int ms,
                 const std::string& extra = "") {
  return R"({"node_id": ")" + id + R"(", "op": "busy_cpu", "inputs": [)" + inputs +
         R"(], "params": {"duration_ms": )" + std::to_string(ms) + "}" + extra + "}";
}
std::string Fixed(const std::string& id, int count) {
  return R"({"node_id": ")" + id +
         R"(", "op": "fixed_source", "inputs": [], "params": {"count": )" + std::to_string(count) +
         "}}";
}
std::string Concat(const std::string& id, const std::string& inputs) {
  return R"({"node_id": ")" + id + R"(", "op": "concat", "inputs": [)" + inputs + "]}";
}

void CheckTimeout(const Result<RunResult>& r, const std::string& node) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
  CHECK_MESSAGE(r.error().message.find("node '" + node + "'") != std::string::npos,
                r.error().message);
}

const NodeStat& Stat(const RunResult& r, const std::string& id) {
  return r.nodes[static_cast<size_t>(r.plan->node_index(id))];
}

// An async op that ends only when its run is cancelled (it lost the race against its
// deadline): a stage that is certainly still running when the deadline passes, whatever
// the machine's load.
Coro<Result<RowSet>> RunHold(const TaskContext& ctx, RowSets) {
  while (!ctx.cancelled()) co_await SleepMs(*ctx.loop, 1);
  co_return Fail(CancelledError("hold"));
}

// The built-in tasks plus `hold`.
const TaskRegistry& RegistryWithHold() {
  static const TaskRegistry* r = [] {
    auto* reg = new TaskRegistry(/*test_ops_enabled=*/true);
    RegisterBuiltinOps(*reg);
    TaskSpec hold;
    hold.op = "hold";
    hold.max_inputs = 1;
    hold.output = &SchemaSameAsInput;
    hold.kind = RunKind::kAsync;
    hold.run_async = &RunHold;
    reg->Add(std::move(hold));
    return reg;
  }();
  return *r;
}

std::string Hold(const std::string& id, const std::string& inputs) {
  return R"({"node_id": ")" + id + R"(", "op": "hold", "inputs": [)" + inputs + "]}";
}

// Runs `json` (loaded with `hold`) under a deadline `deadline_ms` from the moment the run
// starts on the loop: no delay of the test thread counts against it.
Result<RunResult> RunWithDeadlineFromStart(Engine& e, const std::string& json,
                                           int64_t deadline_ms) {
  auto plan = LoadPlanText(json, "test.plan.json", RegistryWithHold());
  if (!plan) FAIL("plan did not load: " << plan.error().message);
  auto run = [](Engine& e, PlanPtr plan, int64_t deadline_ms) -> Coro<Result<RunResult>> {
    RunRequest req{.plan = std::move(plan),
                   .user_id = 1,
                   .params = {},
                   .deadline = Clock::now() + std::chrono::milliseconds(deadline_ms),
                   .keep_for_log = false,
                   .cancel = {}};
    co_return co_await RunPlan(e.env, std::move(req));
  };
  return RunSync(e.loop, run(e, *plan, deadline_ms));
}

// Waits (bounded) until the loop has no runner left: abandoned work has finished.
void WaitRunnersDone(Engine& e) {
  for (int i = 0; i < 500; ++i) {
    int runners = RunSync(e.loop, [](EventLoop& l) -> Coro<int> { co_return l.runners(); }(e.loop));
    if (runners == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("runners did not finish");
}

}  // namespace

TEST_SUITE("async_scheduler") {
  TEST_CASE("three-branch DAG with concurrent sleep + vm") {
    Engine e;
    auto plan = MustLoad(PlanDoc(
        Fixed("src", 10) + "," + Sleep("a", "\"src\"", 50) + "," + Sleep("b", "\"src\"", 50) +
            R"(, {"node_id": "c", "op": "vm", "inputs": ["src"], "params": {"out_key": "x", "expr": "e0"}},)" +
            Concat("j", R"("a", "b", "c")"),
        "j", "{}",
        R"("expr_table": {"e0": {"op": "*", "args": [{"key": "score"}, {"const": 2}]}},)"));
    auto r = e.Run(plan);
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 30);
    // a and b ran at the same time: each started before the other finished.
    const NodeStat& a = Stat(*r, "a");
    const NodeStat& b = Stat(*r, "b");
    CHECK(b.start_us < a.start_us + a.took_us);
    CHECK(a.start_us < b.start_us + b.took_us);
    CHECK(a.status == NodeStatus::kOk);
    CHECK(Stat(*r, "c").rows == 10);
  }

  TEST_CASE("fault injection - no deadlock or UAF on error") {
    Engine e;
    auto plan = MustLoad(PlanDoc(Sleep("bad", "", 10, true) + "," + Sleep("slow", "", 100) + "," +
                                     Concat("j", R"("bad", "slow")"),
                                 "j"));
    auto r = e.Run(plan);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kInternal);
    CHECK(r.error().message.find("node 'bad' (sleep)") != std::string::npos);
    // Fail-fast: answered before "slow" finished; its state lives on until it does.
    WaitRunnersDone(e);
  }

  TEST_CASE("request deadline exceeded") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 600), "s"), 20), "s");
  }

  TEST_CASE("node timeout on CPU work") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Busy("b", "", 300, R"(, "timeout_ms": 20)"), "b")), "b");
  }

  TEST_CASE("deadline already expired") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Fixed("f", 3), "f"), -5), "f");
  }

  TEST_CASE("very short deadline (1ms)") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 500), "s"), 1), "s");
  }

  TEST_CASE("generous deadline succeeds") {
    Engine e;
    auto r = e.Run(PlanDoc(Fixed("f", 3) + "," + Sleep("s", "\"f\"", 5), "s"), 10000);
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 3);
  }

  TEST_CASE("very short node timeout (1ms)") {
    Engine e;
    e.env.node_timeout_ms = 1;
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 500), "s")), "s");
  }

  TEST_CASE("generous node timeout succeeds") {
    Engine e;
    e.env.node_timeout_ms = 10000;
    auto r = e.Run(PlanDoc(Busy("b", "", 5), "b"));
    REQUIRE(r.has_value());
  }

  TEST_CASE("both deadline and node_timeout set: the node timeout fires first") {
    Engine e;
    auto r = e.Run(PlanDoc(Sleep("s", "", 600, false, R"(, "timeout_ms": 20)"), "s"), 10000);
    CheckTimeout(r, "s");
    CHECK_MESSAGE(r.error().message.find("after 20 ms") != std::string::npos, r.error().message);
  }

  TEST_CASE("multi-stage pipeline timeout") {
    Engine e;
    // The first stage ends at once, the second only when the request deadline cancels it.
    auto r =
        RunWithDeadlineFromStart(e, PlanDoc(Fixed("a", 3) + "," + Hold("b", "\"a\""), "b"), 60);
    CheckTimeout(r, "b");
    WaitRunnersDone(e);
  }

  TEST_CASE("multi-stage pipeline succeeds") {
    Engine e;
    auto r = e.Run(PlanDoc(Sleep("a", "", 5) + "," + Sleep("b", "\"a\"", 5), "b"), 10000);
    REQUIRE(r.has_value());
    CHECK(Stat(*r, "b").start_us >= Stat(*r, "a").start_us + Stat(*r, "a").took_us);
  }

  TEST_CASE("fixed_source only (no CPU offload)") {
    Engine e;
    auto r = e.Run(PlanDoc(Fixed("f", 5), "f"));
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 5);
    CHECK(r->output.column("score")->f64[4] == 5.0);
  }

  TEST_CASE("repeated timeout operations") {
    Engine e;
    auto plan = MustLoad(PlanDoc(Sleep("s", "", 1000), "s"));
    for (int i = 0; i < 5; ++i) CheckTimeout(e.Run(plan, 5), "s");
    WaitRunnersDone(e);
  }

  TEST_CASE("repeated success operations") {
    Engine e;
    auto plan = MustLoad(PlanDoc(Fixed("f", 4) + "," + Sleep("s", "\"f\"", 1), "s"));
    for (int i = 0; i < 10; ++i) {
      auto r = e.Run(plan, 10000);
      REQUIRE(r.has_value());
      CHECK(r->output.size() == 4);
    }
  }

  TEST_CASE("alternating success and timeout") {
    Engine e;
    auto plan = MustLoad(PlanDoc(Sleep("s", "", 40), "s"));
    for (int i = 0; i < 6; ++i) {
      if (i % 2) {
        CheckTimeout(e.Run(plan, 2), "s");
      } else {
        CHECK(e.Run(plan, 10000).has_value());
      }
    }
    WaitRunnersDone(e);
  }

  TEST_CASE("sleep respects request deadline") {
    Engine e;
    auto t0 = Clock::now();
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 1500), "s"), 30), "s");
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(1200));  // did not wait the sleep out
  }

  TEST_CASE("sleep respects node timeout") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 600, false, R"(, "timeout_ms": 10)"), "s")), "s");
  }

  TEST_CASE("late completion increments counter") {
    Engine e;
    uint64_t before = LateCompletions().load();
    CheckTimeout(e.Run(PlanDoc(Busy("b", "", 60, R"(, "timeout_ms": 5)"), "b")), "b");
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 60, false, R"(, "timeout_ms": 5)"), "s")), "s");
    e.pool.WaitIdle();
    WaitRunnersDone(e);
    for (int i = 0; i < 200 && LateCompletions().load() < before + 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(LateCompletions().load() >= before + 2);
  }

  TEST_CASE("mixed async+CPU pipeline timeout (async)") {
    Engine e;
    CheckTimeout(e.Run(PlanDoc(Sleep("s", "", 600) + "," + Busy("b", "\"s\"", 5), "b"), 30), "s");
  }

  TEST_CASE("mixed async+CPU pipeline timeout (CPU)") {
    Engine e;
    // The async stage ends at once (a zero sleep does not suspend): only the CPU stage can
    // be running when the deadline passes.
    CheckTimeout(RunWithDeadlineFromStart(
                     e, PlanDoc(Sleep("s", "", 0) + "," + Busy("b", "\"s\"", 400), "b"), 60),
                 "b");
    WaitRunnersDone(e);
  }

  TEST_CASE("mixed async+CPU pipeline succeeds") {
    Engine e;
    auto r = e.Run(
        PlanDoc(Fixed("f", 2) + "," + Sleep("s", "\"f\"", 5) + "," + Busy("b", "\"s\"", 5), "b"),
        10000);
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 2);
  }

  TEST_CASE("parallel async tasks both respect deadline") {
    Engine e;
    auto t0 = Clock::now();
    auto r = e.Run(PlanDoc(Sleep("a", "", 1500) + "," + Sleep("b", "", 1500) + "," +
                               Concat("j", R"("a", "b")"),
                           "j"),
                   30);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kDeadlineExceeded);
    CHECK(Clock::now() - t0 < std::chrono::milliseconds(1200));
    WaitRunnersDone(e);
  }

}  // TEST_SUITE

TEST_SUITE("fail_open") {
  TEST_CASE("an optional node that fails or times out is degraded, the request goes on") {
    Engine e;
    auto plan = MustLoad(
        PlanDoc(Fixed("f", 3) + "," + Sleep("bad", "", 1, true, R"(, "optional": true)") + "," +
                    Sleep("slow", "", 600, false, R"(, "optional": true, "timeout_ms": 10)") + "," +
                    Concat("j", R"("f", "bad", "slow")"),
                "j"));
    auto r = e.Run(plan, 10000);
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 3);
    REQUIRE(r->degraded.size() == 2);
    CHECK(Stat(*r, "bad").status == NodeStatus::kFailed);
    CHECK(Stat(*r, "slow").status == NodeStatus::kTimeout);
    CHECK(Stat(*r, "f").status == NodeStatus::kOk);
    WaitRunnersDone(e);
  }

  TEST_CASE("a required failure skips the nodes after it") {
    Engine e;
    auto plan =
        MustLoad(PlanDoc(Sleep("bad", "", 1, true) + "," + Sleep("next", "\"bad\"", 1), "next"));
    auto r = e.Run(plan);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find("node 'bad'") != std::string::npos);
  }

}  // TEST_SUITE

TEST_SUITE("request_params") {
  const char* kTakePlan = R"({"schema_version": 1, "name": "t",
  "params": {"limit": {"type": "i64", "default": 5, "min": 1, "max": 100000}},
  "nodes": [{"node_id": "f", "op": "fixed_source", "params": {"count": 50}},
            {"node_id": "t", "op": "take", "inputs": ["f"], "params": {"count": {"param": "limit"}}}],
  "output": {"node": "t"}})";

  TEST_CASE("a task param taken from a request param") {
    Engine e;
    auto plan = MustLoad(kTakePlan);
    auto r = e.Run(plan, 0, {{"limit", Value(int64_t{7})}});
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 7);
    CHECK(e.Run(plan)->output.size() == 5);  // the declared default
  }

  TEST_CASE("a param reference out of the task's bounds is invalid_param") {
    Engine e;
    auto r = e.Run(MustLoad(kTakePlan), 0, {{"limit", Value(int64_t{20000})}});
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::kInvalidParam);
    CHECK(r.error().code == ErrorCode::kInvalidParam);
    CHECK_MESSAGE(r.error().message.find("node 't'") != std::string::npos, r.error().message);
    CHECK(r.error().message.find("count") != std::string::npos);
    CHECK(r.error().message.find("1..10000") != std::string::npos);
  }

  TEST_CASE("unknown, ill-typed and out-of-bounds request params") {
    Engine e;
    auto plan = MustLoad(kTakePlan);
    auto unknown = e.Run(plan, 0, {{"limt", Value(int64_t{3})}});
    CHECK(unknown.error().code == ErrorCode::kInvalidParam);
    CHECK(unknown.error().message.find("limt") != std::string::npos);
    auto typed = e.Run(plan, 0, {{"limit", Value(std::string("x"))}});
    CHECK(typed.error().code == ErrorCode::kInvalidParam);
    CHECK(typed.error().message.find("expected i64") != std::string::npos);
    auto bounds = e.Run(plan, 0, {{"limit", Value(int64_t{0})}});
    CHECK(bounds.error().code == ErrorCode::kInvalidParam);
    CHECK(bounds.error().message.find("out of bounds") != std::string::npos);
  }

}  // TEST_SUITE

TEST_SUITE("scale") {
  TEST_CASE("a 3000-node chain of inline tasks runs without deep recursion") {
    Engine e;
    std::string nodes = Fixed("n0", 3);
    for (int i = 1; i < 3000; ++i)
      nodes += R"(, {"node_id": "n)" + std::to_string(i) + R"(", "op": "take", "inputs": ["n)" +
               std::to_string(i - 1) + R"("], "params": {"count": 10}})";
    auto r = e.Run(PlanDoc(nodes, "n2999"));
    REQUIRE(r.has_value());
    CHECK(r->output.size() == 3);
  }

  TEST_CASE("a big input goes to the CPU pool and comes back") {
    Engine e;
    e.env.inline_cpu_rows = 10;
    auto r = e.Run(PlanDoc(
        Fixed("f", 100) +
            R"(, {"node_id": "s", "op": "sort", "inputs": ["f"], "params": {"key": "score"}})",
        "s"));
    REQUIRE(r.has_value());
    CHECK(r->output.column("id")->i64[r->output.row(0)] == 100);
  }

}  // TEST_SUITE
