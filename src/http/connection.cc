#include "http/connection.h"

#include <cassert>
#include <cstring>
#include <optional>

#include "http/listener.h"
#include "http/request_id.h"
#include "http/response_writer.h"

namespace rankd::http {

namespace {

// Output buffers and the input buffer keep their capacity between requests (no
// allocation per response), but not a huge one left behind by a single large body.
constexpr size_t kKeepCapacity = 256 * 1024;

void TrimTrailingSpace(std::string& s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
}

void ReleaseIfHuge(std::string& s) {
  if (s.empty() && s.capacity() > kKeepCapacity) std::string().swap(s);
}

Connection* Self(llhttp_t* p) { return static_cast<Connection*>(p->data); }

}  // namespace

const llhttp_settings_t* Connection::Settings() {
  static const llhttp_settings_t settings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_message_begin = &Connection::OnMessageBegin;
    s.on_url = &Connection::OnUrl;
    s.on_header_field = &Connection::OnHeaderField;
    s.on_header_field_complete = &Connection::OnHeaderFieldComplete;
    s.on_header_value = &Connection::OnHeaderValue;
    s.on_header_value_complete = &Connection::OnHeaderValueComplete;
    s.on_headers_complete = &Connection::OnHeadersComplete;
    s.on_body = &Connection::OnBody;
    s.on_chunk_header = &Connection::OnChunkHeader;
    s.on_message_complete = &Connection::OnMessageComplete;
    return s;
  }();
  return &settings;
}

Connection::Connection(Listener* listener) : listener_(listener) {}

Connection::~Connection() = default;

int Connection::Accept(uv_stream_t* server) {
  uv_tcp_init(listener_->loop_.uv(), &tcp_);
  tcp_.data = this;
  write_req_.data = this;
  shutdown_req_.data = this;
  self_ = shared_from_this();
  int rc = uv_accept(server, reinterpret_cast<uv_stream_t*>(&tcp_));
  if (rc < 0) {
    phase_ = Phase::kClosed;
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::OnClose);
    return rc;
  }
  // Responses leave in one write each; Nagle would only delay them.
  uv_tcp_nodelay(&tcp_, 1);
  timer_ = listener_->loop_.AcquireTimer();
  timer_->data = this;
  // No llhttp_set_lenient_*: every lenient mode reopens a smuggling hole.
  llhttp_init(&parser_, HTTP_REQUEST, Settings());
  parser_.data = this;
  Settle();  // starts reading and the idle timer
  return 0;
}

bool Connection::CanParse() const {
  return phase_ == Phase::kOpen && !handler_pending_ &&
         Unsent() <= listener_->options_.max_pending_output;
}

// --- input -------------------------------------------------------------------------------

bool Connection::TurnOverBudget() const { return listener_->loop_.TurnOverBudget(); }

void Connection::Park() {
  if (parked_) return;
  parked_ = true;
  ++listener_->counters_.parked_reads;
  listener_->Park(shared_from_this());
}

void Connection::Unpark(bool first) {
  parked_ = false;
  // The first of a batch goes ahead even when the turn is already over budget, so
  // that every turn makes progress whatever the budget (and however preempted).
  must_progress_ = first;
  Settle();
  must_progress_ = false;
}

void Connection::OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(h->data);
  *buf = uv_buf_init(c->listener_->scratch_.get(), Listener::kScratchBytes);
}

void Connection::OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(s->data);
  if (nread < 0) {
    c->reading_ = false;  // libuv stops reading by itself after EOF or an error
    if (nread != UV_EOF) {
      c->CloseNow();
      return;
    }
    c->peer_eof_ = true;
    if (c->phase_ == Phase::kLinger) {
      c->CloseNow();
      return;
    }
    c->Settle();
    return;
  }
  if (nread == 0) return;
  c->listener_->counters_.bytes_read += static_cast<uint64_t>(nread);
  if (c->phase_ != Phase::kOpen) return;  // closing: read only to discard
  const char* data = buf->base;
  size_t n = static_cast<size_t>(nread);
  if (c->in_off_ == c->in_buf_.size() && c->CanParse() && !c->TurnOverBudget()) {
    // The common case: parse straight from the shared buffer, keep only the rest.
    size_t used = c->Process(data, n);
    if (c->phase_ == Phase::kOpen && used < n) c->in_buf_.append(data + used, n - used);
  } else {
    c->in_buf_.append(data, n);
  }
  c->Settle();
}

