#include "http/connection.h"

#include <cassert>
#include <cstring>
#include <optional>

#include "http/api_errors.h"
#include "http/listener.h"
#include "http/request_id.h"
#include "http/response_writer.h"

namespace rankd::http {

namespace {

// Output buffers and the input buffer keep their capacity between requests (no
// allocation per response), but not a huge one left behind by a single large body.
constexpr size_t kKeepCapacity = 256 * 1024;

void ReleaseIfHuge(std::string& s) {
  if (s.empty() && s.capacity() > kKeepCapacity) std::string().swap(s);
}

}  // namespace

Connection::Connection(Listener* listener)
    : listener_(listener), stream_(listener->options_, listener->ids_) {}

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
  Settle();  // starts reading and the idle timer
  return 0;
}

bool Connection::CanParse() const {
  // Answers the client has not taken yet bound how far ahead we parse: at most
  // max_pipeline_depth of them, and max_pending_output bytes.
  const HttpOptions& opt = listener_->options_;
  return phase_ == Phase::kOpen && !handler_pending_ && Unsent() <= opt.max_pending_output &&
         queued_responses_ < opt.max_pipeline_depth;
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
  // Read no more than the room left under max_pending_input, so that what may end up
  // buffered stays within it (but at least a few KiB, so that reads stay cheap).
  size_t pending = c->in_buf_.size() - c->in_off_;
  size_t limit = c->listener_->options_.max_pending_input;
  size_t room = pending < limit ? limit - pending : 0;
  size_t len = std::min(Listener::kScratchBytes, std::max<size_t>(room, 4096));
  *buf = uv_buf_init(c->listener_->scratch_.get(), static_cast<unsigned>(len));
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
    // Drop the parsed prefix before appending. Without this, a client that keeps the
    // pipeline full never lets the buffer empty, and it grew by every byte the client
    // ever sent (1 GB in 15 s with eight connections): only the unparsed rest is
    // bounded by max_pending_input, not what lies before in_off_.
    if (c->in_off_ > 0) {
      c->in_buf_.erase(0, c->in_off_);
      c->in_off_ = 0;
    }
    c->in_buf_.append(data, n);
  }
  c->AccountInput();
  c->Settle();
}

size_t Connection::Process(const char* data, size_t n) {
  size_t off = 0;
  in_process_ = true;
  // Between pipelined requests, a turn over budget stops here: Settle parks the rest.
  bool dispatched = false;
  while (off < n && CanParse() && !(dispatched && TurnOverBudget())) {
    RequestStream::Step step = stream_.Feed(data + off, n - off);
    off += step.used;
    if (stream_.TakeMessageBegun()) restart_read_timer_ = true;
    // Queued behind earlier responses: the parser was paused until they were queued.
    if (step.send_continue) AppendContinue(out_back_);
    if (step.outcome == RequestStream::Outcome::kReject) {
      const auto& r = stream_.reject();
      Reject(r.first, r.second);
      break;
    }
    if (step.outcome == RequestStream::Outcome::kRequest) {
      dispatched = true;
      Dispatch();
    }
  }
  in_process_ = false;
  return off;
}

// --- requests and responses --------------------------------------------------------------

void Connection::Dispatch() {
  Listener& l = *listener_;
  handler_pending_ = true;
  ++seq_;
  ++l.counters_.requests;
  Request req = stream_.TakeRequest();
  pending_keep_alive_ = req.keep_alive;
  pending_head_ = req.method == "HEAD";
  pending_id_ = req.request_id;
  l.handler_(std::move(req), Responder(weak_from_this(), seq_));
}

void Connection::Respond(uint64_t seq, const Response& r) {
  if (phase_ != Phase::kOpen || !handler_pending_ || seq != seq_) return;
  handler_pending_ = false;
  bool close = !pending_keep_alive_ || listener_->draining_;
  AppendResponse(out_back_, r, ResponseMeta{pending_id_, close, pending_head_});
  ++listener_->counters_.responses;
  if (++queued_responses_ == listener_->options_.max_pipeline_depth)
    ++listener_->counters_.limit(LimitKind::kPipelineDepth);
  if (close) BeginClose();
  if (!in_process_) Settle();  // inside Process, its caller settles
}

