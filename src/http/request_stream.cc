#include "http/request_stream.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <string>

namespace rankd::http {

namespace {

void TrimTrailingSpace(PoolString& s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
}

// What a string holds on the heap: nothing while it fits its inline buffer, else its
// capacity and terminator, rounded up to the block pool's granule.
size_t HeapBytes(const PoolString& s) {
  static const size_t kInline = PoolString().capacity();
  if (s.capacity() <= kInline) return 0;
  constexpr size_t g = block_pool::kGranule;
  return (s.capacity() + 1 + g - 1) / g * g;
}

size_t HeapBytes(const RequestHeader& h) { return HeapBytes(h.name) + HeapBytes(h.value); }

// Header names the parser notes as they complete (its switch is on the length first,
// so that most names cost one comparison of sizes).
bool NameIs(const PoolString& name, std::string_view lower) {
  return name.size() == lower.size() && EqualsIgnoreCase(name, lower);
}

}  // namespace

const llhttp_settings_t* RequestStream::Settings() {
  static const llhttp_settings_t settings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = &RequestStream::OnMessageBegin;
    s.on_url = &RequestStream::OnUrl;
    s.on_header_field = &RequestStream::OnHeaderField;
    s.on_header_field_complete = &RequestStream::OnHeaderFieldComplete;
    s.on_header_value = &RequestStream::OnHeaderValue;
    s.on_header_value_complete = &RequestStream::OnHeaderValueComplete;
    s.on_headers_complete = &RequestStream::OnHeadersComplete;
    s.on_body = &RequestStream::OnBody;
    s.on_chunk_header = &RequestStream::OnChunkHeader;
    s.on_message_complete = &RequestStream::OnMessageComplete;
    return s;
  }();
  return &settings;
}

RequestStream::RequestStream(const HttpOptions& options, RequestIdGenerator& ids)
    : opt_(options), ids_(ids) {
  // No llhttp_set_lenient_*: every lenient mode reopens a smuggling hole.
  llhttp_init(&parser_, HTTP_REQUEST, Settings());
  parser_.data = this;
}

RequestStream::Step RequestStream::Feed(const char* seg, size_t len) {
  assert(phase_ != Phase::kComplete && phase_ != Phase::kRejected);
  step_ = Step{};
  if (VetsLines()) {
    std::optional<Refusal> refused;
    len = VetLines(seg, len, refused);
    if (refused) {
      // The lines before the bad one are clean: let llhttp read them, so that the
      // error answer still knows what they said (X-Request-Id, keep-alive). A verdict
      // from its callbacks meanwhile would only repeat ours: ours stands.
      if (len > 0) (void)llhttp_execute(&parser_, seg, len);
      if (phase_ != Phase::kRejected) Enter(Phase::kRejected);
      reject_ = std::move(refused);
      step_.outcome = Outcome::kReject;
      return step_;
    }
  }
  llhttp_errno_t err = llhttp_execute(&parser_, seg, len);
  step_.used = len;
  if (err == HPE_PAUSED) {  // a request is complete, or the trailers begin
    step_.used = static_cast<size_t>(llhttp_get_error_pos(&parser_) - seg);
    llhttp_resume(&parser_);
  } else if (err != HPE_OK) {
    if (phase_ != Phase::kRejected)  // a callback's verdict is the more precise one
      Fail(RejectKind::kMalformed,
           Error::BadRequest(std::string("malformed request: ") + llhttp_errno_name(err) + " (" +
                             llhttp_get_error_reason(&parser_) + ")"));
    step_.outcome = Outcome::kReject;
    return step_;
  }
  if (phase_ == Phase::kComplete) step_.outcome = Outcome::kRequest;
  return step_;
}

size_t RequestStream::VetLines(const char* seg, size_t len, std::optional<Refusal>& refused) {
  // Head bytes are vetted line by line before llhttp sees them, so that llhttp never
  // sees a byte that follows a bare CR or starts a folded line. The vetted lines go
  // to llhttp together, up to the empty line that ends the head (or the end of what
  // we have): one llhttp call per head, not one per line.
  size_t take = 0;
  while (take < len) {
    const char* line = seg + take;
    size_t rest = len - take;
    const void* lf = std::memchr(line, '\n', rest);
    size_t l = lf ? static_cast<size_t>(static_cast<const char*>(lf) - line) + 1 : rest;
    if (head_bytes_ + l > opt_.max_head_bytes) {
      refused.emplace(
          RejectKind::kHeadTooLarge,
          Error{ErrorCode::kHeadersTooLarge,
                (phase_ == Phase::kTrailer ? "request trailers over " : "request head over ") +
                    std::to_string(opt_.max_head_bytes) + " bytes"});
      break;
    }
    head_bytes_ += l;
    HeadScanResult scan = scanner_.Scan({line, l});
    if (scan == HeadScanResult::kBareCr) {
      refused.emplace(RejectKind::kBareCr,
                      Error::BadRequest("bare CR (not followed by LF) in the request head"));
      break;
    }
    if (scan == HeadScanResult::kFoldedLine) {
      refused.emplace(RejectKind::kFoldedHeader,
                      Error::BadRequest("obsolete folded header line in the request head"));
      break;
    }
    take += l;
    // An empty line ends the head: what follows is body (or the next request).
    // Stopping early on a short line is always safe; it only costs another call.
    bool short_line = l == 1 || (l == 2 && line[0] == '\r');
    if (!lf || short_line) break;
  }
  return take;
}