size_t Connection::Process(const char* data, size_t n) {
  const HttpOptions& opt = listener_->options_;
  size_t off = 0;
  in_process_ = true;
  // Between pipelined requests, a turn over budget stops here: Settle parks the rest.
  bool dispatched = false;
  while (off < n && CanParse() && !(dispatched && TurnOverBudget())) {
    const char* seg = data + off;
    size_t len = n - off;
    if (scan_ != Scan::kBody) {
      // Head bytes are vetted line by line before llhttp sees them, so that llhttp never
      // sees a byte that follows a bare CR or starts a folded line. The vetted lines go
      // to llhttp together, up to the empty line that ends the head (or the end of what
      // we have): one llhttp call per head, not one per line.
      size_t take = 0;
      std::optional<std::pair<RejectKind, Error>> bad;
      while (take < len) {
        const char* line = seg + take;
        size_t rest = len - take;
        const void* lf = std::memchr(line, '\n', rest);
        size_t l = lf ? static_cast<size_t>(static_cast<const char*>(lf) - line) + 1 : rest;
        if (head_bytes_ + l > opt.max_head_bytes) {
          bad.emplace(RejectKind::kHeadTooLarge,
                      Error{ErrorCode::kHeadersTooLarge,
                            (scan_ == Scan::kHead ? "request head over " : "request trailers over ") +
                                std::to_string(opt.max_head_bytes) + " bytes"});
          break;
        }
        head_bytes_ += l;
        HeadScanResult scan = scanner_.Scan({line, l});
        if (scan == HeadScanResult::kBareCr) {
          bad.emplace(RejectKind::kBareCr,
                      Error::BadRequest("bare CR (not followed by LF) in the request head"));
          break;
        }
        if (scan == HeadScanResult::kFoldedLine) {
          bad.emplace(RejectKind::kFoldedHeader,
                      Error::BadRequest("obsolete folded header line in the request head"));
          break;
        }
        take += l;
        // An empty line ends the head: what follows is body (or the next request).
        // Stopping early on a short line is always safe; it only costs another call.
        bool short_line = l == 1 || (l == 2 && line[0] == '\r');
        if (!lf || short_line) break;
      }
      if (bad) {
        // The lines before the bad one are clean: let llhttp read them, so that the
        // error answer still knows what they said (X-Request-Id, keep-alive).
        if (take > 0) (void)llhttp_execute(&parser_, seg, take);
        Reject(bad->first, std::move(bad->second));
        break;
      }
      len = take;
    }
    llhttp_errno_t err = llhttp_execute(&parser_, seg, len);
    size_t used = len;
    if (err == HPE_PAUSED) {
      used = static_cast<size_t>(llhttp_get_error_pos(&parser_) - seg);
      llhttp_resume(&parser_);
    } else if (err != HPE_OK) {
      if (reject_) {
        auto r = std::move(*reject_);
        reject_.reset();
        Reject(r.first, std::move(r.second));
      } else {
        Reject(RejectKind::kMalformed,
               Error::BadRequest(std::string("malformed request: ") + llhttp_errno_name(err) +
                                 " (" + llhttp_get_error_reason(&parser_) + ")"));
      }
      break;
    }
    off += used;
    if (message_ready_) {
      message_ready_ = false;
      dispatched = true;
      Dispatch();
    } else if (last_chunk_) {
      // After the 0-size chunk come trailer lines: vet them like the head.
      last_chunk_ = false;
      scan_ = Scan::kTrailer;
      scanner_.Reset();
      head_bytes_ = 0;
    }
  }
  in_process_ = false;
  return off;
}

void Connection::ResetMessage() {
  cur_.target.clear();
  cur_.headers.clear();
  cur_.body.clear();
  cur_.request_id.clear();
  field_open_ = false;
  seen_content_length_ = false;
  seen_transfer_encoding_ = false;
  expect_continue_ = false;
}