void Connection::Reject(RejectKind kind, const Error& e) {
  ++listener_->counters_.reject(kind);
  if (phase_ != Phase::kOpen) return;
  std::string body = ErrorBody(e);
  const std::string& cur_id = stream_.current_request_id();
  std::string id = cur_id.empty() ? listener_->ids_.Next() : cur_id;
  Response r{ErrorStatus(e.code), body, "application/json", {}};
  AppendResponse(out_back_, r, ResponseMeta{id, /*close=*/true, /*omit_body=*/false});
  ++listener_->counters_.responses;
  ++queued_responses_;
  BeginClose();
}

void Connection::OnDrain() {
  if (phase_ != Phase::kOpen) return;
  if (handler_pending_ || stream_.in_message()) return;  // its response carries Connection: close
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
  AccountOutput();
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
    AccountInput();
  }
  if (phase_ == Phase::kOpen && peer_eof_ && CanParse() && in_buf_.empty()) {
    // Nothing more will arrive. A request cut short is answered for the (half-closed)
    // client's sake; otherwise we close once the output is out.
    if (stream_.FinishCutShort())
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
    queued_responses_ = 0;
    OnClientReading();
    return true;
  }
  if (sent > 0 || stalled_since_ == 0) stalled_since_ = uv_now(listener_->loop_.uv());
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
  stalled_since_ = 0;
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
  if (c->out_back_.empty()) c->queued_responses_ = 0;
  c->OnClientReading();
  // The client took what was in flight; what waits behind it starts a new stall.
  if (!c->out_back_.empty()) c->stalled_since_ = uv_now(c->listener_->loop_.uv());
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
    case Phase::kOpen: {
      size_t pending = in_buf_.size() - in_off_;
      want = !peer_eof_ && pending < opt.max_pending_input && Unsent() <= opt.max_pending_output;
      if (want && pending > 0 && !CanParse() && listener_->InputOverBudget()) {
        // The shard holds too much buffered input: connections whose input waits behind
        // an unanswered request stop reading until it drains. (One that can parse still
        // reads: its bytes are parsed at once, and a request cut in two needs the rest.) The listener resumes us (ResumeInput) when there is room again.
        want = false;
        if (!input_waits_for_shard_) {
          input_waits_for_shard_ = true;
          ++listener_->counters_.limit(LimitKind::kShardInput);
          listener_->WaitForInputRoom(shared_from_this());
        }
      } else if (!want && reading_ && !peer_eof_ && pending >= opt.max_pending_input) {
        ++listener_->counters_.limit(LimitKind::kConnectionInput);
      }
      break;
    }
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
      want = handler_pending_     ? TimerMode::kNone
             : stream_.in_message() ? TimerMode::kRead
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

// --- the shard's budgets ------------------------------------------------------------

void Connection::AccountInput() {
  if (phase_ == Phase::kClosed) return;
  size_t now = in_buf_.size();
  if (now == input_accounted_) return;
  listener_->buffered_input_ += now;
  listener_->buffered_input_ -= input_accounted_;
  bool released = now < input_accounted_;
  input_accounted_ = now;
  if (released) listener_->OnInputReleased();
}

void Connection::AccountOutput() {
  if (phase_ == Phase::kClosed) return;
  size_t now = Unsent();
  if (now == output_accounted_) return;
  listener_->unsent_ += now;
  listener_->unsent_ -= output_accounted_;
  output_accounted_ = now;
  if (now > 0) listener_->CheckUnsentBudget();
}

void Connection::ResumeInput() {
  input_waits_for_shard_ = false;
  if (phase_ != Phase::kClosed) Settle();
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
  stalled_since_ = 0;  // no longer a candidate for CloseSlowestReaders
  // The buffers go with the connection (after its close callback); stop counting them.
  listener_->buffered_input_ -= input_accounted_;
  bool released = input_accounted_ > 0;
  input_accounted_ = 0;
  listener_->unsent_ -= output_accounted_;
  output_accounted_ = 0;
  if (released) listener_->OnInputReleased();  // only schedules: safe inside any loop
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::OnClose);
}

void Connection::OnClose(uv_handle_t* h) {
  auto* c = static_cast<Connection*>(h->data);
  std::shared_ptr<Connection> keep = std::move(c->self_);  // c lives to the end of this call
  c->listener_->OnConnectionClosed(c);
}

}  // namespace rankd::http
