// The bodies of the read-only routes, from loaded objects (docs/api.md).
#include <doctest/doctest.h>

#include <string>

#include "api/route_bodies.h"
#include "engine_fixture.h"

using namespace rankd;
using rankd::test::MustLoad;
using rankd::test::PlanDoc;

namespace {

// A one-node plan; `description` is JSON string text (escaped).
PlanPtr Named(const std::string& name, const std::string& description) {
  std::string doc = PlanDoc(R"({"node_id": "src", "op": "fixed_source", "params": {"count": 3}})",
                            "src", R"({"n": {"type": "i64", "default": 1}})");
  doc.replace(doc.find(R"("name": "t")"), 11,
              R"("name": ")" + name + R"(", "description": ")" + description + "\"");
  return MustLoad(doc);
}

}  // namespace

TEST_CASE("/healthz and /readyz") {
  CHECK(kHealthyBody == R"({"status":"ok"})");
  CHECK(ReadyzBody("") == R"({"status":"ready"})");
  CHECK(ReadyzBody("no plans; \"x\"") == R"({"status":"not_ready","reasons":"no plans; \"x\""})");
}

TEST_CASE("/plans lists the plans by name with their params and node count") {
  PlanSet set;
  set.plans["b"] = Named("b", "second");
  set.plans["a"] = Named("a", R"(first \"one\")");  // JSON text
  CHECK(PlansBody(set) ==
        R"({"plans":[{"name":"a","description":"first \"one\"","params":{"n":{"type":"i64"}},)"
        R"("nodes":1},{"name":"b","description":"second","params":{"n":{"type":"i64"}},)"
        R"("nodes":1}]})");
  CHECK(PlansBody(PlanSet{}) == R"({"plans":[]})");
}

TEST_CASE("/plans/{name} is the plan file's text when it uses no model") {
  PlanPtr p = Named("a", "d");
  CHECK(PlanBody(*p) == p->json);
}

TEST_CASE("/schema wraps the schema's text") {
  SchemaPtr s = DemoSchema();
  std::string body = SchemaBody(*s);
  CHECK(body.starts_with(R"({"sha256":")" + s->sha256 + R"(","builtin":true,"schema":)"));
  CHECK(body == R"({"sha256":")" + s->sha256 + R"(","builtin":true,"schema":)" + s->json + "}");
}

TEST_CASE("/experiments is the file's text, or an empty list without one") {
  CHECK(ExperimentsBody(*NoExperiments()) == R"({"experiments":[]})");
  ExperimentSet set;
  set.json = R"({"experiments": [ ]})";
  CHECK(ExperimentsBody(set) == set.json);
}
