// The /rank request body of docs/api.md: {"plan", "user_id", "params", "deadline_ms",
// "explain", "log", "page_size", "cursor"}. Shared by the HTTP server and `rankd run`.
//
// Threads: any thread (the parser buffer is thread-local).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "plan/bind.h"

namespace rankd {

// A request's criticality under overload (docs/operations.md, "Overload"): sheddable
// requests are refused first, critical ones last. Shadow runs are always sheddable.
enum class Priority : uint8_t { kCritical, kDefault, kSheddable, kCount };
std::string_view PriorityName(Priority p);  // "critical", "default", "sheddable"
std::optional<Priority> ParsePriority(std::string_view s);

struct RankRequest {
  std::string plan;
  UserId user_id;  // an integer or a string as sent; CheckUserIdType against the plan
  GivenParams params;
  std::optional<int64_t> deadline_ms;  // 1..60000 when given
  bool explain = false;
  bool log = false;                   // record it in the served log whatever the plan's sample
  std::optional<int> page_size;       // 1..kMaxPageSize when given (docs/api.md, "Pages")
  std::optional<std::string> cursor;  // a later page of a ranking asked with page_size
  std::optional<Priority> priority;   // as given (honoured only with --allow-priority)
};

inline constexpr int kMaxPageSize = 500;

// Errors are bad_request naming the field ("user_id: must be an integer >= 0"), except
// a param value that is no scalar at all and a page_size out of 1..kMaxPageSize
// (invalid_param). Unknown top-level fields are
// ignored. With require_plan false (`rankd run`) a missing "plan" is allowed.
Result<RankRequest> ParseRankRequest(std::string_view body, bool require_plan = true);

// The user_id must have the plan's user_id type (Plan::user_id_type): else bad_request
// naming user_id and the plan.
Result<void> CheckUserIdType(const UserId& id, ColumnType type, std::string_view plan);

}  // namespace rankd
