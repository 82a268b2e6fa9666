// The 200 body of /rank (docs/api.md) built from a RunResult, and the JSON number
// writers it uses: doubles in the shortest form that round-trips, non-finite numbers as
// null. Strings go through core/json_escape.h; error bodies are the HTTP layer's
// (http/api_errors.h).
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <string>
#include <string_view>

#include "core/json_escape.h"
#include "sched/scheduler.h"

namespace rankd {

// What an answer may add to the run's own fields (empty: left out).
struct ResponseExtras {
  std::string_view experiment;  // the experiment that applied (docs/experiments.md)
  std::string_view variant;     // with it: its variant, or "control"
  std::string_view served_id;   // the request's served-log record (docs/served-log.md)
};

// {"plan","user_id","items","count","took_us","degraded"[,"experiment","variant"]
// [,"served_id"][,"nodes"]}.
void AppendRankResponse(const RunResult& r, bool explain, std::string& out,
                        const ResponseExtras& extras = {});
void AppendJsonDouble(double d, std::string& out);  // null when not finite
void AppendJsonInt(int64_t v, std::string& out);
// Physical row `row` of `c`: null, a number, true/false or a string.
void AppendJsonCell(const Column& c, uint32_t row, std::string& out);

}  // namespace rankd