int Connection::OnMessageBegin(llhttp_t* p) {
  Connection* c = Self(p);
  c->ResetMessage();
  c->in_message_ = true;
  c->restart_read_timer_ = true;
  return 0;
}

int Connection::OnUrl(llhttp_t* p, const char* at, size_t len) {
  Self(p)->cur_.target.append(at, len);
  return 0;
}

int Connection::OnHeaderField(llhttp_t* p, const char* at, size_t len) {
  Connection* c = Self(p);
  if (c->scan_ != Scan::kHead) return 0;  // trailers: vetted and counted, not kept
  if (!c->field_open_) {
    c->cur_.headers.emplace_back();
    c->field_open_ = true;
  }
  c->cur_.headers.back().name.append(at, len);
  return 0;
}

int Connection::OnHeaderFieldComplete(llhttp_t* p) {
  Connection* c = Self(p);
  if (c->scan_ != Scan::kHead) return 0;
  c->field_open_ = false;
  if (c->cur_.headers.empty()) return 0;
  // Decide on framing headers by name, before llhttp parses their values: ours is the
  // error the client sees, with a precise message.
  const std::string& name = c->cur_.headers.back().name;
  if (EqualsIgnoreCase(name, "content-length")) {
    if (c->seen_content_length_) {
      c->reject_.emplace(RejectKind::kDuplicateContentLength,
                         Error::BadRequest("duplicate Content-Length header"));
      return -1;
    }
    if (c->seen_transfer_encoding_) {
      c->reject_.emplace(RejectKind::kContentLengthAndTransferEncoding,
                         Error::BadRequest("both Content-Length and Transfer-Encoding"));
      return -1;
    }
    c->seen_content_length_ = true;
  } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
    if (c->seen_content_length_) {
      c->reject_.emplace(RejectKind::kContentLengthAndTransferEncoding,
                         Error::BadRequest("both Content-Length and Transfer-Encoding"));
      return -1;
    }
    c->seen_transfer_encoding_ = true;
  }
  return 0;
}

int Connection::OnHeaderValue(llhttp_t* p, const char* at, size_t len) {
  Connection* c = Self(p);
  if (c->scan_ != Scan::kHead || c->cur_.headers.empty()) return 0;
  c->cur_.headers.back().value.append(at, len);
  return 0;
}

int Connection::OnHeaderValueComplete(llhttp_t* p) {
  Connection* c = Self(p);
  if (c->scan_ != Scan::kHead || c->cur_.headers.empty()) return 0;
  RequestHeader& h = c->cur_.headers.back();
  TrimTrailingSpace(h.value);
  if (EqualsIgnoreCase(h.name, "x-request-id")) {
    if (c->cur_.request_id.empty() && IsValidRequestId(h.value)) c->cur_.request_id = h.value;
  } else if (EqualsIgnoreCase(h.name, "expect")) {
    if (EqualsIgnoreCase(h.value, "100-continue")) c->expect_continue_ = true;
  }
  return 0;
}

int Connection::OnHeadersComplete(llhttp_t* p) {
  Connection* c = Self(p);
  const HttpOptions& opt = c->listener_->options_;
  c->scan_ = Scan::kBody;
  c->cur_.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
  c->cur_.http_major = p->http_major;
  c->cur_.http_minor = p->http_minor;
  if (c->cur_.request_id.empty()) c->cur_.request_id = c->listener_->ids_.Next();
  bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
  if (has_length && p->content_length > opt.max_body_bytes) {
    // Refuse before the body arrives (and instead of "100 Continue").
    c->reject_.emplace(RejectKind::kBodyTooLarge,
                       Error{ErrorCode::kPayloadTooLarge,
                             "request body of " + std::to_string(p->content_length) +
                                 " bytes is over the limit of " +
                                 std::to_string(opt.max_body_bytes)});
    return -1;
  }
  bool body_expected = (p->flags & F_CHUNKED) != 0 || (has_length && p->content_length > 0);
  if (c->expect_continue_ && body_expected && p->http_major == 1 && p->http_minor >= 1) {
    // Queued behind earlier responses: the parser was paused until they were queued.
    AppendContinue(c->out_back_);
  }
  if (has_length) c->cur_.body.reserve(static_cast<size_t>(p->content_length));
  return 0;
}

