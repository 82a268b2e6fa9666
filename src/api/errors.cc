#include "api/errors.h"

#include "core/json_escape.h"

namespace rankd {

void AppendErrorBody(const Error& e, std::string& out) {
  out += R"({"error":{"code":")";
  out += ErrorCodeName(e.code);  // [a-z_]: nothing to escape
  out += R"(","message":)";
  AppendJsonString(e.message, out);
  out += "}}";
}

std::string ErrorBody(const Error& e) {
  std::string out;
  out.reserve(48 + e.message.size());
  AppendErrorBody(e, out);
  return out;
}

http::ErrorResponse RenderError(const Error& e) {
  return {ErrorStatus(e.code), ErrorBody(e), "application/json"};
}

}  // namespace rankd
