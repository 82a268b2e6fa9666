// The plan loader: every rejection (docs/plan.md) names the file, the node and the
// field; a good plan is typed, indexed and wired (successors, in-degrees).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "plan/loader.h"
#include "tasks/task.h"

using namespace rankd;

namespace {

Result<PlanPtr> Load(const std::string& json) {
  return LoadPlanText(json, "bad.plan.json", TaskRegistry::WithTestOps());
}

std::string Doc(const std::string& nodes, const std::string& out, const std::string& extra = "") {
  return R"({"schema_version": 1, "name": "bad", "params": {"limit": {"type": "i64", "default": 5},
    "w": {"type": "f64", "default": 0.5}}, "nodes": [)" +
         nodes + "], " + extra + R"("output": {"node": ")" + out + R"("}})";
}

const char* kSrc = R"({"node_id": "src", "op": "fixed_source", "params": {"count": 10}})";

// The load fails and the message has every one of `parts`.
void Rejects(const std::string& json, std::initializer_list<std::string> parts) {
  auto p = Load(json);
  REQUIRE_FALSE(p.has_value());
  const std::string& m = p.error().message;
  CHECK_MESSAGE(m.find("bad.plan.json") == 0, m);
  for (const auto& part : parts)
    CHECK_MESSAGE(m.find(part) != std::string::npos, m, " lacks: ", part);
}

}  // namespace