int Connection::OnBody(llhttp_t* p, const char* at, size_t len) {
  Connection* c = Self(p);
  size_t limit = c->listener_->options_.max_body_bytes;
  if (c->cur_.body.size() + len > limit) {  // chunked bodies grow past any announcement
    c->reject_.emplace(RejectKind::kBodyTooLarge,
                       Error{ErrorCode::kPayloadTooLarge,
                             "chunked request body over the limit of " + std::to_string(limit) +
                                 " bytes"});
    return -1;
  }
  c->cur_.body.append(at, len);
  return 0;
}

int Connection::OnChunkHeader(llhttp_t* p) {
  if (p->content_length != 0) return 0;
  Self(p)->last_chunk_ = true;
  return HPE_PAUSED;  // Process switches to vetting the trailer lines
}

int Connection::OnMessageComplete(llhttp_t* p) {
  Connection* c = Self(p);
  c->message_ready_ = true;
  c->in_message_ = false;
  // An upgrade (or CONNECT) would turn the stream into another protocol: answer, close.
  c->pending_keep_alive_ = llhttp_should_keep_alive(p) != 0 && p->upgrade == 0;
  c->cur_.read_done = Clock::now();
  c->scan_ = Scan::kHead;
  c->scanner_.Reset();
  c->head_bytes_ = 0;
  // Pause: the next pipelined request is parsed only once this one is answered, so
  // responses leave in request order and at most one request per connection is live.
  return HPE_PAUSED;
}

// --- requests and responses --------------------------------------------------------------

void Connection::Dispatch() {
  Listener& l = *listener_;
  handler_pending_ = true;
  ++seq_;
  ++l.counters_.requests;
  pending_head_ = cur_.method == "HEAD";
  pending_id_ = cur_.request_id;
  cur_.keep_alive = pending_keep_alive_;
  Request req = std::move(cur_);
  cur_ = Request{};
  l.handler_(std::move(req), Responder(weak_from_this(), seq_));
}

void Connection::Respond(uint64_t seq, const Response& r) {
  if (phase_ != Phase::kOpen || !handler_pending_ || seq != seq_) return;
  handler_pending_ = false;
  bool close = !pending_keep_alive_ || listener_->draining_;
  AppendResponse(out_back_, r, ResponseMeta{pending_id_, close, pending_head_});
  ++listener_->counters_.responses;
  if (close) BeginClose();
  if (!in_process_) Settle();  // inside Process, its caller settles
}

void Connection::Reject(RejectKind kind, Error e) {
  ++listener_->counters_.reject(kind);
  if (phase_ != Phase::kOpen) return;
  std::string body = ErrorBody(e);
  std::string id = cur_.request_id.empty() ? listener_->ids_.Next() : cur_.request_id;
  Response r{e.http_status(), body, "application/json", {}};
  AppendResponse(out_back_, r, ResponseMeta{id, /*close=*/true, /*omit_body=*/false});
  ++listener_->counters_.responses;
  in_message_ = false;
  BeginClose();
}

void Connection::OnDrain() {
  if (phase_ != Phase::kOpen) return;
  if (handler_pending_ || in_message_) return;  // its response carries Connection: close
  if (Unsent() > 0) {
    BeginClose();
    Settle();
  } else {
    CloseNow();
  }
}

// --- settling: one place decides reading, writing, timers and closing --------------------

void Connection::Settle() {
  // Parse, then write. A write that completes at once frees room for more output, so
  // parsing may go on: loop until nothing more goes out without waiting.
  do {
    if (phase_ == Phase::kClosed) return;
    ParseWaiting();
    if (phase_ == Phase::kClosed) return;
  } while (Flush());
  if (phase_ == Phase::kClosing && !writing_ && out_back_.empty()) {
    if (peer_eof_) {  // the client will send nothing more: no need to linger
      CloseNow();
      return;
    }
    if (!shutdown_started_) {
      // Our FIN first, then read-and-discard until the client's: closing with unread
      // input would send a reset that can destroy the response before it is read.
      shutdown_started_ = true;
      if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_),
                      &Connection::OnShutdown) < 0) {
        CloseNow();
        return;
      }
    }
  }
  UpdateReading();
  UpdateTimer();
}

