// The plan side of events (#45, docs/plan.md): {"from": node, "key": column} expressions,
// seen_filter's within_s and the served_state block, as the loader types and rejects them.
// Every rejection names the file and what is wrong (node, expression, column; member).
#include <doctest/doctest.h>

#include "plan/bind.h"
#include "plan/loader.h"
#include "tasks/task.h"

using namespace rankd;

namespace {

constexpr std::string_view kSchema = R"({"schema_version": 1, "families": {
  "user":   {"type": "hash", "key": "user:{id}", "fields": {"country": "str", "age": "i64", "fav": "str"}},
  "suser":  {"type": "hash", "key": "su:{id}", "id": "str", "fields": {"age": "i64"}},
  "item":   {"type": "hash", "key": "item:{id}", "fields": {"category": "str", "likes": "i64"}},
  "recs":   {"type": "list", "key": "recs:{id}"},
  "seen":   {"type": "set",  "key": "seen:{id}"},
  "served": {"type": "zset", "key": "served:{id}"},
  "sserved": {"type": "zset", "key": "ss:{id}", "members": "str"},
  "byname": {"type": "zset", "key": "bn:{id}", "id": "str"}
}})";

SchemaPtr Schema() {
  static SchemaPtr s = *ParseSchema(kSchema, "schema.json");
  return s;
}

Result<PlanPtr> Load(const std::string& json) {
  return LoadPlanText(json, "ev.plan.json", TaskRegistry::WithTestOps(), nullptr, Schema());
}

// viewer v -> recs r -> features h -> vm s (expr e) -> filter f (pred p) -> take t.
std::string PlanJson(const std::string& expr,
                     const std::string& pred = R"({"op": "is_null", "arg": {"const": 1}})",
                     const std::string& extra = "", const std::string& seen_params = "") {
  std::string seen = seen_params.empty()
                         ? ""
                         : R"({"node_id": "u", "op": "seen_filter", "inputs": ["r"], "params": )" +
                               seen_params + "},";
  return R"({"schema_version": 1, "name": "ev", "nodes": [
    {"node_id": "v", "op": "viewer", "params": {}},
    {"node_id": "r", "op": "recommendation", "inputs": ["v"], "params": {}},)" +
         seen + R"(
    {"node_id": "h", "op": "features", "inputs": [")" +
         (seen.empty() ? "r" : "u") + R"("], "params": {"fields": ["category", "likes"]}},
    {"node_id": "s", "op": "vm", "inputs": ["h"], "params": {"out_key": "score", "expr": "e"}},
    {"node_id": "f", "op": "filter", "inputs": ["s"], "params": {"pred": "p"}},
    {"node_id": "t", "op": "take", "inputs": ["f"], "params": {"count": 10}}],
    "expr_table": {"e": )" +
         expr + R"(}, "pred_table": {"p": )" + pred + "}, " + extra + R"("output": {"node": "t"}})";
}

void Rejects(const std::string& json, std::initializer_list<std::string> parts) {
  auto p = Load(json);
  REQUIRE_FALSE(p.has_value());
  const std::string& m = p.error().message;
  CHECK_MESSAGE(m.find("ev.plan.json") == 0, m);
  for (const auto& part : parts)
    CHECK_MESSAGE(m.find(part) != std::string::npos, m, " lacks: ", part);
}

std::string State(const std::string& body) { return R"("served_state": )" + body + ","; }

}  // namespace

