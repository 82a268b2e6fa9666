// RequestStream: the socket-free request parser of one connection. Fed the bytes a
// client sent, in pieces split anywhere, it vets head and trailer lines (HeadScanner:
// bare CR, folded lines), runs llhttp without lenient modes, enforces the head and body
// limits of HttpOptions and framing rules (CL+TE, duplicate CL, HTTP/1.0 with
// Transfer-Encoding), and stops after each complete request so that pipelined requests
// are handled one at a time, in order.
//
// Connection drives it from the socket; the `http` fuzz target (tests/fuzz/fuzz_http.cc)
// drives it from a byte buffer. Nothing is allocated per request but the Request's own
// strings, which come from the thread's block pool (the parser, scanner and buffers are
// reused).
//
// Thread: any, one at a time. It touches no socket and no loop, so it does not check
// which thread calls it; a Connection calls it from its loop thread only.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "http/body_buffer.h"
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
    // A request began in this step (its read time starts now).
    bool message_begun = false;
    // A request's head was completed in this step.
    bool head_complete = false;
  };

  // Parses one step of `data`: at most one head (vetted line by line), or the body bytes
  // llhttp takes, up to the end of one request. Call again with data + used while
  // used < n and the outcome is kMore.
  // REQUIRES: the last step's outcome was not kReject, and a kRequest was taken.
  Step Feed(const char* data, size_t n);

  // End of stream: true when the client stopped in the middle of a request.
  bool FinishCutShort();

  // REQUIRES: the last Feed returned kRequest.
  Request TakeRequest();
  // The connection parses nothing more (it answered an error and closes): frees what
  // the request under way holds, its body above all.
  void Abandon() { msg_ = Message{}; }
  // REQUIRES: the last Feed returned kReject.
  using Refusal = std::pair<RejectKind, Error>;
  const Refusal& reject() const { return *reject_; }

  // A request has begun and is not complete.
  bool in_message() const {
    return phase_ == Phase::kHead || phase_ == Phase::kBody || phase_ == Phase::kTrailer;
  }
  // The id of the request being parsed ("" before its X-Request-Id or head end).
  const std::string& current_request_id() const { return msg_.req.request_id; }

  // Heap bytes the request being parsed holds — its head (target, header list and
  // strings) and its body — 0 between requests: what the connection charges against
  // the shard's input budget until the request is taken. O(1).
  size_t bytes_held() const { return head_bytes_held() + msg_.body.held(); }

 private:
  // Where the stream is. Head and trailer lines are vetted before llhttp sees them;
  // body bytes go to llhttp as they are.
  enum class Phase : uint8_t {
    kIdle,      // between requests: head lines are vetted, none has begun
    kHead,      // a request began (llhttp's on_message_begin); its head is arriving
    kBody,      // the head is complete; body bytes (or chunks) are arriving
    kTrailer,   // the last chunk arrived; trailer lines are vetted like the head
    kComplete,  // a request is complete: llhttp is paused until TakeRequest
    kRejected,  // the bytes were refused (reject()); nothing more is parsed
  };

  // The request being parsed: replaced as a whole when it is taken, so that nothing of
  // one request leaks into the next.
  struct Message {
    Request req;
    bool field_open = false;  // an on_header_field span belongs to the last header
    bool seen_content_length = false;
    bool seen_transfer_encoding = false;
    bool expect_continue = false;
    // The body while it arrives (de-chunked); req.body once the request is complete.
    BodyBuffer body;
    // Header lines seen, trailers included (max_headers).
    size_t header_lines = 0;
    // Heap bytes of the strings of headers[0, counted_headers): each header's are
    // added once its value is complete, so that bytes_held() needs no loop.
    size_t head_strings = 0;
    size_t counted_headers = 0;
  };

  // Every phase change goes through Enter, which asserts that it is one of these.
  static bool Allowed(Phase from, Phase to);
  void Enter(Phase next);
  // Head or trailer section start: their lines are vetted and counted afresh.
  void BeginSection(Phase next);
  void Fail(RejectKind kind, Error e);
  // One more header or trailer line: false (and the request refused) past max_headers.
  bool CountHeaderLine();
  size_t head_bytes_held() const;
  // The head or trailer lines at the start of `data` that pass the checks, up to the
  // empty line that ends the section (or the end of the data): their length. A line
  // refused leaves its verdict in `refused`.
  size_t VetLines(const char* data, size_t n, std::optional<Refusal>& refused);
  bool VetsLines() const {
    return phase_ == Phase::kIdle || phase_ == Phase::kHead || phase_ == Phase::kTrailer;
  }

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
  Phase phase_ = Phase::kIdle;
  HeadScanner scanner_;
  size_t head_bytes_ = 0;  // of the current head (or trailer section)
  Step step_;              // what the Feed in progress produced (callbacks add to it)
  std::optional<Refusal> reject_;
  Message msg_;
};

}  // namespace rankd::http
