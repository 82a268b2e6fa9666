// The JSON answers of /rank (spec/API.md): the 200 body built from a RunResult, and the
// error body {"error":{"code","message"}}. Also the JSON scalar writers they use:
// strings escaped (invalid UTF-8 becomes U+FFFD), doubles in the shortest form that
// round-trips, non-finite numbers as null.
//
// Threads: any thread; appends to a caller-owned string.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "sched/scheduler.h"

namespace rankd {

// {"plan","user_id","items","count","took_us","degraded"[,"nodes"]}
void AppendRankResponse(const RunResult& r, bool explain, std::string& out);
// {"error":{"code":"...","message":"..."}}
void AppendErrorJson(const Error& e, std::string& out);
std::string ErrorJson(const Error& e);

void AppendJsonString(std::string_view s, std::string& out);  // with the quotes
void AppendJsonDouble(double d, std::string& out);           // null when not finite
void AppendJsonInt(int64_t v, std::string& out);

}  // namespace rankd
