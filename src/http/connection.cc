#include "http/connection.h"

#include <cassert>
#include <utility>

#include "http/responder.h"
#include "http/response_writer.h"

namespace rankd::http {

namespace {

// Output buffers and the input buffer keep their capacity between requests (no
// allocation per response), but not a huge one left behind by a single large answer.
// The input buffer keeps less: what it keeps while empty is outside the shard's input
// budget (which counts bytes held), so it is bounded per connection by a request head.
constexpr size_t kKeepCapacity = 256 * 1024;
constexpr size_t kKeepInputCapacity = 16 * 1024;

// The smallest read: below it, reads cost more syscalls than they save memory.
constexpr size_t kMinRead = 4096;

void ReleaseIfHuge(std::string& s, size_t keep = kKeepCapacity) {
  if (s.empty() && s.capacity() > keep) std::string().swap(s);
}

// What a string has allocated: nothing while it fits its inline buffer, else its
// capacity and terminator.
size_t HeapBytes(const std::string& s) {
  static const size_t kInline = std::string().capacity();
  return s.capacity() > kInline ? s.capacity() + 1 : 0;
}

}  // namespace

Connection::Connection(ConnectionContext& ctx) : ctx_(ctx), stream_(ctx.options, ctx.ids) {}

Connection::~Connection() = default;

// --- phases ------------------------------------------------------------------------------

bool Connection::Allowed(Phase from, Phase to) {
  switch (to) {
    case Phase::kReceiving: return from == Phase::kHandlerPending;
    case Phase::kHandlerPending: return from == Phase::kReceiving;
    case Phase::kClosing: return from == Phase::kReceiving || from == Phase::kHandlerPending;
    case Phase::kShuttingDown: return from == Phase::kClosing;
    case Phase::kLinger: return from == Phase::kShuttingDown;
    case Phase::kClosed: return from != Phase::kClosed;
  }
  return false;
}

void Connection::Enter(Phase next) {
  assert(Allowed(phase_, next));
  phase_ = next;
}

int Connection::Accept(uv_stream_t* server) {
  ctx_.loop.AssertInLoopThread();
  uv_tcp_init(ctx_.loop.uv(), &tcp_);
  tcp_.data = this;
  write_req_.data = this;
  shutdown_req_.data = this;
  self_ = shared_from_this();
  int rc = uv_accept(server, reinterpret_cast<uv_stream_t*>(&tcp_));
  if (rc < 0) {
    CloseNow();
    return rc;
  }
  // Responses leave in one write each; Nagle would only delay them.
  uv_tcp_nodelay(&tcp_, 1);
  timer_ = ctx_.loop.AcquireTimer();
  timer_->data = this;
  last_request_ms_ = uv_now(ctx_.loop.uv());
  header_due_ = last_request_ms_ + ctx_.options.header_timeout_ms;
  Settle();  // starts reading and the idle timer
  return 0;
}

bool Connection::CanParse() const {
  // Answers the client has not taken yet bound how far ahead we parse: at most
  // max_pipeline_depth of them, and max_pending_output bytes.
  const HttpOptions& opt = ctx_.options;
  return phase_ == Phase::kReceiving && Unsent() <= opt.max_pending_output &&
         queued_responses_ < opt.max_pipeline_depth;
}

// --- input -------------------------------------------------------------------------------

void Connection::Park() {
  if (parked_) return;
  parked_ = true;
  ++ctx_.counters.parked_reads;
  ctx_.events.ParkUntilNextTurn(shared_from_this());
}

void Connection::Unpark(bool first) {
  ctx_.loop.AssertInLoopThread();
  parked_ = false;
  // The first of a batch goes ahead even when the turn is already over budget, so
  // that every turn makes progress whatever the budget (and however preempted).
  Settle(/*must_progress=*/first);
}

void Connection::OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(h->data);
  // Read no more than the room left under max_pending_input, nor under the shard's
  // input budget (but for the oldest request under way, which may go past it), so that
  // what may end up held stays within them (but at least a few KiB, so that reads stay
  // cheap): a burst of connections read in one loop turn then overshoots the budget by
  // a few KiB each, not by a whole read buffer each.
  size_t pending = c->in_buf_.size() - c->in_off_;
  size_t limit = c->ctx_.options.max_pending_input;
  size_t room = pending < limit ? limit - pending : 0;
  if (c->ctx_.oldest_unfinished != c) room = std::min(room, c->ctx_.InputRoom());
  size_t len = std::min(ConnectionContext::kReadBufferBytes, std::max<size_t>(room, kMinRead));
  *buf = uv_buf_init(c->ctx_.read_buffer.get(), static_cast<unsigned>(len));
}

