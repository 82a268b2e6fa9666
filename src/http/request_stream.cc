#include "http/request_stream.h"

#include <cstring>
#include <string>

namespace rankd::http {

namespace {

void TrimTrailingSpace(std::string& s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
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
  Step step;
  send_continue_ = false;
  if (scan_ != Scan::kBody) {
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
        Fail(RejectKind::kHeadTooLarge,
             Error{ErrorCode::kHeadersTooLarge,
                   (scan_ == Scan::kHead ? "request head over " : "request trailers over ") +
                       std::to_string(opt_.max_head_bytes) + " bytes"});
        break;
      }
      head_bytes_ += l;
      HeadScanResult scan = scanner_.Scan({line, l});
      if (scan == HeadScanResult::kBareCr) {
        Fail(RejectKind::kBareCr, Error::BadRequest("bare CR (not followed by LF) in the request head"));
        break;
      }
      if (scan == HeadScanResult::kFoldedLine) {
        Fail(RejectKind::kFoldedHeader,
             Error::BadRequest("obsolete folded header line in the request head"));
        break;
      }
      take += l;
      // An empty line ends the head: what follows is body (or the next request).
      // Stopping early on a short line is always safe; it only costs another call.
      bool short_line = l == 1 || (l == 2 && line[0] == '\r');
      if (!lf || short_line) break;
    }
    if (reject_) {
      // The lines before the bad one are clean: let llhttp read them, so that the
      // error answer still knows what they said (X-Request-Id, keep-alive). A reject
      // from its callbacks meanwhile would only repeat the verdict: keep ours.
      auto bad = std::move(*reject_);
      reject_.reset();
      if (take > 0) (void)llhttp_execute(&parser_, seg, take);
      reject_ = std::move(bad);
      in_message_ = false;
      step.send_continue = send_continue_;
      step.outcome = Outcome::kReject;
      return step;
    }
    len = take;
  }
  llhttp_errno_t err = llhttp_execute(&parser_, seg, len);
  step.used = len;
  step.send_continue = send_continue_;
  if (err == HPE_PAUSED) {
    step.used = static_cast<size_t>(llhttp_get_error_pos(&parser_) - seg);
    llhttp_resume(&parser_);
  } else if (err != HPE_OK) {
    if (!reject_)
      Fail(RejectKind::kMalformed,
           Error::BadRequest(std::string("malformed request: ") + llhttp_errno_name(err) + " (" +
                             llhttp_get_error_reason(&parser_) + ")"));
    in_message_ = false;
    step.outcome = Outcome::kReject;
    return step;
  }
  if (message_ready_) {
    message_ready_ = false;
    step.outcome = Outcome::kRequest;
  } else if (last_chunk_) {
    // After the 0-size chunk come trailer lines: vet them like the head.
    last_chunk_ = false;
    scan_ = Scan::kTrailer;
    scanner_.Reset();
    head_bytes_ = 0;
  }
  return step;
}

bool RequestStream::FinishCutShort() { return llhttp_finish(&parser_) != HPE_OK && in_message_; }

Request RequestStream::TakeRequest() {
  cur_.keep_alive = keep_alive_;
  Request req = std::move(cur_);
  cur_ = Request{};
  return req;
}

void RequestStream::ResetMessage() {
  cur_.target.clear();
  cur_.headers.clear();
  cur_.body.clear();
  cur_.request_id.clear();
  field_open_ = false;
  seen_content_length_ = false;
  seen_transfer_encoding_ = false;
  expect_continue_ = false;
}

int RequestStream::OnMessageBegin(llhttp_t* p) {
  RequestStream* s = Self(p);
  s->ResetMessage();
  s->in_message_ = true;
  s->message_begun_ = true;
  return 0;
}

int RequestStream::OnUrl(llhttp_t* p, const char* at, size_t len) {
  Self(p)->cur_.target.append(at, len);
  return 0;
}

int RequestStream::OnHeaderField(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  if (s->scan_ != Scan::kHead) return 0;  // trailers: vetted and counted, not kept
  if (!s->field_open_) {
    s->cur_.headers.emplace_back();
    s->field_open_ = true;
  }
  s->cur_.headers.back().name.append(at, len);
  return 0;
}

