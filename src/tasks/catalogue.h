// The op catalogue as JSON (`rankd ops --json`): every op of a registry with its inputs,
// parameters (type, default, bounds, whether a `{"param"}` reference may stand for it),
// the family it reads, the columns it adds and its one line of doc. Its output is
// committed as plans/ops.json, which the plan DSL generates its op methods' parameters
// from and the console reads; tests/tasks/test_catalogue.cc fails when that copy, or
// docs/plan.md's task table, differs from it.
//
// Threads: any (reads an immutable registry).
#pragma once

#include <string>

#include "tasks/task.h"

namespace rankd {

// The catalogue of `r`, ops in registration order: deterministic text, one parameter a
// line, ending in a newline.
std::string CatalogueJson(const TaskRegistry& r);

// docs/plan.md's task table (header, separator and one row per op, in registration
// order) as the catalogue writes it: what that page must hold verbatim.
std::string CatalogueMarkdown(const TaskRegistry& r);

}  // namespace rankd
