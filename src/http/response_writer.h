// Serialises responses into a connection's output buffer: the status line, the
// header block and the body are appended to one std::string so that each response
// leaves in a single contiguous write, and the buffer's capacity is reused.
// Pure functions: any thread.
#pragma once

#include <string>
#include <string_view>

#include "http/message.h"

namespace rankd::http {

struct ResponseMeta {
  std::string_view request_id;
  bool close = false;      // "Connection: close" (else "Connection: keep-alive")
  bool omit_body = false;  // HEAD: Content-Length of the body, but no body bytes
  // Header lines ("Name: value\r\n" each) already checked, added after r.headers.
  std::string_view extra_head;
};

// "OK", "Not Found", ...; "Unknown" for codes we do not name.
std::string_view ReasonPhrase(int status);

// Appends one full response (head + body) to `out`.
void AppendResponse(std::string& out, const Response& r, const ResponseMeta& meta);

// Appends "HTTP/1.1 100 Continue\r\n\r\n".
void AppendContinue(std::string& out);

}  // namespace rankd::http
