// RequestStream: the socket-free request parser of one connection. Fed the bytes a
// client sent, in pieces split anywhere, it vets head and trailer lines (HeadScanner:
// bare CR, folded lines), runs llhttp without lenient modes, enforces the head and body
// limits of HttpOptions and framing rules (CL+TE, duplicate CL, HTTP/1.0 with
// Transfer-Encoding), and stops after each complete request so that pipelined requests
// are handled one at a time, in order.
//
// Connection drives it from the socket; the `http` fuzz target (tests/fuzz/fuzz_http.cc)
// drives it from a byte buffer. No allocation per request beyond the Request's own
// strings (the parser, scanner and buffers are reused).
//
// Thread: one thread at a time (the owning connection's loop thread).
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "core/error.h"
#include "http/counters.h"
#include "http/head_scan.h"
#include "http/message.h"
#include "http/options.h"
#include "http/request_id.h"

namespace rankd::http {

class RequestStream {
 public:
  // `options` and `ids` must outlive the stream.
  RequestStream(const HttpOptions& options, RequestIdGenerator& ids);
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  enum class Outcome : uint8_t {
    kMore,     // consumed what it could; feed more bytes (or the rest of these)
    kRequest,  // a request is complete: take it with TakeRequest before feeding more
    kReject,   // the bytes are refused: see reject(); the stream must not be fed again
  };
  struct Step {
    size_t used = 0;
    Outcome outcome = Outcome::kMore;
    // The request's head asked for "100 Continue" (HTTP/1.1, a body expected): answer
    // it before anything this step produced.
    bool send_continue = false;
  };

  // Parses one step of `data`: at most one head (vetted line by line), or the body bytes
  // llhttp takes, up to the end of one request. Call again with data + used while
  // used < n and the outcome is kMore.
  Step Feed(const char* data, size_t n);

  // End of stream: true when the client stopped in the middle of a request.
  bool FinishCutShort();

  // REQUIRES: the last Feed returned kRequest.
  Request TakeRequest();
  // REQUIRES: the last Feed returned kReject.
  const std::pair<RejectKind, Error>& reject() const { return *reject_; }

  // A request has begun and is not complete.
  bool in_message() const { return in_message_; }
  // True once after a request began (its read timer starts then).
  bool TakeMessageBegun() { return std::exchange(message_begun_, false); }
  // Whether the client wants the connection kept after the request TakeRequest gave.
  bool keep_alive() const { return keep_alive_; }
  // The id of the request being parsed ("" before its X-Request-Id or head end).
  const std::string& current_request_id() const { return cur_.request_id; }

 private:
  enum class Scan : uint8_t { kHead, kBody, kTrailer };

  void Fail(RejectKind kind, Error e) { reject_.emplace(kind, std::move(e)); }
  void ResetMessage();

  static RequestStream* Self(llhttp_t* p) { return static_cast<RequestStream*>(p->data); }
  static int OnMessageBegin(llhttp_t* p);
  static int OnUrl(llhttp_t* p, const char* at, size_t len);
  static int OnHeaderField(llhttp_t* p, const char* at, size_t len);
  static int OnHeaderFieldComplete(llhttp_t* p);
  static int OnHeaderValue(llhttp_t* p, const char* at, size_t len);
  static int OnHeaderValueComplete(llhttp_t* p);
  static int OnHeadersComplete(llhttp_t* p);
  static int OnBody(llhttp_t* p, const char* at, size_t len);
  static int OnChunkHeader(llhttp_t* p);
  static int OnMessageComplete(llhttp_t* p);
  static const llhttp_settings_t* Settings();

  const HttpOptions& opt_;
  RequestIdGenerator& ids_;
  llhttp_t parser_{};
  Scan scan_ = Scan::kHead;
  HeadScanner scanner_;
  size_t head_bytes_ = 0;      // of the current head (or trailer section)
  bool in_message_ = false;
  bool message_begun_ = false;
  bool message_ready_ = false; // on_message_complete paused the parser
  bool last_chunk_ = false;    // on_chunk_header paused at the 0-size chunk
  bool field_open_ = false;    // an on_header_field span belongs to the last header
  bool seen_content_length_ = false;
  bool seen_transfer_encoding_ = false;
  bool expect_continue_ = false;
  bool send_continue_ = false;  // set by on_headers_complete for the current Feed
  bool keep_alive_ = true;
  std::optional<std::pair<RejectKind, Error>> reject_;
  Request cur_;
};

}  // namespace rankd::http
