// Error: the value type of expected failures (bad input, timeouts, backend errors).
// Failures on the request path travel as Result<T> = std::expected<T, Error>, never as
// exceptions. Plain value type: any thread.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rankd {

// One code per row of the API's error table (spec/API.md).
enum class ErrorCode : uint8_t {
  kBadRequest,
  kNotFound,
  kUnknownPlan,
  kMethodNotAllowed,
  kRequestTimeout,
  kPayloadTooLarge,
  kInvalidParam,
  kHeadersTooLarge,
  kBackendError,
  kUnavailable,
  kDeadlineExceeded,
  kInternal,
};

// The API's "code" string for an error code, e.g. "deadline_exceeded".
std::string_view ErrorCodeName(ErrorCode code);
// The HTTP status the API answers for an error code, e.g. 504.
int ErrorHttpStatus(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // says what and where; sent to clients
  // What only the server log may see: addresses, key names, raw backend text. Empty for
  // most errors; the shard logs it with the request id (never in a response body).
  std::string detail{};

  static Error BadRequest(std::string m) { return {ErrorCode::kBadRequest, std::move(m)}; }
  static Error NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Error UnknownPlan(std::string m) { return {ErrorCode::kUnknownPlan, std::move(m)}; }
  static Error InvalidParam(std::string m) { return {ErrorCode::kInvalidParam, std::move(m)}; }
  static Error Backend(std::string m) { return {ErrorCode::kBackendError, std::move(m)}; }
  static Error Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
  static Error DeadlineExceeded(std::string m) {
    return {ErrorCode::kDeadlineExceeded, std::move(m)};
  }
  static Error Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

  std::string_view code_name() const { return ErrorCodeName(code); }
  int http_status() const { return ErrorHttpStatus(code); }
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> Fail(Error e) { return std::unexpected<Error>(std::move(e)); }

}  // namespace rankd