void Connection::ParseWaiting() {
  if (phase_ == Phase::kOpen && in_off_ < in_buf_.size() && CanParse()) {
    if (must_progress_ || !TurnOverBudget()) {
      must_progress_ = false;  // one step only
      in_off_ += Process(in_buf_.data() + in_off_, in_buf_.size() - in_off_);
      if (phase_ == Phase::kClosed) return;
    }
    // Input left that could be parsed now: the turn's budget stopped it.
    if (in_off_ < in_buf_.size() && CanParse()) Park();
  }
  if (in_off_ == in_buf_.size() || phase_ != Phase::kOpen) {
    in_buf_.clear();
    in_off_ = 0;
    ReleaseIfHuge(in_buf_);
  }
  if (phase_ == Phase::kOpen && peer_eof_ && CanParse() && in_buf_.empty()) {
    // Nothing more will arrive. A request cut short is answered for the (half-closed)
    // client's sake; otherwise we close once the output is out.
    if (llhttp_finish(&parser_) != HPE_OK && in_message_)
      Reject(RejectKind::kMalformed, Error::BadRequest("request cut short by end of stream"));
    else
      BeginClose();
  }
}

bool Connection::Flush() {
  if (writing_ || out_back_.empty() || phase_ == Phase::kClosed || shutdown_started_)
    return false;
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  // Most responses fit in the socket's send buffer: write now, without a write request.
  // Besides a callback per response, a completed uv_write costs an epoll_ctl (libuv
  // re-arms the socket when its write queue drains), one syscall per response.
  uv_buf_t b = uv_buf_init(out_back_.data(), static_cast<unsigned>(out_back_.size()));
  int n = uv_try_write(stream, &b, 1);
  if (n < 0 && n != UV_EAGAIN) {
    CloseNow();
    return false;
  }
  size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
  listener_->counters_.bytes_written += sent;
  if (sent == out_back_.size()) {
    out_back_.clear();
    ReleaseIfHuge(out_back_);
    OnClientReading();
    return true;
  }
  // The rest waits for the socket: queue it (front buffer) and take new output behind it.
  out_front_.assign(out_back_, sent);
  out_back_.clear();
  b = uv_buf_init(out_front_.data(), static_cast<unsigned>(out_front_.size()));
  writing_ = true;
  if (uv_write(&write_req_, stream, &b, 1, &Connection::OnWrite) < 0) {
    writing_ = false;
    CloseNow();
  }
  return false;
}

void Connection::OnClientReading() {
  // An idle or closing connection gets its full time again.
  if (timer_mode_ == TimerMode::kIdle || timer_mode_ == TimerMode::kCloseWait)
    timer_mode_ = TimerMode::kNone;
}

void Connection::OnWrite(uv_write_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  c->writing_ = false;
  if (c->phase_ == Phase::kClosed) return;
  if (status < 0) {
    c->CloseNow();
    return;
  }
  c->listener_->counters_.bytes_written += c->out_front_.size();
  c->out_front_.clear();
  ReleaseIfHuge(c->out_front_);
  ReleaseIfHuge(c->out_back_);
  c->OnClientReading();
  c->Settle();
}

void Connection::OnShutdown(uv_shutdown_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  if (c->phase_ == Phase::kClosed) return;
  if (status < 0 || c->peer_eof_) {
    c->CloseNow();
    return;
  }
  c->phase_ = Phase::kLinger;
  c->Settle();
}

void Connection::UpdateReading() {
  const HttpOptions& opt = listener_->options_;
  bool want = false;
  switch (phase_) {
    case Phase::kOpen:
      want = !peer_eof_ && in_buf_.size() - in_off_ < opt.max_pending_input &&
             Unsent() <= opt.max_pending_output;
      break;
    case Phase::kClosing:
    case Phase::kLinger:
      want = !peer_eof_;  // discard what the client still sends
      break;
    case Phase::kClosed:
      want = false;
      break;
  }
  if (want == reading_) return;
  auto* s = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (want) {
    if (uv_read_start(s, &Connection::OnAlloc, &Connection::OnRead) == 0) reading_ = true;
  } else {
    uv_read_stop(s);
    reading_ = false;
  }
}

