// Request and Response: what the HTTP layer hands a handler and what a handler answers.
// Plain value types: any thread (a Request is built on its connection's loop thread
// and then belongs to the handler).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/block_pool.h"
#include "core/deadline.h"

namespace rankd::http {

// A header as the client sent it (name case preserved, value without surrounding
// spaces). Request heads are capped (16 KiB by default), so keeping all of them is bounded.
// A request's strings and header list come from the thread's block pool
// (core/block_pool.h): a keep-alive client's requests reuse the same blocks.
struct RequestHeader {
  PoolString name;
  PoolString value;
};

struct Request {
  std::string_view method;  // "GET", "POST", ...: static strings from llhttp
  PoolString target;        // the raw request-target, e.g. "/rank?x=1"
  PoolVector<RequestHeader> headers;
  PoolString body;         // de-chunked
  std::string request_id;  // echoed from X-Request-Id when valid, else generated
  bool keep_alive = true;  // the client's wish; the response may still close (drain)
  uint8_t http_major = 1;
  uint8_t http_minor = 1;
  TimePoint read_done{};  // when the last byte of the request was parsed
  // Where the parser found Host and Origin among `headers` (kNoHeader: absent), so that
  // routing reads them without a scan. A second Origin line makes origin_count 2.
  static constexpr uint16_t kNoHeader = UINT16_MAX;
  uint16_t host_at = kNoHeader;
  uint16_t origin_at = kNoHeader;
  uint8_t origin_count = 0;

  // The target up to '?', and what follows it (without the '?').
  std::string_view path() const;
  std::string_view query() const;
  // The first header with this name (ASCII case-insensitive), or "" when absent.
  std::string_view header(std::string_view name) const;
  std::string_view content_type() const { return header("content-type"); }
  // The Host and (first) Origin header values, "" when absent.
  std::string_view host() const { return At(host_at); }
  std::string_view origin() const { return At(origin_at); }

 private:
  std::string_view At(uint16_t i) const {
    return i == kNoHeader ? std::string_view{} : std::string_view(headers[i].value);
  }
};

// An extra response header. The writer drops headers whose name or value holds CR or
// LF, so a handler cannot split the response by mistake.
struct HeaderField {
  std::string_view name;
  std::string_view value;
};

// What a handler answers. Views only: the layer copies them into the connection's
// output buffer before Send returns.
struct Response {
  int status = 200;
  std::string_view body;
  std::string_view content_type = "application/json";
  std::span<const HeaderField> headers;  // extra headers, e.g. Retry-After, Allow
};

// ASCII case-insensitive equality, for header names and tokens.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace rankd::http
