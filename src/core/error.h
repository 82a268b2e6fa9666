// Error: the value type of expected failures (bad input, timeouts, backend errors).
// Failures on the request path travel as Result<T> = std::expected<T, Error>, never as
// exceptions. Plain value type: any thread.
#pragma once

#include <cstdint>
#include <expected>
#include <string>

namespace rankd {

// What went wrong, as a client is told it. Each code's name ("bad_request") and HTTP
// status live in the HTTP API's error table (api/errors.h), which lists every code
// in this order; this layer knows neither.
enum class ErrorCode : uint8_t {
  kBadRequest,
  kInvalidCursor,
  kBadEvent,  // POST /events: an event that is not of the schema (400)
  kUnauthorized,
  kForbiddenOrigin,
  kNotFound,
  kUnknownPlan,
  kMethodNotAllowed,
  kRequestTimeout,
  kCursorExpired,
  kPayloadTooLarge,
  kMisdirectedRequest,
  kInvalidParam,
  kHeadersTooLarge,
  kBackendError,
  kUnavailable,
  kDeadlineExceeded,
  kInternal,
  kCount,  // not a code: how many there are
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // says what and where; sent to clients
  // What only the server log may see: addresses, key names, raw backend text. Empty for
  // most errors; the shard logs it with the request id (never in a response body).
  std::string detail{};

  static Error BadRequest(std::string m) { return {ErrorCode::kBadRequest, std::move(m)}; }
  static Error InvalidCursor(std::string m) { return {ErrorCode::kInvalidCursor, std::move(m)}; }
  static Error BadEvent(std::string m) { return {ErrorCode::kBadEvent, std::move(m)}; }
  static Error CursorExpired(std::string m) { return {ErrorCode::kCursorExpired, std::move(m)}; }
  static Error Unauthorized(std::string m) { return {ErrorCode::kUnauthorized, std::move(m)}; }
  static Error NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Error UnknownPlan(std::string m) { return {ErrorCode::kUnknownPlan, std::move(m)}; }
  static Error InvalidParam(std::string m) { return {ErrorCode::kInvalidParam, std::move(m)}; }
  static Error Backend(std::string m) { return {ErrorCode::kBackendError, std::move(m)}; }
  static Error Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
  static Error DeadlineExceeded(std::string m) {
    return {ErrorCode::kDeadlineExceeded, std::move(m)};
  }
  static Error Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> Fail(Error e) { return std::unexpected<Error>(std::move(e)); }

}  // namespace rankd
