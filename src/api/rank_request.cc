#include "api/rank_request.h"

#include <simdjson.h>

#include <unordered_set>

#include "api/json_body.h"
#include "core/client_text.h"
#include "plan/schema.h"

namespace rankd {

using simdjson::dom::element;
using simdjson::dom::element_type;

Result<void> CheckUserIdType(const UserId& id, ColumnType type, std::string_view plan) {
  if (type == ColumnType::kStr) {
    if (!id.is_str)
      return Fail(
          Error::BadRequest("user_id: plan '" + std::string(plan) +
                            "' is keyed by string user ids: send user_id as a JSON string"));
    if (!ValidStrId(id.str))
      return Fail(Error::BadRequest("user_id: must be 1..256 bytes without '{' or '}' (got " +
                                    std::to_string(id.str.size()) + " bytes)"));
    return {};
  }
  if (id.is_str)
    return Fail(
        Error::BadRequest("user_id: plan '" + std::string(plan) +
                          "' is keyed by integer user ids: send user_id as an integer >= 0"));
  return {};
}

Result<RankRequest> ParseRankRequest(std::string_view body, bool require_plan) {
  auto body_obj = ParseJsonObjectBody(body);
  if (!body_obj) return Fail(std::move(body_obj.error()));
  simdjson::dom::object obj = *body_obj;
  RankRequest req;
  element v;
  std::string_view s;
  if (obj["plan"].get(v)) {
    if (require_plan) return Fail(Error::BadRequest("plan: missing"));
  } else {
    if (v.get_string().get(s)) return Fail(Error::BadRequest("plan: must be a string"));
    req.plan = std::string(s);
  }
  if (obj["user_id"].get(v)) return Fail(Error::BadRequest("user_id: missing"));
  if (v.type() == element_type::UINT64)
    return Fail(Error::BadRequest("user_id: " + ShortJson(v) + " does not fit in i64"));
  if (v.type() == element_type::STRING) {
    req.user_id.is_str = true;
    req.user_id.str = std::string(std::string_view(v.get_string()));
  } else if (v.type() != element_type::INT64 || int64_t(v.get_int64()) < 0) {
    return Fail(
        Error::BadRequest("user_id: must be an integer >= 0 or a string, got " + ShortJson(v)));
  } else {
    req.user_id.num = v.get_int64();
  }
  if (!obj["params"].get(v)) {
    simdjson::dom::object params;
    if (v.get_object().get(params)) return Fail(Error::BadRequest("params: must be an object"));
    for (auto [key, val] : params) {
      std::string name(key);
      switch (val.type()) {
        case element_type::INT64:
          req.params.emplace_back(name, Value(int64_t(val.get_int64())));
          break;
        case element_type::DOUBLE:
          req.params.emplace_back(name, Value(double(val.get_double())));
          break;
        case element_type::STRING:
          req.params.emplace_back(name, Value(std::string(std::string_view(val.get_string()))));
          break;
        case element_type::BOOL: req.params.emplace_back(name, Value(bool(val.get_bool()))); break;
        case element_type::UINT64:
          return Fail(Error::InvalidParam("params." + ClientText(name, 64) + ": " + ShortJson(val) +
                                          " does not fit in i64"));
        default:
          return Fail(Error::InvalidParam("params." + ClientText(name, 64) +
                                          ": must be a number, string or bool, got " +
                                          ShortJson(val)));
      }
    }
  }
  if (!obj["deadline_ms"].get(v)) {
    int64_t ms = 0;
    if (v.type() != element_type::INT64 || (ms = v.get_int64()) < 1 || ms > 60000)
      return Fail(
          Error::BadRequest("deadline_ms: must be an integer in 1..60000, got " + ShortJson(v)));
    req.deadline_ms = ms;
  }
  if (!obj["explain"].get(v)) {
    bool b;
    if (v.get_bool().get(b)) return Fail(Error::BadRequest("explain: must be a bool"));
    req.explain = b;
  }
  if (!obj["log"].get(v)) {
    bool b;
    if (v.get_bool().get(b)) return Fail(Error::BadRequest("log: must be a bool"));
    req.log = b;
  }
  if (!obj["priority"].get(v)) {
    std::optional<Priority> p;
    if (v.get_string().get(s) || !(p = ParsePriority(s)))
      return Fail(
          Error::BadRequest("priority: must be one of \"critical\", \"default\", "
                            "\"sheddable\", got " +
                            ShortJson(v)));
    req.priority = *p;
  }
  if (!obj["page_size"].get(v)) {
    if (v.type() != element_type::INT64 && v.type() != element_type::UINT64)
      return Fail(Error::BadRequest("page_size: must be an integer, got " + ShortJson(v)));
    int64_t n = v.type() == element_type::INT64 ? int64_t(v.get_int64()) : -1;
    if (n < 1 || n > kMaxPageSize)
      return Fail(Error::InvalidParam("page_size: must be in 1.." + std::to_string(kMaxPageSize) +
                                      ", got " + ShortJson(v)));
    req.page_size = static_cast<int>(n);
  }
  if (!obj["cursor"].get(v)) {
    if (v.get_string().get(s)) return Fail(Error::BadRequest("cursor: must be a string"));
    req.cursor = std::string(s);
  }
  return req;
}

std::string_view PriorityName(Priority p) {
  switch (p) {
    case Priority::kCritical: return "critical";
    case Priority::kDefault: return "default";
    case Priority::kSheddable: return "sheddable";
    case Priority::kCount: break;
  }
  return "?";
}

std::optional<Priority> ParsePriority(std::string_view s) {
  for (size_t i = 0; i < static_cast<size_t>(Priority::kCount); ++i)
    if (s == PriorityName(static_cast<Priority>(i))) return static_cast<Priority>(i);
  return std::nullopt;
}

}  // namespace rankd