size_t RequestStream::head_bytes_held() const {
  const Message& m = msg_;
  size_t n =
      m.head_strings + HeapBytes(m.req.target) + m.req.headers.capacity() * sizeof(RequestHeader);
  // The header under way, whose value is not complete yet (at most one).
  for (size_t i = m.counted_headers; i < m.req.headers.size(); ++i)
    n += HeapBytes(m.req.headers[i]);
  return n;
}

bool RequestStream::CountHeaderLine() {
  if (++msg_.header_lines <= opt_.max_headers) return true;
  Fail(RejectKind::kTooManyHeaders,
       Error{ErrorCode::kHeadersTooLarge, "more than " + std::to_string(opt_.max_headers) +
                                              " header lines in the request (trailers included)"});
  return false;
}

bool RequestStream::FinishCutShort() { return llhttp_finish(&parser_) != HPE_OK && in_message(); }

Request RequestStream::TakeRequest() {
  Request req = std::move(msg_.req);
  msg_ = Message{};
  BeginSection(Phase::kIdle);  // the next request's head
  return req;
}

// The phase changes a well-formed stream makes; any phase but a complete request may
// turn to a refusal.
bool RequestStream::Allowed(Phase from, Phase to) {
  using P = Phase;
  switch (to) {
    case P::kIdle: return from == P::kComplete;
    case P::kHead: return from == P::kIdle;
    case P::kBody: return from == P::kHead;
    case P::kTrailer: return from == P::kBody;
    case P::kComplete: return from == P::kBody || from == P::kTrailer;
    case P::kRejected: return from != P::kComplete && from != P::kRejected;
  }
  return false;
}

void RequestStream::Enter(Phase next) {
  assert(Allowed(phase_, next));
  phase_ = next;
}

void RequestStream::BeginSection(Phase next) {
  Enter(next);
  scanner_.Reset();
  head_bytes_ = 0;
}

void RequestStream::Fail(RejectKind kind, Error e) {
  Enter(Phase::kRejected);
  reject_.emplace(kind, std::move(e));
}

int RequestStream::OnMessageBegin(llhttp_t* p) {
  RequestStream* s = Self(p);
  s->Enter(Phase::kHead);
  s->step_.message_begun = true;
  return 0;
}

int RequestStream::OnUrl(llhttp_t* p, const char* at, size_t len) {
  Self(p)->msg_.req.target.append(at, len);
  return 0;
}

int RequestStream::OnHeaderField(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  if (s->phase_ != Phase::kHead) return 0;  // trailers: vetted and counted, not kept
  Message& m = s->msg_;
  if (!m.field_open) {
    // One block for a typical client's headers instead of a regrowth per doubling.
    if (m.req.headers.capacity() == 0) m.req.headers.reserve(8);
    m.req.headers.emplace_back();
    m.field_open = true;
  }
  m.req.headers.back().name.append(at, len);
  return 0;
}

int RequestStream::OnHeaderFieldComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  if (!s->CountHeaderLine()) return -1;
  if (s->phase_ != Phase::kHead) return 0;
  Message& m = s->msg_;
  m.field_open = false;
  if (m.req.headers.empty()) return 0;
  // Decide on framing headers by name, before llhttp parses their values: ours is the
  // error the client sees, with a precise message.
  const PoolString& name = m.req.headers.back().name;
  if (EqualsIgnoreCase(name, "content-length")) {
    if (m.seen_content_length) {
      s->Fail(RejectKind::kDuplicateContentLength,
              Error::BadRequest("duplicate Content-Length header"));
      return -1;
    }
    if (m.seen_transfer_encoding) {
      s->Fail(RejectKind::kContentLengthAndTransferEncoding,
              Error::BadRequest("both Content-Length and Transfer-Encoding"));
      return -1;
    }
    m.seen_content_length = true;
  } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
    if (m.seen_content_length) {
      s->Fail(RejectKind::kContentLengthAndTransferEncoding,
              Error::BadRequest("both Content-Length and Transfer-Encoding"));
      return -1;
    }
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means its framing is
    // faulty (1.0 has no chunked coding; a 1.0 proxy in front may frame it otherwise):
    // refuse it and close rather than guess where the body ends.
    if (p->http_major == 1 && p->http_minor == 0) {
      s->Fail(RejectKind::kTransferEncodingHttp10,
              Error::BadRequest("Transfer-Encoding in an HTTP/1.0 request"));
      return -1;
    }
    m.seen_transfer_encoding = true;
  }
  return 0;
}