void Connection::OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(s->data);
  if (nread < 0) {
    c->OnReadEnd(nread);
    return;
  }
  if (nread == 0) return;
  c->ctx_.counters.bytes_read += static_cast<uint64_t>(nread);
  if (!c->Open()) return;  // closing: read only to discard
  c->Receive(buf->base, static_cast<size_t>(nread));
}

void Connection::OnReadEnd(ssize_t status) {
  reading_ = false;  // libuv stops reading by itself after EOF or an error
  if (status != UV_EOF || phase_ == Phase::kLinger) {
    CloseNow();
    return;
  }
  peer_eof_ = true;
  Settle();
}

void Connection::Receive(const char* data, size_t n) {
  if (in_off_ == in_buf_.size() && CanParse() && !TurnOverBudget()) {
    // The common case: parse straight from the shared buffer, keep only the rest.
    size_t used = Process(data, n);
    if (Open() && used < n) in_buf_.append(data + used, n - used);
  } else {
    // Drop the parsed prefix before appending. Without this, a client that keeps the
    // pipeline full never lets the buffer empty, and it grew by every byte the client
    // ever sent (1 GB in 15 s with eight connections): only the unparsed rest is
    // bounded by max_pending_input, not what lies before in_off_.
    if (in_off_ > 0) {
      in_buf_.erase(0, in_off_);
      in_off_ = 0;
    }
    in_buf_.append(data, n);
  }
  Settle();
}

