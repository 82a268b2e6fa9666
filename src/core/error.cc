#include "core/error.h"

namespace rankd {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest: return "bad_request";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kUnknownPlan: return "unknown_plan";
    case ErrorCode::kMethodNotAllowed: return "method_not_allowed";
    case ErrorCode::kRequestTimeout: return "request_timeout";
    case ErrorCode::kPayloadTooLarge: return "payload_too_large";
    case ErrorCode::kInvalidParam: return "invalid_param";
    case ErrorCode::kHeadersTooLarge: return "headers_too_large";
    case ErrorCode::kBackendError: return "backend_error";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kDeadlineExceeded: return "deadline_exceeded";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

int ErrorHttpStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kUnknownPlan: return 404;
    case ErrorCode::kMethodNotAllowed: return 405;
    case ErrorCode::kRequestTimeout: return 408;
    case ErrorCode::kPayloadTooLarge: return 413;
    case ErrorCode::kInvalidParam: return 422;
    case ErrorCode::kHeadersTooLarge: return 431;
    case ErrorCode::kBackendError: return 502;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kDeadlineExceeded: return 504;
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

}  // namespace rankd
