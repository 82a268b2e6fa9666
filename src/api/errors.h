// The HTTP API's error table: for every ErrorCode, the "code" string clients see and the
// HTTP status it is answered with; and the one builder of the error body
// {"error":{"code":"<code>","message":"<message>"}}.
//
// The HTTP layer answers some errors itself (malformed requests, timeouts and size
// limits before any route; a dropped responder's 500) without knowing this table: its
// listeners are given RenderError (http::ErrorRenderer). docs/api.md lists the table; a
// test checks the two agree. Adding an error code: a value in ErrorCode (core/error.h)
// and its row here, in the same order (the static_assert below fails until both are
// there).
//
// Threads: constants and pure functions, any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"
#include "http/handler.h"

namespace rankd {

struct ApiError {
  ErrorCode code;
  std::string_view name;  // the body's "code"
  int status;             // the HTTP status
};

inline constexpr ApiError kApiErrors[] = {
    {ErrorCode::kBadRequest, "bad_request", 400},
    {ErrorCode::kInvalidCursor, "invalid_cursor", 400},
    {ErrorCode::kBadEvent, "bad_event", 400},
    {ErrorCode::kUnauthorized, "unauthorized", 401},
    {ErrorCode::kForbiddenOrigin, "forbidden_origin", 403},
    {ErrorCode::kNotFound, "not_found", 404},
    {ErrorCode::kUnknownPlan, "unknown_plan", 404},
    {ErrorCode::kMethodNotAllowed, "method_not_allowed", 405},
    {ErrorCode::kRequestTimeout, "request_timeout", 408},
    {ErrorCode::kCursorExpired, "cursor_expired", 410},
    {ErrorCode::kPayloadTooLarge, "payload_too_large", 413},
    {ErrorCode::kMisdirectedRequest, "misdirected_request", 421},
    {ErrorCode::kInvalidParam, "invalid_param", 422},
    {ErrorCode::kHeadersTooLarge, "headers_too_large", 431},
    {ErrorCode::kBackendError, "backend_error", 502},
    {ErrorCode::kUnavailable, "unavailable", 503},
    {ErrorCode::kDeadlineExceeded, "deadline_exceeded", 504},
    {ErrorCode::kInternal, "internal", 500},
};

inline constexpr size_t kErrorCodeCount = static_cast<size_t>(ErrorCode::kCount);

constexpr bool ApiErrorsInEnumOrder() {
  if (std::size(kApiErrors) != kErrorCodeCount) return false;
  for (size_t i = 0; i < kErrorCodeCount; ++i)
    if (static_cast<size_t>(kApiErrors[i].code) != i) return false;
  return true;
}
static_assert(ApiErrorsInEnumOrder(), "kApiErrors needs one row per ErrorCode, in enum order");

// REQUIRES: code != ErrorCode::kCount.
constexpr const ApiError& ApiErrorOf(ErrorCode code) {
  return kApiErrors[static_cast<size_t>(code)];
}
constexpr std::string_view ErrorCodeName(ErrorCode code) { return ApiErrorOf(code).name; }
constexpr int ErrorStatus(ErrorCode code) { return ApiErrorOf(code).status; }

// Appends {"error":{"code":"<code>","message":"<message>"}}, the message JSON-escaped.
void AppendErrorBody(const Error& e, std::string& out);
std::string ErrorBody(const Error& e);
// The whole answer to `e`: its status, its body, application/json. The error renderer
// of every rankd listener.
http::ErrorResponse RenderError(const Error& e);

}  // namespace rankd
