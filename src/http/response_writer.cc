#include "http/response_writer.h"

#include <charconv>
#include <cstring>

namespace rankd::http {

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

namespace {

bool HasCrOrLf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

void AppendHeader(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.append(": ", 2);
  out.append(value);
  out.append("\r\n", 2);
}

}  // namespace

void AppendResponse(std::string& out, const Response& r, const ResponseMeta& meta) {
  // One reserve for the whole response: the header block is small next to most bodies
  // and this keeps it to at most one reallocation of `out`.
  size_t extra = 0;
  for (const auto& h : r.headers) extra += h.name.size() + h.value.size() + 4;
  out.reserve(out.size() + 160 + r.content_type.size() + meta.request_id.size() + extra +
              meta.extra_head.size() + (meta.omit_body ? 0 : r.body.size()));

  char num[24];
  int status = (r.status >= 100 && r.status <= 999) ? r.status : 500;
  out.append("HTTP/1.1 ", 9);
  out.append(num, std::to_chars(num, num + sizeof(num), status).ptr);
  out.push_back(' ');
  out.append(ReasonPhrase(status));
  out.append("\r\n", 2);
  if (!r.content_type.empty() && !HasCrOrLf(r.content_type))
    AppendHeader(out, "Content-Type", r.content_type);
  // RFC 9110 §8.6: a 204 carries no Content-Length (a preflight's answer).
  if (status != 204)
    AppendHeader(out, "Content-Length",
                 std::string_view(num, std::to_chars(num, num + sizeof(num), r.body.size()).ptr));
  if (!meta.request_id.empty()) AppendHeader(out, "X-Request-Id", meta.request_id);
  AppendHeader(out, "Connection", meta.close ? "close" : "keep-alive");
  for (const auto& h : r.headers) {
    if (h.name.empty() || HasCrOrLf(h.name) || HasCrOrLf(h.value)) continue;
    AppendHeader(out, h.name, h.value);
  }
  out.append(meta.extra_head);
  out.append("\r\n", 2);
  if (!meta.omit_body) out.append(r.body);
}

void AppendContinue(std::string& out) { out.append("HTTP/1.1 100 Continue\r\n\r\n"); }

}  // namespace rankd::http
