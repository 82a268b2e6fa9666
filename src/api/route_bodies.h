// The 200 (and 503) bodies of the GET routes of docs/api.md: /healthz, /readyz, /plans,
// /plans/{name}, /schema and /experiments, written from the loaded objects. /rank's are
// in api/rank_response.h, the error body in api/errors.h.
//
// Threads: any thread; pure functions of what they are given.
#pragma once

#include <string>
#include <string_view>

#include "plan/experiments.h"
#include "plan/plan.h"
#include "plan/schema.h"

namespace rankd {

// GET /healthz.
inline constexpr std::string_view kHealthyBody = R"({"status":"ok"})";

// GET /readyz: {"status":"ready"} when `reasons` is empty (200), else
// {"status":"not_ready","reasons":"<reasons>"} (503).
std::string ReadyzBody(std::string_view reasons);

// GET /plans: {"plans":[{"name","description","params":{"<name>":{"type"}},"nodes"}]},
// sorted by name.
std::string PlansBody(const PlanSet& set);

// GET /plans/{name}: the plan file's text with the models it uses added as the root
// object's last field, "models":[{"name","sha256"}] (the text as it is without models).
std::string PlanBody(const Plan& plan);

// GET /schema: {"sha256","builtin","schema"}, the schema's file as it was read.
std::string SchemaBody(const Schema& schema);

// GET /experiments: experiments.json as it was read, or {"experiments":[]} without one.
std::string_view ExperimentsBody(const ExperimentSet& set);

}  // namespace rankd