size_t Connection::Process(const char* data, size_t n) {
  size_t off = 0;
  in_process_ = true;
  // Between pipelined requests, a turn over budget stops here: Settle parks the rest.
  bool dispatched = false;
  while (off < n && CanParse() && !(dispatched && TurnOverBudget())) {
    RequestStream::Step step = stream_.Feed(data + off, n - off);
    off += step.used;
    if (step.message_begun) restart_read_timer_ = true;
    if (step.head_complete) head_seen_ = true;
    // Queued behind earlier responses: the parser was paused until they were queued.
    if (step.send_continue) AppendContinue(out_back_);
    if (step.outcome == RequestStream::Outcome::kReject) {
      const auto& [kind, error] = stream_.reject();
      Reject(kind, error);
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
  Request req = stream_.TakeRequest();
  // Only the id's buffer carries over, so that ids longer than a string's inline
  // capacity (UUIDs) cost no allocation per request.
  std::string id = std::move(pending_.id);
  id.assign(req.request_id);
  pending_ =
      PendingRequest{pending_.seq + 1, req.keep_alive, req.method == "HEAD", std::move(id), {}};
  last_request_ms_ = uv_now(ctx_.loop.uv());
  Enter(Phase::kHandlerPending);
  ++ctx_.counters.requests;
  ctx_.handler(std::move(req), Responder(weak_from_this(), pending_.seq, ctx_.loop));
}

void Connection::Respond(uint64_t seq, const Response& r) {
  ctx_.loop.AssertInLoopThread();
  if (phase_ != Phase::kHandlerPending || seq != pending_.seq) return;
  bool close = !pending_.keep_alive || ctx_.draining;
  AppendResponse(out_back_, r,
                 ResponseMeta{pending_.id, close, pending_.head, pending_.extra_head});
  ++ctx_.counters.responses;
  if (++queued_responses_ == ctx_.options.max_pipeline_depth)
    ++ctx_.counters.limit(LimitKind::kPipelineDepth);
  Enter(close ? Phase::kClosing : Phase::kReceiving);
  if (!in_process_) Settle();  // inside Process, its caller settles
}

void Connection::RespondError(uint64_t seq, const Error& e,
                              std::span<const HeaderField> extra_headers) {
  ErrorResponse answer = ctx_.render_error(e);
  Respond(seq, Response{answer.status, answer.body, answer.content_type, extra_headers});
}

void Connection::AddAnswerHeader(uint64_t seq, std::string_view name, std::string_view value) {
  ctx_.loop.AssertInLoopThread();
  if (phase_ != Phase::kHandlerPending || seq != pending_.seq) return;
  // The writer's rule for handlers' headers: none that could split the response.
  if (name.empty() || name.find_first_of("\r\n") != std::string_view::npos ||
      value.find_first_of("\r\n") != std::string_view::npos)
    return;
  std::string& h = pending_.extra_head;
  h.append(name).append(": ").append(value).append("\r\n");
}

void Connection::Evict() {
  ++ctx_.counters.reject(RejectKind::kEvictedAtCap);
  CloseNow();
}

void Connection::Reject(RejectKind kind, const Error& e) {
  ++ctx_.counters.reject(kind);
  if (!Open()) return;
  ErrorResponse answer = ctx_.render_error(e);
  const std::string& cur_id = stream_.current_request_id();
  std::string id = cur_id.empty() ? ctx_.ids.Next() : cur_id;
  Response r{answer.status, answer.body, answer.content_type, {}};
  AppendResponse(out_back_, r, ResponseMeta{id, /*close=*/true, /*omit_body=*/false, {}});
  stream_.Abandon();  // the next AccountInput lets the shard's budget have it back
  ++ctx_.counters.responses;
  ++queued_responses_;
  Enter(Phase::kClosing);
}

void Connection::OnDrain() {
  ctx_.loop.AssertInLoopThread();
  // A request with the handler, or begun: its response carries Connection: close.
  if (phase_ != Phase::kReceiving || stream_.in_message()) return;
  if (Unsent() > 0) {
    Enter(Phase::kClosing);
    Settle();
  } else {
    CloseNow();
  }
}

// --- settling: one place decides reading, writing, timers and closing --------------------

void Connection::Settle(bool must_progress) {
  // Parse, then write. A write that completes at once frees room for more output, so
  // parsing may go on: loop until nothing more goes out without waiting.
  do {
    if (phase_ == Phase::kClosed) return;
    ParseWaiting(must_progress);
    if (phase_ == Phase::kClosed) return;
  } while (Flush());
  AccountInput();
  AccountOutput();
  if ((phase_ == Phase::kClosing || phase_ == Phase::kShuttingDown) && Unsent() == 0) {
    if (peer_eof_) {  // the client will send nothing more: no need to linger
      CloseNow();
      return;
    }
    if (phase_ == Phase::kClosing) Shutdown();
    if (phase_ == Phase::kClosed) return;
  }
  UpdateReading();
  UpdateTimer();
}

void Connection::ParseWaiting(bool& must_progress) {
  if (in_off_ < in_buf_.size() && CanParse()) {
    if (must_progress || !TurnOverBudget()) {
      must_progress = false;  // one step only
      in_off_ += Process(in_buf_.data() + in_off_, in_buf_.size() - in_off_);
      if (phase_ == Phase::kClosed) return;
    }
    // Input left that could be parsed now: the turn's budget stopped it.
    if (in_off_ < in_buf_.size() && CanParse()) Park();
  }
  if (in_off_ == in_buf_.size() || !Open()) {
    in_buf_.clear();
    in_off_ = 0;
    ReleaseIfHuge(in_buf_, kKeepInputCapacity);
  }
  if (peer_eof_ && CanParse() && in_buf_.empty()) {
    // Nothing more will arrive. A request cut short is answered for the (half-closed)
    // client's sake; otherwise we close once the output is out.
    if (stream_.FinishCutShort())
      Reject(RejectKind::kMalformed, Error::BadRequest("request cut short by end of stream"));
    else
      Enter(Phase::kClosing);
  }
}

bool Connection::Flush() {
  bool may_write = Open() || phase_ == Phase::kClosing;
  if (!may_write || !out_front_.empty() || out_back_.empty()) return false;
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
  ctx_.counters.bytes_written += sent;
  if (sent == out_back_.size()) {
    out_back_.clear();
    ReleaseIfHuge(out_back_);
    queued_responses_ = 0;
    OnClientReading();
    return true;
  }
  if (sent > 0 || stalled_since_ == 0) stalled_since_ = uv_now(ctx_.loop.uv());
  // The rest waits for the socket: queue it (front buffer) and take new output behind it.
  out_front_.assign(out_back_, sent);
  out_back_.clear();
  b = uv_buf_init(out_front_.data(), static_cast<unsigned>(out_front_.size()));
  if (uv_write(&write_req_, stream, &b, 1, &Connection::OnWrite) < 0) {
    out_front_.clear();
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
  size_t written = c->out_front_.size();
  c->out_front_.clear();  // the write is over, whatever its outcome
  if (c->phase_ == Phase::kClosed) return;
  if (status < 0) {
    c->CloseNow();
    return;
  }
  c->ctx_.counters.bytes_written += written;
  ReleaseIfHuge(c->out_front_);
  ReleaseIfHuge(c->out_back_);
  if (c->out_back_.empty()) c->queued_responses_ = 0;
  c->OnClientReading();
  // The client took what was in flight; what waits behind it starts a new stall.
  if (!c->out_back_.empty()) c->stalled_since_ = uv_now(c->ctx_.loop.uv());
  c->Settle();
}

void Connection::Shutdown() {
  // Our FIN first, then read-and-discard until the client's: closing with unread
  // input would send a reset that can destroy the response before it is read.
  Enter(Phase::kShuttingDown);
  if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_), &Connection::OnShutdown) <
      0)
    CloseNow();
}