int RequestStream::OnHeaderFieldComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  if (s->scan_ != Scan::kHead) return 0;
  s->field_open_ = false;
  if (s->cur_.headers.empty()) return 0;
  // Decide on framing headers by name, before llhttp parses their values: ours is the
  // error the client sees, with a precise message.
  const std::string& name = s->cur_.headers.back().name;
  if (EqualsIgnoreCase(name, "content-length")) {
    if (s->seen_content_length_) {
      s->Fail(RejectKind::kDuplicateContentLength, Error::BadRequest("duplicate Content-Length header"));
      return -1;
    }
    if (s->seen_transfer_encoding_) {
      s->Fail(RejectKind::kContentLengthAndTransferEncoding,
              Error::BadRequest("both Content-Length and Transfer-Encoding"));
      return -1;
    }
    s->seen_content_length_ = true;
  } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
    if (s->seen_content_length_) {
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
    s->seen_transfer_encoding_ = true;
  }
  return 0;
}

int RequestStream::OnHeaderValue(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  if (s->scan_ != Scan::kHead || s->cur_.headers.empty()) return 0;
  s->cur_.headers.back().value.append(at, len);
  return 0;
}

int RequestStream::OnHeaderValueComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  if (s->scan_ != Scan::kHead || s->cur_.headers.empty()) return 0;
  RequestHeader& h = s->cur_.headers.back();
  TrimTrailingSpace(h.value);
  if (EqualsIgnoreCase(h.name, "x-request-id")) {
    if (s->cur_.request_id.empty() && IsValidRequestId(h.value)) s->cur_.request_id = h.value;
  } else if (EqualsIgnoreCase(h.name, "expect")) {
    if (EqualsIgnoreCase(h.value, "100-continue")) s->expect_continue_ = true;
  }
  return 0;
}

int RequestStream::OnHeadersComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  const HttpOptions& opt = s->opt_;
  s->scan_ = Scan::kBody;
  s->cur_.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
  s->cur_.http_major = p->http_major;
  s->cur_.http_minor = p->http_minor;
  if (s->cur_.request_id.empty()) s->cur_.request_id = s->ids_.Next();
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
  if (s->expect_continue_ && body_expected && p->http_major == 1 && p->http_minor >= 1)
    s->send_continue_ = true;
  if (has_length) s->cur_.body.reserve(static_cast<size_t>(p->content_length));
  return 0;
}

int RequestStream::OnBody(llhttp_t* p, const char* at, size_t len) {
  RequestStream* s = Self(p);
  size_t limit = s->opt_.max_body_bytes;
  if (s->cur_.body.size() + len > limit) {  // chunked bodies grow past any announcement
    s->Fail(RejectKind::kBodyTooLarge,
            Error{ErrorCode::kPayloadTooLarge,
                  "chunked request body over the limit of " + std::to_string(limit) + " bytes"});
    return -1;
  }
  s->cur_.body.append(at, len);
  return 0;
}

int RequestStream::OnChunkHeader(llhttp_t* p) {
  if (p->content_length != 0) return 0;
  Self(p)->last_chunk_ = true;
  return HPE_PAUSED;  // Feed switches to vetting the trailer lines
}

int RequestStream::OnMessageComplete(llhttp_t* p) {
  RequestStream* s = Self(p);
  s->message_ready_ = true;
  s->in_message_ = false;
  // An upgrade (or CONNECT) would turn the stream into another protocol: answer, close.
  s->keep_alive_ = llhttp_should_keep_alive(p) != 0 && p->upgrade == 0;
  s->cur_.read_done = Clock::now();
  s->scan_ = Scan::kHead;
  s->scanner_.Reset();
  s->head_bytes_ = 0;
  // Pause: the next pipelined request is parsed only once this one is taken, so
  // responses leave in request order and at most one request per connection is live.
  return HPE_PAUSED;
}

}  // namespace rankd::http