TEST_SUITE("plan_events") {
  TEST_CASE("from: typed by the viewer's column, one value slot per (node, column)") {
    auto p =
        Load(PlanJson(R"({"op": "+", "args": [{"key": "likes"}, {"from": "v", "key": "age"}]})",
                      R"({"op": "cmp", "cmp": "==", "lhs": {"key": "category"},
                           "rhs": {"from": "v", "key": "fav"}})"));
    REQUIRE_MESSAGE(p.has_value(), p.error().message);
    const Plan& plan = **p;
    REQUIRE(plan.from_values.size() == 2);
    CHECK(plan.from_values[0].column == "age");
    CHECK(plan.from_values[1].column == "fav");
    CHECK(plan.nodes[plan.from_values[0].node].id == "v");
    CHECK(plan.nodes[3].out_types.find("score") == ColumnType::kI64);
    // The run's values: the params, then a null per from value until the viewer binds it.
    auto values = BindParams(plan, {});
    REQUIRE(values.has_value());
    CHECK(values->size() == 2);
    CHECK(IsNull((*values)[0]));

    auto again = Load(PlanJson(
        R"({"op": "+", "args": [{"from": "v", "key": "age"}, {"from": "v", "key": "age"}]})"));
    REQUIRE_MESSAGE(again.has_value(), again.error().message);
    CHECK((*again)->from_values.size() == 1);
  }

  TEST_CASE("from: every load error names the node, the expression and the column") {
    const std::string where = "node 's': params.expr (expr 'e'): ";
    Rejects(PlanJson(R"({"from": "nope", "key": "age"})"),
            {where, "from 'nope' key 'age': unknown node"});
    Rejects(PlanJson(R"({"from": "r", "key": "id"})"),
            {where, "from 'r' key 'id'", "node 'r' is a 'recommendation' node", "viewer"});
    Rejects(PlanJson(R"({"from": "v", "key": "lang"})"),
            {where, "from 'v' key 'lang'", "node 'v' has no column 'lang' (it has id, country"});
    Rejects(PlanJson(R"({"from": "v"})"), {where, "from 'v' needs a \"key\""});
    Rejects(PlanJson(R"({"from": 3, "key": "age"})"), {where, "from must be a node id string"});
    // Not an ancestor: the take after the expression's node, itself a viewer-less path.
    Rejects(PlanJson(R"({"from": "t", "key": "age"})"),
            {where, "from 't' key 'age': node 't' is not an input of node 's'"});
    Rejects(PlanJson(R"({"from": "s", "key": "score"})"),
            {where, "node 's' is not an input of node 's'"});
    // In a predicate too, and typed: a str column in arithmetic.
    Rejects(PlanJson(R"({"const": 1})", R"({"op": "cmp", "cmp": ">", "lhs": {"key": "likes"},
                                       "rhs": {"from": "v", "key": "nope"}})"),
            {"node 'f': params.pred (pred 'p'): rhs: from 'v' key 'nope'", "has no column 'nope'"});
    Rejects(PlanJson(R"({"op": "+", "args": [{"key": "likes"}, {"from": "v", "key": "fav"}]})"),
            {where, "op '+' needs numbers but args[1] is str"});
  }

  TEST_CASE("seen_filter: set or zset; within_s on a zset only") {
    auto set = Load(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", "",
                             R"({"family": "seen"})"));
    CHECK_MESSAGE(set.has_value(), set.error().message);
    auto zset = Load(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", "",
                              R"({"family": "served", "within_s": 3600})"));
    CHECK_MESSAGE(zset.has_value(), zset.error().message);
    Rejects(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", "",
                     R"({"family": "seen", "within_s": 60})"),
            {"node 'u'", "params.within_s: needs a zset family", "family 'seen' (set)"});
    Rejects(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", "",
                     R"({"family": "served", "within_s": -1})"),
            {"node 'u'", "params.within_s"});
    Rejects(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", "",
                     R"({"family": "recs"})"),
            {"node 'u'", "seen_filter reads a set or a zset"});
  }

  TEST_CASE("served_state: parsed") {
    auto p = Load(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})",
                           State(R"({"family": "served", "max": 500, "ttl_s": 604800})")));
    REQUIRE_MESSAGE(p.has_value(), p.error().message);
    const PlanServedState& ss = (*p)->served_state;
    CHECK(ss.enabled);
    CHECK(ss.family->name == "served");
    CHECK(ss.max == 500);
    CHECK(ss.ttl_s == 604800);
    CHECK(ss.endpoint == "redis_default");
    auto e =
        Load(PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})",
                      State(R"({"family": "served", "max": 1, "ttl_s": 1, "endpoint": "other"})")));
    REQUIRE_MESSAGE(e.has_value(), e.error().message);
    CHECK((*e)->served_state.endpoint == "other");
    auto none = Load(PlanJson(R"({"const": 1})"));
    REQUIRE(none.has_value());
    CHECK_FALSE((*none)->served_state.enabled);
  }

  TEST_CASE("served_state: every load error names the member") {
    auto bad = [](const std::string& block, std::initializer_list<std::string> parts) {
      Rejects(
          PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})", State(block)),
          parts);
    };
    bad(R"([1])", {"served_state: must be an object"});
    bad(R"({"family": "served", "max": 5, "ttl_s": 5, "sink": "x"})",
        {"served_state: unknown field 'sink'"});
    bad(R"({"max": 5, "ttl_s": 5})", {"served_state.family: missing"});
    bad(R"({"family": 3, "max": 5, "ttl_s": 5})", {"served_state.family: missing or not"});
    bad(R"({"family": "nope", "max": 5, "ttl_s": 5})",
        {"served_state.family: unknown family 'nope'"});
    bad(R"({"family": "seen", "max": 5, "ttl_s": 5})",
        {"served_state.family: family 'seen' is a set; served state is kept in a zset"});
    bad(R"({"family": "byname", "max": 5, "ttl_s": 5})",
        {"served_state.family: family 'byname' is keyed by str ids but the request's user_id is "
         "i64"});
    bad(R"({"family": "sserved", "max": 5, "ttl_s": 5})",
        {"served_state.family: family 'sserved' holds str members but the output's ids are i64"});
    bad(R"({"family": "served", "ttl_s": 5})", {"served_state.max: missing or not an integer"});
    bad(R"({"family": "served", "max": 0, "ttl_s": 5})",
        {"served_state.max: 0 is out of bounds 1..100000"});
    bad(R"({"family": "served", "max": 1.5, "ttl_s": 5})", {"served_state.max: missing or not"});
    bad(R"({"family": "served", "max": 5})", {"served_state.ttl_s: missing"});
    bad(R"({"family": "served", "max": 5, "ttl_s": 315360001})",
        {"served_state.ttl_s: 315360001 is out of bounds 1..315360000"});
    bad(R"({"family": "served", "max": 5, "ttl_s": 5, "endpoint": ""})",
        {"served_state.endpoint: must be a non-empty endpoint name"});
    // The answer must carry the ids later pages read back.
    auto p = PlanJson(R"({"const": 1})", R"({"op": "is_null", "arg": {"const": 1}})",
                      State(R"({"family": "served", "max": 5, "ttl_s": 5})"));
    p.replace(p.find(R"("output": {"node": "t"})"), 23,
              R"("output": {"node": "t", "columns": ["score"]})");
    Rejects(p, {"served_state: output.columns must list id"});
  }
}