void Connection::OnShutdown(uv_shutdown_t* req, int status) {
  auto* c = static_cast<Connection*>(req->data);
  if (c->phase_ == Phase::kClosed) return;
  if (status < 0 || c->peer_eof_) {
    c->CloseNow();
    return;
  }
  c->Enter(Phase::kLinger);
  c->Settle();
}

// --- reads and timers follow the phase ---------------------------------------------------

void Connection::UpdateReading() {
  bool want = false;
  switch (phase_) {
    case Phase::kReceiving:
    case Phase::kHandlerPending: want = OpenWantsInput(); break;
    case Phase::kClosing:
    case Phase::kShuttingDown:
    case Phase::kLinger:
      want = !peer_eof_;  // discard what the client still sends
      break;
    case Phase::kClosed: break;
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

bool Connection::ReadingOnlyBuffers() const {
  // Unparsed input: behind an unanswered request, or left for the next loop turn.
  if (in_off_ < in_buf_.size()) return true;
  // Part of a request (head or body): reading on only grows it, unless it is the
  // shard's oldest under way (one request at a time always completes). No exception
  // for a rest that looks small: a thousand connections each 64 KiB short of the end
  // would hold 64 MB the budget never let in.
  return stream_.bytes_held() > 0 && ctx_.oldest_unfinished != this;
}

bool Connection::OpenWantsInput() {
  const HttpOptions& opt = ctx_.options;
  size_t pending = in_buf_.size() - in_off_;
  bool want = !peer_eof_ && pending < opt.max_pending_input && Unsent() <= opt.max_pending_output;
  if (want && ctx_.InputOverBudget() && ReadingOnlyBuffers()) {
    // The shard holds too much input: connections that would only hold more (input
    // not parsed yet, a head or body under way) stop reading until it drains. The
    // others, between requests, still read: a request that comes whole in one read is
    // parsed at once, so that a new client is served while bodies wait. A request that
    // never completes ends with the read timeout's 408. The listener resumes us
    // (ResumeInput) when there is room.
    if (!input_waits_for_shard_) {
      input_waits_for_shard_ = true;
      ++ctx_.counters.limit(LimitKind::kShardInput);
      ctx_.events.WaitForInputRoom(shared_from_this());
    }
    return false;
  }
  if (!want && reading_ && !peer_eof_ && pending >= opt.max_pending_input)
    ++ctx_.counters.limit(LimitKind::kConnectionInput);
  return want;
}

Connection::TimerMode Connection::WantedTimer() const {
  switch (phase_) {
    case Phase::kReceiving: return stream_.in_message() ? TimerMode::kRead : TimerMode::kIdle;
    case Phase::kHandlerPending: return TimerMode::kNone;  // the server's deadlines apply
    case Phase::kClosing:
    case Phase::kShuttingDown: return TimerMode::kCloseWait;
    case Phase::kLinger: return TimerMode::kLinger;
    case Phase::kClosed: break;
  }
  return TimerMode::kNone;
}

void Connection::UpdateTimer() {
  if (phase_ == Phase::kClosed) return;
  const HttpOptions& opt = ctx_.options;
  TimerMode want = WantedTimer();
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
  uint64_t now = uv_now(ctx_.loop.uv());
  timer_due_ = now + ms;
  // Before the first head, neither idling nor a slow head outlasts the header timeout.
  bool first_head = want == TimerMode::kIdle || want == TimerMode::kRead;
  if (first_head && !head_seen_) timer_due_ = std::min(timer_due_, std::max(header_due_, now));
  if (timer_armed_due_ == 0 || timer_due_ < timer_armed_due_) {
    uv_timer_start(timer_, &Connection::OnTimer, timer_due_ - now, 0);
    timer_armed_due_ = timer_due_;
  }
}

void Connection::OnTimer(uv_timer_t* t) {
  auto* c = static_cast<Connection*>(t->data);
  if (c == nullptr || c->phase_ == Phase::kClosed) return;
  c->timer_armed_due_ = 0;
  if (c->timer_due_ == 0) return;  // kNone
  uint64_t now = uv_now(c->ctx_.loop.uv());
  if (now < c->timer_due_) {  // the mode changed since it was armed: wait for the rest
    uv_timer_start(t, &Connection::OnTimer, c->timer_due_ - now, 0);
    c->timer_armed_due_ = c->timer_due_;
    return;
  }
  c->timer_due_ = 0;
  c->Expire(std::exchange(c->timer_mode_, TimerMode::kNone));
}

void Connection::Expire(TimerMode mode) {
  bool first_head = mode == TimerMode::kIdle || mode == TimerMode::kRead;
  if (first_head && !head_seen_ && uv_now(ctx_.loop.uv()) >= header_due_) {
    // Connected and never asked (or asked too slowly) within the header timeout: there
    // is no request to answer, so close.
    ++ctx_.counters.reject(RejectKind::kHeaderTimeout);
    CloseNow();
    return;
  }
  switch (mode) {
    case TimerMode::kRead:
      Reject(RejectKind::kReadTimeout,
             Error{ErrorCode::kRequestTimeout, "request head or body not received within " +
                                                   std::to_string(ctx_.options.read_timeout_ms) +
                                                   " ms"});
      Settle();
      break;
    case TimerMode::kIdle:
      ++ctx_.counters.idle_timeouts;
      CloseNow();
      break;
    case TimerMode::kCloseWait:
    case TimerMode::kLinger: CloseNow(); break;
    case TimerMode::kNone: break;
  }
}

// --- the shard's budgets ------------------------------------------------------------

void Connection::AccountInput() {
  if (phase_ == Phase::kClosed) return;
  size_t held = stream_.bytes_held();
  TrackUnfinished(held > 0);  // first: a share released below may let the next oldest on
  ctx_.MoveInputShare(input_accounted_, in_buf_.size() + held);
  // What the buffers allocated: the input buffer's whole capacity (kept while empty),
  // and the request's head and body (bytes_held counts their capacities).
  ctx_.MoveAllocatedShare(allocated_accounted_, HeapBytes(in_buf_) + held);
}

void Connection::TrackUnfinished(bool holds_part) {
  if (holds_part == in_unfinished_list_) return;
  in_unfinished_list_ = holds_part;
  if (holds_part) {  // append: the newest
    older_unfinished_ = ctx_.newest_unfinished;
    newer_unfinished_ = nullptr;
    (older_unfinished_ ? older_unfinished_->newer_unfinished_ : ctx_.oldest_unfinished) = this;
    ctx_.newest_unfinished = this;
  } else {
    (older_unfinished_ ? older_unfinished_->newer_unfinished_ : ctx_.oldest_unfinished) =
        newer_unfinished_;
    (newer_unfinished_ ? newer_unfinished_->older_unfinished_ : ctx_.newest_unfinished) =
        older_unfinished_;
    older_unfinished_ = newer_unfinished_ = nullptr;
  }
}

void Connection::AccountOutput() {
  if (phase_ != Phase::kClosed) ctx_.MoveUnsentShare(output_accounted_, Unsent());
}

void Connection::ResumeInput() {
  ctx_.loop.AssertInLoopThread();
  input_waits_for_shard_ = false;
  if (phase_ != Phase::kClosed) Settle();
}

// --- closing -----------------------------------------------------------------------------

void Connection::CloseNow() {
  ctx_.loop.AssertInLoopThread();
  if (phase_ == Phase::kClosed) return;
  Enter(Phase::kClosed);  // a pending Responder's answer is ignored from now on
  if (timer_ != nullptr) {
    // Back to the pool now, not in OnClose: at loop shutdown the pool's timers may be
    // freed before our close callback runs.
    ctx_.loop.ReleaseTimer(timer_);
    timer_ = nullptr;
  }
  timer_mode_ = TimerMode::kNone;
  timer_due_ = timer_armed_due_ = 0;
  stalled_since_ = 0;  // no longer a candidate for the slowest-reader close
  // The buffers go with the connection (after its close callback); stop counting them.
  // A release only schedules the listener's work: safe inside any loop.
  TrackUnfinished(false);
  ctx_.MoveInputShare(input_accounted_, 0);
  ctx_.MoveAllocatedShare(allocated_accounted_, 0);
  ctx_.MoveUnsentShare(output_accounted_, 0);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::OnClose);
}

void Connection::OnClose(uv_handle_t* h) {
  auto* c = static_cast<Connection*>(h->data);
  std::shared_ptr<Connection> keep = std::move(c->self_);  // c lives to the end of this call
  c->ctx_.events.ConnectionClosed(c);
}

}  // namespace rankd::http
