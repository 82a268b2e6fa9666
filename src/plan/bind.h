// Per-request binding of a loaded plan: the request's `params` against the plan's
// declarations, and each node's task parameters ({"param"} references) against the
// task's own bounds. Every failure is invalid_param and names the param (and node).
//
// Threads: any thread; pure functions of their arguments.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "plan/plan.h"

namespace rankd {

// A request's params as given (name, JSON value): int64, double, string or bool.
using GivenParams = std::vector<std::pair<std::string, Value>>;

// Values by declaration index, defaults filled in, then a null for each of the plan's
// `from` values (bound by the run, sched/scheduler.cc). Rejects an unknown name, a wrong
// type (an integer is accepted for f64) and a value outside the declared min/max.
Result<ParamValues> BindParams(const Plan& plan, const GivenParams& given);

// The node's TaskArgs with every {"param"} reference resolved from `values` and checked
// against the task's bounds. REQUIRES: !node.refs.empty() (else use node.args as is).
Result<TaskArgs> ResolveArgs(const Plan& plan, const PlanNode& node, const ParamValues& values);

// Empty when `v` satisfies the spec's bounds and allowed values; else what is wrong,
// e.g. "0 is out of bounds 1..10000".
std::string CheckArg(const TaskParamSpec& spec, const Value& v);

// `v` as a value of `kind`: itself, or an integer widened for kF64; nullopt when the
// types do not match. Lists, column names and table ids are literals only: never
// converted.
std::optional<Value> Coerce(const Value& v, ParamKind kind);

// For messages: null, 12, 0.5, "US", true, ["a", "b"].
std::string ValueToString(const Value& v);

}  // namespace rankd