int RequestStream::OnHeaderValue(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  if (s->phase_ != Phase::kHead || s->msg_.req.headers.empty()) return 0;
  s->msg_.req.headers.back().value.append(at, len);
  return 0;
}

int RequestStream::OnHeaderValueComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  Message& m = s->msg_;
  if (s->phase_ != Phase::kHead || m.req.headers.empty()) return 0;
  RequestHeader& h = m.req.headers.back();
  TrimTrailingSpace(h.value);
  m.head_strings += HeapBytes(h);
  m.counted_headers = m.req.headers.size();
  auto at = static_cast<uint16_t>(m.req.headers.size() - 1);
  switch (h.name.size()) {
    case 4:
      if (!NameIs(h.name, "host")) break;
      // RFC 9112 §3.2: two Host lines are refused, so that nobody behind or in front of
      // us can read another one than the one the Host check read.
      if (m.req.host_at != Request::kNoHeader) {
        s->Fail(RejectKind::kDuplicateHost, Error::BadRequest("more than one Host header"));
        return -1;
      }
      m.req.host_at = at;
      break;
    case 6:
      if (NameIs(h.name, "origin")) {
        if (m.req.origin_count++ == 0) m.req.origin_at = at;
      } else if (NameIs(h.name, "expect") && EqualsIgnoreCase(h.value, "100-continue")) {
        m.expect_continue = true;
      }
      break;
    case 12:
      if (NameIs(h.name, "x-request-id") && m.req.request_id.empty() && IsValidRequestId(h.value))
        m.req.request_id = h.value;
      break;
    default: break;
  }
  return 0;
}

int RequestStream::OnHeadersComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  const HttpOptions& opt = s->opt_;
  Message& m = s->msg_;
  s->Enter(Phase::kBody);
  m.req.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
  m.req.http_major = p->http_major;
  m.req.http_minor = p->http_minor;
  if (m.req.request_id.empty()) m.req.request_id = s->ids_.Next();
  bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
  if (has_length && p->content_length > opt.max_body_bytes) {
    // Refuse before the body arrives (and instead of "100 Continue").
    s->Fail(RejectKind::kBodyTooLarge,
            Error{ErrorCode::kPayloadTooLarge,
                  "request body of " + std::to_string(p->content_length) +
                      " bytes is over the limit of " + std::to_string(opt.max_body_bytes)});
    return -1;
  }
  bool body_expected = (p->flags & F_CHUNKED) != 0 || (has_length && p->content_length > 0);
  // Sent before this request's answer; the parser was paused until the previous
  // request was answered, so it also follows every earlier response.
  if (m.expect_continue && body_expected && p->http_major == 1 && p->http_minor >= 1)
    s->step_.send_continue = true;
  // No reserve(content_length) here: a head costs a client a few bytes, and the body's
  // memory is taken only as its bytes arrive (OnBody).
  s->step_.head_complete = true;
  return 0;
}

int RequestStream::OnBody(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  BodyBuffer& body = s->msg_.body;
  size_t limit = s->opt_.max_body_bytes;
  if (body.size() + len > limit) {  // chunked bodies grow past any announcement
    s->Fail(RejectKind::kBodyTooLarge,
            Error{ErrorCode::kPayloadTooLarge,
                  "chunked request body over the limit of " + std::to_string(limit) + " bytes"});
    return -1;
  }
  body.Append({at, len});
  return 0;
}

int RequestStream::OnChunkHeader(llhttp_t* p) {
  if (p->content_length != 0) return 0;
  // The 0-size chunk: trailer lines follow. Pause, so that Feed vets them like the head.
  Self(p)->BeginSection(Phase::kTrailer);
  return HPE_PAUSED;
}

int RequestStream::OnMessageComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  Request& req = s->msg_.req;
  req.body = s->msg_.body.Take();
  // An upgrade (or CONNECT) would turn the stream into another protocol: answer, close.
  req.keep_alive = llhttp_should_keep_alive(p) != 0 && p->upgrade == 0;
  req.read_done = Clock::now();
  s->Enter(Phase::kComplete);
  // Pause: the next pipelined request is parsed only once this one is taken, so
  // responses leave in request order and at most one request per connection is live.
  return HPE_PAUSED;
}

}  // namespace rankd::http