TEST_SUITE("plan_loader") {
  TEST_CASE("a good plan is typed and wired") {
    auto p = Load(Doc(
        std::string(kSrc) +
            R"(, {"node_id": "v", "op": "vm", "inputs": ["src"], "params": {"out_key": "s2", "expr": "e0"}},
                           {"node_id": "t", "op": "take", "inputs": ["v"], "params": {"count": {"param": "limit"}}})",
        "t", R"("expr_table": {"e0": {"op": "*", "args": [{"key": "score"}, {"param": "w"}]}},)"));
    REQUIRE_MESSAGE(p.has_value(), p.error().message);
    const Plan& plan = **p;
    CHECK(plan.nodes.size() == 3);
    CHECK(plan.sources == std::vector<uint32_t>{0});
    CHECK(plan.output == 2);
    CHECK(plan.nodes[0].successors == std::vector<uint32_t>{1});
    CHECK(plan.nodes[2].in_degree == 1);
    CHECK(plan.nodes[2].refs.size() == 1);
    CHECK(plan.nodes[1].out_types.find("s2") == ColumnType::kF64);
    CHECK(plan.nodes[1].expr != nullptr);
    CHECK(plan.nodes[2].args.I64("count") == 5);
  }

  TEST_CASE("schema_version other than 1") {
    Rejects(R"({"schema_version": 2, "name": "bad", "nodes": [], "output": {"node": "x"}})",
            {"schema_version", "expected 1"});
  }

  TEST_CASE("unknown op") {
    Rejects(Doc(R"({"node_id": "a", "op": "teleport"})", "a"), {"node 'a'", "op", "teleport"});
  }

  TEST_CASE("unknown task parameter") {
    Rejects(Doc(R"({"node_id": "a", "op": "fixed_source", "params": {"cnt": 3}})", "a"),
            {"node 'a'", "params.cnt", "unknown parameter"});
  }

  TEST_CASE("cache: a literal bool on the five cacheable IO ops only") {
    auto viewer = [](const std::string& cache) {
      return Doc(R"({"node_id": "v", "op": "viewer", "params": {"cache": )" + cache + "}}", "v");
    };
    auto ok = Load(viewer("true"));
    REQUIRE_MESSAGE(ok.has_value(), ok.error().message);
    CHECK((*ok)->nodes[0].args.Bool("cache"));
    auto off = Load(Doc(R"({"node_id": "v", "op": "viewer"})", "v"));
    REQUIRE(off.has_value());
    CHECK_FALSE((*off)->nodes[0].args.Bool("cache"));
    Rejects(viewer("1"), {"node 'v'", "params.cache", "expected bool"});
    Rejects(viewer(R"({"param": "w"})"), {"node 'v'", "params.cache", "literal"});
    Rejects(
        Doc(R"({"node_id": "v", "op": "viewer"}, {"node_id": "s", "op": "seen_filter", "inputs": ["v"], "params": {"cache": true}})",
            "s"),
        {"node 's'", "params.cache", "unknown parameter"});
  }

  TEST_CASE("ill-typed task parameter") {
    Rejects(Doc(R"({"node_id": "a", "op": "fixed_source", "params": {"count": "3"}})", "a"),
            {"node 'a'", "params.count", "expected integer"});
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "o", "op": "sort", "inputs": ["src"], "params": {"key": "score", "order": "up"}})",
            "o"),
        {"node 'o'", "params.order", "\"up\""});
  }

  TEST_CASE("out-of-range literal") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "t", "op": "take", "inputs": ["src"], "params": {"count": 0}})",
            "t"),
        {"node 't'", "params.count", "0 is out of bounds 1..10000"});
    Rejects(Doc(R"({"node_id": "a", "op": "fixed_source", "timeout_ms": 0})", "a"),
            {"node 'a'", "timeout_ms", "out of bounds"});
  }

  TEST_CASE("missing required parameter") {
    Rejects(Doc(std::string(kSrc) + R"(, {"node_id": "t", "op": "take", "inputs": ["src"]})", "t"),
            {"node 't'", "params.count", "missing"});
  }

  TEST_CASE("missing or unknown input") {
    Rejects(Doc(R"({"node_id": "t", "op": "take", "inputs": [], "params": {"count": 1}})", "t"),
            {"node 't'", "inputs", "takes 1 input(s), got 0"});
    Rejects(
        Doc(std::string(kSrc) + R"(, {"node_id": "c", "op": "concat", "inputs": ["src"]})", "c"),
        {"node 'c'", "inputs", "at least 2"});
    Rejects(
        Doc(R"({"node_id": "t", "op": "take", "inputs": ["ghost"], "params": {"count": 1}})", "t"),
        {"node 't'", "inputs[0]", "unknown node 'ghost'"});
  }

  TEST_CASE("cycle") {
    Rejects(Doc(std::string(kSrc) +
                    R"(, {"node_id": "a", "op": "concat", "inputs": ["src", "b"]},
                     {"node_id": "b", "op": "take", "inputs": ["a"], "params": {"count": 1}})",
                "b"),
            {"inputs", "cycle", "a", "b"});
  }

  TEST_CASE("dead node") {
    Rejects(Doc(std::string(kSrc) + R"(, {"node_id": "lost", "op": "fixed_source"})", "src"),
            {"node 'lost'", "dead node", "'src'"});
  }

  TEST_CASE("unknown expr or pred id") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "v", "op": "vm", "inputs": ["src"], "params": {"out_key": "x", "expr": "e9"}})",
            "v"),
        {"node 'v'", "params.expr", "unknown expr id 'e9'"});
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "f", "op": "filter", "inputs": ["src"], "params": {"pred": "p9"}})",
            "f", R"("pred_table": {},)"),
        {"node 'f'", "params.pred", "unknown pred id 'p9'"});
  }

  TEST_CASE("an expression over an undeclared param") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "v", "op": "vm", "inputs": ["src"], "params": {"out_key": "x", "expr": "e0"}})",
            "v", R"("expr_table": {"e0": {"param": "nope"}},)"),
        {"node 'v'", "params.expr", "nope"});
  }

  TEST_CASE("duplicate ids") {
    Rejects(Doc(std::string(kSrc) + "," + kSrc, "src"), {"node 'src'", "node_id", "duplicate"});
  }

  TEST_CASE("concat column type conflict") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "a", "op": "vm", "inputs": ["src"], "params": {"out_key": "x", "expr": "es"}},
                     {"node_id": "b", "op": "vm", "inputs": ["src"], "params": {"out_key": "x", "expr": "ei"}},
                     {"node_id": "c", "op": "concat", "inputs": ["a", "b"]})",
            "c", R"("expr_table": {"es": {"const": "s"}, "ei": {"const": 1}},)"),
        {"node 'c'", "column 'x'", "input 'a'", "input 'b'"});
  }

  TEST_CASE("rows_read: a node read only by a take of N needs only its first N rows") {
    const std::string sort =
        R"({"node_id": "s", "op": "sort", "inputs": ["src"], "params": {"key": "score"}})";
    auto take = [](const std::string& id, const std::string& in, const std::string& count) {
      return R"(, {"node_id": ")" + id + R"(", "op": "take", "inputs": [")" + in +
             R"("], "params": {"count": )" + count + "}}";
    };
    auto rows_read = [](const std::string& json, const std::string& node) -> uint32_t {
      auto p = Load(json);
      REQUIRE_MESSAGE(p.has_value(), p.error().message);
      return (*p)->nodes[static_cast<size_t>((*p)->node_index(node))].rows_read;
    };
    std::string base = std::string(kSrc) + ", " + sort;
    CHECK(rows_read(Doc(base + take("t", "s", "3"), "t"), "s") == 3);
    CHECK(rows_read(Doc(base + take("t", "s", "3"), "t"), "t") == 0);  // the output
    CHECK(rows_read(Doc(base, "s"), "s") == 0);                        // the output
    // Two readers: every row may be read.
    CHECK(rows_read(Doc(base + take("t", "s", "3") + take("u", "s", "5") +
                            R"(, {"node_id": "c", "op": "concat", "inputs": ["t", "u"]})",
                        "c"),
                    "s") == 0);
    // A request param: its declared max, and nothing without one.
    std::string with_max = R"({"schema_version": 1, "name": "bad", "params": {"n": {"type": "i64",
    "default": 5, "min": 1, "max": 40}}, "nodes": [)" +
                           base + take("t", "s", R"({"param": "n"})") +
                           R"(], "output": {"node": "t"}})";
    CHECK(rows_read(with_max, "s") == 40);
    // ...and the param, so that a run orders only the count its request asked for.
    auto p = Load(with_max);
    REQUIRE(p.has_value());
    CHECK((*p)->nodes[static_cast<size_t>((*p)->node_index("s"))].rows_read_param == 0);
    CHECK((*p)->nodes[static_cast<size_t>((*p)->node_index("t"))].rows_read_param == -1);
    CHECK(rows_read(Doc(base + take("t", "s", R"({"param": "limit"})"), "t"), "s") == 0);
  }

  TEST_CASE("param references") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "t", "op": "take", "inputs": ["src"], "params": {"count": {"param": "zz"}}})",
            "t"),
        {"node 't'", "params.count", "'zz' is not declared"});
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "t", "op": "take", "inputs": ["src"], "params": {"count": {"param": "w"}}})",
            "t"),
        {"node 't'", "params.count", "f64"});
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "o", "op": "sort", "inputs": ["src"], "params": {"key": {"param": "limit"}}})",
            "o"),
        {"node 'o'", "params.key", "literal"});
  }

  TEST_CASE("sort or dedupe on a column the input lacks") {
    Rejects(
        Doc(std::string(kSrc) +
                R"(, {"node_id": "o", "op": "sort", "inputs": ["src"], "params": {"key": "likes"}})",
            "o"),
        {"node 'o'", "params.key", "no column 'likes'"});
  }

  TEST_CASE("diversify and cap: columns typed, bad params are load errors naming the node") {
    // src -> ka (adds i64 column a) -> ks (adds str column s) -> the op under test.
    auto with = [](const std::string& op, const std::string& params) {
      return Doc(
          std::string(kSrc) +
              R"(, {"node_id": "ka", "op": "vm", "inputs": ["src"], "params": {"out_key": "a", "expr": "i"}},
                         {"node_id": "ks", "op": "vm", "inputs": ["ka"], "params": {"out_key": "s", "expr": "x"}},
                         {"node_id": "n", "op": ")" +
              op + R"(", "inputs": ["ks"], "params": )" + params + "}",
          "n", R"("expr_table": {"i": {"const": 3}, "x": {"const": "x"}},)");
    };
    auto ok = Load(with("diversify", R"({"key": "s", "score": "score", "out_key": "div"})"));
    REQUIRE_MESSAGE(ok.has_value(), ok.error().message);
    const PlanNode& div = (*ok)->nodes[3];
    CHECK(div.out_types.find("div") == ColumnType::kF64);
    CHECK(div.args.F64("decay") == 0.5);
    CHECK(div.args.F64("floor") == 0.25);
    auto refs =
        Load(with("diversify", R"({"key": "a", "score": "score", "decay": {"param": "w"}})"));
    REQUIRE_MESSAGE(refs.has_value(), refs.error().message);
    CHECK((*refs)->nodes[3].out_types.cols == (*refs)->nodes[2].out_types.cols);
    auto capped = Load(with("cap", R"({"key": "a", "max": 2, "window": {"param": "limit"}})"));
    REQUIRE_MESSAGE(capped.has_value(), capped.error().message);
    CHECK_FALSE((*capped)->nodes[3].args.Bool("defer"));

    const std::pair<std::string, std::vector<std::string>> diversify[] = {
        {R"({"score": "score"})", {"params.key", "missing"}},
        {R"({"key": "zz", "score": "score"})", {"params.key", "no column 'zz'"}},
        {R"({"key": "score", "score": "score"})",
         {"params.key", "column 'score' is f64", "an i64 or str key column"}},
        {R"({"key": "a"})", {"params.score", "missing"}},
        {R"({"key": "a", "score": "nope"})", {"params.score", "no column 'nope'"}},
        {R"({"key": "a", "score": "a"})", {"params.score", "column 'a' is i64", "f64 score"}},
        {R"({"key": "a", "score": "score", "decay": 1.5})",
         {"params.decay", "1.5 is out of bounds 0..1"}},
        {R"({"key": "a", "score": "score", "floor": -0.25})",
         {"params.floor", "-0.25 is out of bounds 0..1"}},
        {R"({"key": "a", "score": "score", "decay": "x"})", {"params.decay", "expected number"}},
        {R"({"key": "a", "score": "score", "floor": {"param": "limit"}})",
         {"params.floor", "param 'limit' is i64"}},
        {R"({"key": "a", "score": "score", "out_key": "id"})",
         {"params.out_key", "may not replace the id column"}},
        {R"({"key": {"param": "w"}, "score": "score"})", {"params.key", "literal"}},
    };
    for (const auto& [params, parts] : diversify) {
      std::vector<std::string> want{"node 'n'"};
      want.insert(want.end(), parts.begin(), parts.end());
      auto p = Load(with("diversify", params));
      REQUIRE_FALSE_MESSAGE(p.has_value(), params);
      for (const auto& part : want)
        CHECK_MESSAGE(p.error().message.find(part) != std::string::npos, p.error().message,
                      " lacks: ", part);
    }
    const std::pair<std::string, std::vector<std::string>> cap[] = {
        {R"({"key": "a", "max": 0, "window": 10})", {"params.max", "0 is out of bounds 1..10000"}},
        {R"({"key": "a", "max": 2, "window": 10001})",
         {"params.window", "10001 is out of bounds 1..10000"}},
        {R"({"key": "a", "max": 2})", {"params.window", "missing"}},
        {R"({"key": "zz", "max": 2, "window": 10})", {"params.key", "no column 'zz'"}},
        {R"({"key": "score", "max": 2, "window": 10})",
         {"params.key", "column 'score' is f64", "cap takes an i64 or str key column"}},
        {R"({"key": "s", "max": 2, "window": 10, "defer": "yes"})",
         {"params.defer", "expected bool"}},
        {R"({"key": "s", "max": {"param": "w"}, "window": 10})",
         {"params.max", "param 'w' is f64"}},
    };
    for (const auto& [params, parts] : cap) {
      auto p = Load(with("cap", params));
      REQUIRE_FALSE_MESSAGE(p.has_value(), params);
      CHECK_MESSAGE(p.error().message.find("bad.plan.json: node 'n': ") == 0, p.error().message);
      for (const auto& part : parts)
        CHECK_MESSAGE(p.error().message.find(part) != std::string::npos, p.error().message,
                      " lacks: ", part);
    }
    // A {"param"} whose declared default is outside the op's bounds.
    auto bad_default = Load(R"({"schema_version": 1, "name": "bad",
        "params": {"d": {"type": "f64", "default": 2}},
        "nodes": [{"node_id": "src", "op": "fixed_source"},
                  {"node_id": "n", "op": "diversify", "inputs": ["src"],
                   "params": {"key": "id", "score": "score", "decay": {"param": "d"}}}],
        "output": {"node": "n"}})");
    REQUIRE_FALSE(bad_default.has_value());
    CHECK_MESSAGE(bad_default.error().message.find(
                      "node 'n': params.decay: param 'd' default: 2 is out of bounds 0..1") !=
                      std::string::npos,
                  bad_default.error().message);
  }

  TEST_CASE("unknown output node, invalid JSON, bad param declaration") {
    Rejects(Doc(kSrc, "nowhere"), {"output.node", "nowhere"});
    Rejects("{nope", {"invalid JSON"});
    Rejects(
        R"({"schema_version": 1, "name": "bad", "params": {"x": {"type": "i64", "default": 7, "max": 5}},
             "nodes": [{"node_id": "a", "op": "fixed_source"}], "output": {"node": "a"}})",
        {"params.x", "default"});
  }

  TEST_CASE("test-only ops load only from the registry that enables them") {
    const char* kPlans[][2] = {
        {"fixed_source", R"({"node_id": "n", "op": "fixed_source"})"},
        {"sleep", R"({"node_id": "n", "op": "sleep", "params": {"duration_ms": 1}})"},
        {"busy_cpu", R"({"node_id": "n", "op": "busy_cpu"})"},
    };
    for (const auto& [op, node] : kPlans) {
      std::string json = Doc(node, "n");
      auto refused = LoadPlanText(json, "bad.plan.json", TaskRegistry::Default());
      REQUIRE_FALSE(refused.has_value());
      CHECK(refused.error().message ==
            "bad.plan.json: node 'n': op: plan 'bad' uses the test-only op '" + std::string(op) +
                "', which loads only with --enable-test-ops");
      CHECK(LoadPlanText(json, "bad.plan.json", TaskRegistry::WithTestOps()).has_value());
    }
    // The production ops load from both.
    std::string viewer = Doc(R"({"node_id": "v", "op": "viewer"})", "v");
    CHECK(LoadPlanText(viewer, "bad.plan.json", TaskRegistry::Default()).has_value());
  }

  TEST_CASE("a folder loads all or nothing") {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("rankd_plans_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream(dir / name) << text;
    };
    write(
        "good.plan.json",
        R"({"schema_version": 1, "name": "good", "nodes": [{"node_id": "a", "op": "fixed_source"}], "output": {"node": "a"}})");
    auto ok = LoadPlanDir(dir.string(), TaskRegistry::WithTestOps());
    REQUIRE(ok.has_value());
    CHECK(ok->Find("good") != nullptr);
    write(
        "worse.plan.json",
        R"({"schema_version": 1, "name": "worse", "nodes": [{"node_id": "a", "op": "nope"}], "output": {"node": "a"}})");
    auto bad = LoadPlanDir(dir.string(), TaskRegistry::WithTestOps());
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().message.find("worse.plan.json") != std::string::npos);
    fs::remove_all(dir);
  }

}  // TEST_SUITE