void Connection::UpdateTimer() {
  const HttpOptions& opt = listener_->options_;
  TimerMode want = TimerMode::kNone;
  switch (phase_) {
    case Phase::kOpen:
      // While the handler works the server's deadlines apply, not ours.
      want = handler_pending_ ? TimerMode::kNone
             : in_message_    ? TimerMode::kRead
                              : TimerMode::kIdle;
      break;
    case Phase::kClosing: want = TimerMode::kCloseWait; break;
    case Phase::kLinger: want = TimerMode::kLinger; break;
    case Phase::kClosed: return;
  }
  bool restart = want == TimerMode::kRead && restart_read_timer_;
  restart_read_timer_ = false;
  if (want == timer_mode_ && !restart) return;
  timer_mode_ = want;
  uint64_t ms = 0;
  switch (want) {
    case TimerMode::kNone: timer_due_ = 0; return;  // an armed timer finds nothing to do
    case TimerMode::kIdle: ms = opt.idle_timeout_ms; break;
    case TimerMode::kRead: ms = opt.read_timeout_ms; break;
    case TimerMode::kCloseWait: ms = opt.idle_timeout_ms; break;
    case TimerMode::kLinger: ms = opt.linger_ms; break;
  }
  // Lazy re-arming: modes change two or three times per request, and moving the uv
  // timer each time is a heap removal and insertion. The timer stays where it is when
  // it fires no later than the new due time; OnTimer then re-arms for the rest.
  timer_due_ = uv_now(listener_->loop_.uv()) + ms;
  if (timer_armed_due_ == 0 || timer_due_ < timer_armed_due_) {
    uv_timer_start(timer_, &Connection::OnTimer, ms, 0);
    timer_armed_due_ = timer_due_;
  }
}

void Connection::OnTimer(uv_timer_t* t) {
  auto* c = static_cast<Connection*>(t->data);
  if (c == nullptr || c->phase_ == Phase::kClosed) return;
  c->timer_armed_due_ = 0;
  if (c->timer_due_ == 0) return;  // kNone
  uint64_t now = uv_now(c->listener_->loop_.uv());
  if (now < c->timer_due_) {  // the mode changed since it was armed: wait for the rest
    uv_timer_start(t, &Connection::OnTimer, c->timer_due_ - now, 0);
    c->timer_armed_due_ = c->timer_due_;
    return;
  }
  c->timer_due_ = 0;
  TimerMode mode = c->timer_mode_;
  c->timer_mode_ = TimerMode::kNone;
  switch (mode) {
    case TimerMode::kRead:
      c->Reject(RejectKind::kReadTimeout,
                Error{ErrorCode::kRequestTimeout,
                      "request head or body not received within " +
                          std::to_string(c->listener_->options_.read_timeout_ms) + " ms"});
      c->Settle();
      break;
    case TimerMode::kIdle:
      ++c->listener_->counters_.idle_timeouts;
      c->CloseNow();
      break;
    case TimerMode::kCloseWait:
    case TimerMode::kLinger:
      c->CloseNow();
      break;
    case TimerMode::kNone:
      break;
  }
}

// --- closing -----------------------------------------------------------------------------

void Connection::CloseNow() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  handler_pending_ = false;  // its Responder becomes a no-op
  if (timer_ != nullptr) {
    // Back to the pool now, not in OnClose: at loop shutdown the pool's timers may be
    // freed before our close callback runs.
    listener_->loop_.ReleaseTimer(timer_);
    timer_ = nullptr;
  }
  timer_mode_ = TimerMode::kNone;
  timer_due_ = timer_armed_due_ = 0;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::OnClose);
}

void Connection::OnClose(uv_handle_t* h) {
  auto* c = static_cast<Connection*>(h->data);
  std::shared_ptr<Connection> keep = std::move(c->self_);  // c lives to the end of this call
  c->listener_->OnConnectionClosed(c);
}

}  // namespace rankd::http
