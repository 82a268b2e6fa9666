#include "redis/server_pool.h"

#include <algorithm>
#include <coroutine>
#include <utility>

#include "core/block_pool.h"
#include "core/log.h"

namespace rankd {

// One Batch() call, from Dispatch until the coroutine and the connection are done with
// it: one reference for the awaiting coroutine, one while a connection owes it replies.
// Its replies arrive as RESP bytes (ReplyWaiter) straight into one RespReplies.
struct PendingBatch final : ReplyWaiter {
  PendingBatch(RedisPool* p, Deadline d) : pool(p), deadline(d), started(Clock::now()) {}
  // One per batch (a cluster batch makes one per node touched): from the thread's block
  // pool, not malloc.
  static void* operator new(size_t n) { return block_pool::Allocate(n); }
  static void operator delete(void* p, size_t n) noexcept { block_pool::Free(p, n); }
  void Ref() { ++refs; }
  void Unref() {
    if (--refs == 0) delete this;
  }

  void OnReplyBytes(std::string_view piece, bool last) override {
    if (!done) replies.AppendBytes(piece);
    if (!last) return;
    Bump(pool->stats_->replies);
    --outstanding;
    if (!done) {
      replies.EndReply();
      if (replies.raw(replies.size() - 1)[0] == '-') Bump(pool->stats_->error_replies);
      if (outstanding == 0) pool->Finish(this, std::nullopt);
    } else if (gave_up) {
      Bump(pool->stats_->late_replies);
    }
    RedisPool* p = pool;
    if (outstanding == 0) Unref();  // the connection is done with it
    if (!p->queue_.empty()) p->SchedulePump();
  }
  void OnConnectionLost(const RedisConnection::Failure& f) override {
    outstanding = 0;
    if (!done) pool->Finish(this, pool->BatchError(this, f.code, f.what, f.detail));
    RedisPool* p = pool;
    Unref();
    if (!p->queue_.empty()) p->SchedulePump();
  }

  RedisPool* pool;
  RedisCommands commands;
  RespReplies replies;
  Deadline deadline;
  TimePoint started;
  size_t outstanding = 0;  // replies the connection still owes
  int refs = 1;
  bool done = false;     // the result is decided; the waiter is (being) resumed
  bool gave_up = false;  // decided before every reply came: later ones are late
  bool queued = false;
  std::optional<Error> error;
  std::coroutine_handle<> waiter;
  uv_timer_t* timer = nullptr;  // deadline
};

// The reply of CLIENT TRACKING on a data connection (one per connection session).
struct RedisPool::TrackingWaiter final : ReplyWaiter {
  explicit TrackingWaiter(RedisPool* p) : pool(p) {}
  void OnReplyBytes(std::string_view piece, bool last) override {
    bytes.append(piece);
    if (!last) return;
    RespReplies one;
    one.Append(bytes);
    bytes.clear();
    pool->OnTrackingReply(one[0]);
  }
  void OnConnectionLost(const RedisConnection::Failure&) override { bytes.clear(); }

  RedisPool* pool;
  std::string bytes;
};

// The coroutine's reference to its batch.
struct PendingBatchRef {
  explicit PendingBatchRef(PendingBatch* batch) : b(batch) {}
  PendingBatchRef(PendingBatchRef&& o) noexcept : b(std::exchange(o.b, nullptr)) {}
  PendingBatchRef& operator=(PendingBatchRef&&) = delete;
  ~PendingBatchRef() {
    if (b != nullptr) b->Unref();
  }
  PendingBatch* b;
};

namespace {
struct BatchAwaiter {
  PendingBatch* b;
  bool await_ready() const noexcept { return b->done; }
  void await_suspend(std::coroutine_handle<> h) noexcept { b->waiter = h; }
  void await_resume() const noexcept {}
};

std::string Describe(const PendingBatch* b) {
  return "batch of " + std::to_string(b->commands.size()) + " command" +
         (b->commands.size() == 1 ? "" : "s") + ", first: " + b->commands.Describe(0);
}
}  // namespace

RedisPool::RedisPool(EventLoop& loop, RedisEndpoint endpoint, RedisClientOptions opts,
                     std::shared_ptr<RedisStats> stats)
    : RedisClient(std::move(endpoint), std::move(stats)), loop_(loop), opts_(opts) {
  loop_.AssertInLoopThread();
  int n = std::max(1, opts_.connections_per_endpoint);
  uint64_t seed = reinterpret_cast<uintptr_t>(this) ^
                  static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  for (int i = 0; i < n; ++i) {
    conns_.push_back(std::make_unique<RedisConnection>(
        loop_, endpoint_, opts_, *stats_,
        [this, i = static_cast<size_t>(i)] { OnConnectionChange(i); },
        seed + static_cast<uint64_t>(i), /*raw_replies=*/true));
    tracking_waiters_.push_back(std::make_unique<TrackingWaiter>(this));
  }
  tracked_to_.assign(conns_.size(), 0);
  for (auto& c : conns_) c->Start();
}

RedisPool::~RedisPool() {
  Close();
  *alive_ = false;
}

void RedisPool::Close() {
  if (closed_) return;  // also when destroyed after the loop has stopped
  loop_.AssertInLoopThread();
  closed_ = true;
  while (!queue_.empty())
    Finish(queue_.front(), UnavailableError(queue_.front(), "client closed", "client closed"));
  for (auto& c : conns_) c->Close();  // in-flight batches get NULL replies -> unavailable
  if (tracker_) tracker_->Close();
}

void RedisPool::OnConnectionChange(size_t i) {
  // A data connection that goes down takes its tracked keys with it: Redis will not
  // say when they change.
  if (!conns_[i]->live() && tracked_to_[i] != 0) {
    tracked_to_[i] = 0;
    tracking_->sink->OnInvalidateAll();
  }
  SchedulePump();
}

void RedisPool::EnableTracking(const TrackingConfig& config) {
  loop_.AssertInLoopThread();
  if (tracking_ || closed_) return;
  tracking_ = config;
  StartTracker();
}

void RedisPool::StartTracker() {
  tracker_ = std::make_unique<RedisTracker>(loop_, endpoint_, opts_, *stats_, *tracking_,
                                            [this] { OnTrackerChange(); });
  tracker_->Start();
}

void RedisPool::SetTrackingPrefixes(std::vector<std::string> prefixes) {
  loop_.AssertInLoopThread();
  if (!tracking_ || closed_ || tracking_->mode != TrackingMode::kBcast ||
      tracking_->bcast_prefixes == prefixes)
    return;
  tracking_->bcast_prefixes = std::move(prefixes);
  tracker_.reset();  // its connection closes: Redis forgets its prefixes
  tracker_id_ = 0;
  tracking_->sink->OnInvalidateAll();
  StartTracker();
}

bool RedisPool::tracking_ready() const {
  loop_.AssertInLoopThread();
  return tracker_ && tracker_->redirect_id() != 0 && tracking_error_.empty() && !closed_;
}

void RedisPool::OnTrackerChange() {
  int64_t id = tracker_->redirect_id();
  // Lost (or replaced): whatever was read under the old id hears nothing more.
  if (tracker_id_ != 0 && id != tracker_id_) tracking_->sink->OnInvalidateAll();
  tracker_id_ = id;
}

void RedisPool::EnsureTracked(size_t i) {
  if (tracking_->mode == TrackingMode::kBcast) return;  // the tracker tracks for everyone
  int64_t id = tracker_->redirect_id();
  if (id == 0 || tracked_to_[i] == id || !tracking_error_.empty()) return;
  RedisConnection* c = conns_[i].get();
  RedisCommand on{"CLIENT", "TRACKING", "ON", "REDIRECT"};
  on.Arg(id);
  c->Write(on.wire());
  c->Await(tracking_waiters_[i].get(), 1);
  tracked_to_[i] = id;
}

// A connection that goes down before this reply comes is flushed by OnConnectionChange.
void RedisPool::OnTrackingReply(RespView r) {
  if (!r.is_error() || !tracking_error_.empty()) return;
  tracking_error_ = std::string(r.str());
  LogError("redis endpoint " + endpoint_.Label() +
           ": CLIENT TRACKING failed, caching is off for it: " + tracking_error_);
  tracking_->sink->OnInvalidateAll();
}

bool RedisPool::live() const {
  loop_.AssertInLoopThread();
  return std::any_of(conns_.begin(), conns_.end(), [](auto& c) { return c->live(); });
}

std::string RedisPool::NotLiveReason() const {
  loop_.AssertInLoopThread();
  if (closed_) return "client closed";
  if (live()) return "";
  for (auto& c : conns_)
    if (!c->last_error().empty()) return "no live connection: " + c->last_error();
  return "no live connection: still connecting";
}

bool RedisPool::AnyConnectingOrLive() const {
  return std::any_of(conns_.begin(), conns_.end(), [](auto& c) {
    return c->state() == RedisConnection::State::kLive ||
           c->state() == RedisConnection::State::kConnecting;
  });
}

Error RedisPool::BatchError(const PendingBatch* b, ErrorCode code, std::string_view what,
                            std::string_view detail) const {
  Error e{code, "redis endpoint " + endpoint_.name + ": " + std::string(what)};
  e.detail =
      "redis endpoint " + endpoint_.Label() + ": " + std::string(detail) + " (" + Describe(b) + ")";
  return e;
}

Error RedisPool::UnavailableError(const PendingBatch* b, std::string_view what,
                                  std::string_view detail) const {
  return BatchError(b, ErrorCode::kUnavailable, what, detail);
}

Coro<Result<RespReplies>> RedisPool::Batch(RedisCommands commands, Deadline deadline) {
  auto* b = new PendingBatch(this, deadline);
  b->commands = std::move(commands);
  return Run(PendingBatchRef(b));
}

Coro<Result<RespReplies>> RedisPool::Run(PendingBatchRef ref) {
  loop_.AssertInLoopThread();
  PendingBatch* b = ref.b;
  if (b->commands.empty()) co_return RespReplies{};
  b->replies.Reserve(b->commands.size());
  Dispatch(b);
  co_await BatchAwaiter{b};
  if (b->error) co_return Fail(std::move(*b->error));
  co_return std::move(b->replies);
}

void RedisPool::Dispatch(PendingBatch* b) {
  if (closed_) return Finish(b, UnavailableError(b, "client closed", "client closed"));
  if (deadline_exceeded(b->deadline)) return FinishExpired(b);
  if (!AnyConnectingOrLive())
    return Finish(b, UnavailableError(b, "no live connection", NotLiveReason()));
  if (queue_.empty()) {
    if (RedisConnection* c = PickConnection(b->commands.size())) Send(c, b);
  }
  if (b->done) return;
  if (b->outstanding == 0) {  // not sent: wait for a connection (FIFO)
    b->queued = true;
    queue_.push_back(b);
  }
  if (b->deadline) {
    b->timer = loop_.AcquireTimer();
    b->timer->data = b;
    uv_timer_start(
        b->timer,
        [](uv_timer_t* t) {
          auto* pb = static_cast<PendingBatch*>(t->data);
          RedisPool* pool = pb->pool;
          pool->loop_.ReleaseTimer(t);
          pb->timer = nullptr;
          std::string what = std::string(pb->queued ? "no connection became free" : "no reply") +
                             " within the deadline";
          pool->Finish(pb, pool->BatchError(pb, ErrorCode::kDeadlineExceeded, what, what));
        },
        ms_until(*b->deadline), 0);
  }
}

RedisConnection* RedisPool::PickConnection(size_t n) {
  // A live connection whose output is still waiting to be written, when the batch fits
  // there: both leave in one write, and Redis (one thread) answers them in turn all the
  // same. Else the one with the fewest commands in flight, starting the scan at a
  // rotating index so that equally idle connections take turns.
  RedisConnection* best = nullptr;
  const size_t count = conns_.size();
  for (size_t k = 0; k < count; ++k) {
    RedisConnection* c = conns_[(next_ + k) % count].get();
    if (!c->live()) continue;
    bool fits = c->inflight() == 0 || c->inflight() + static_cast<int64_t>(n) <=
                                          static_cast<int64_t>(opts_.max_inflight_per_connection);
    if (fits && c->writing()) {
      best = c;
      break;
    }
    if (fits && (best == nullptr || c->inflight() < best->inflight())) best = c;
  }
  next_ = (next_ + 1) % count;
  return best;
}

void RedisPool::Send(RedisConnection* c, PendingBatch* b) {
  Bump(stats_->batches);
  if (tracker_) {
    for (size_t i = 0; i < conns_.size(); ++i)
      if (conns_[i].get() == c) EnsureTracked(i);
  }
  // The batch's bytes go into the connection's output buffer now; they are written when
  // the socket is writable, after this loop turn: one write for the batch.
  c->Write(b->commands.wire());
  b->outstanding = b->commands.size();
  b->Ref();
  c->Await(b, static_cast<uint32_t>(b->outstanding));
}

void RedisPool::FinishExpired(PendingBatch* b) {
  Finish(b, BatchError(b, ErrorCode::kDeadlineExceeded, "deadline passed before sending",
                       "deadline passed before sending"));
}

void RedisPool::Finish(PendingBatch* b, std::optional<Error> error) {
  if (b->done) return;
  b->done = true;
  if (b->timer != nullptr) {
    loop_.ReleaseTimer(b->timer);
    b->timer = nullptr;
  }
  if (b->queued) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), b));
    b->queued = false;
  }
  b->gave_up = b->outstanding > 0;
  if (error) {
    Bump(error->code == ErrorCode::kDeadlineExceeded ? stats_->failed_deadline
         : error->code == ErrorCode::kBackendError   ? stats_->failed_backend
                                                     : stats_->failed_unavailable);
    // Never written (queued for a connection, or expired before): Redis did no work.
    if (error->code == ErrorCode::kDeadlineExceeded && b->outstanding == 0)
      Bump(stats_->expired_unsent);
    b->error = std::move(error);
  } else {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - b->started);
    stats_->ObserveLatencyUs(static_cast<uint64_t>(us.count()));
  }
  // Never resume here: we may be inside the connection's read handler.
  if (b->waiter) loop_.Defer(b->waiter);
}

void RedisPool::SchedulePump() {
  if (pump_scheduled_ || closed_ || queue_.empty()) return;
  pump_scheduled_ = true;
  loop_.Defer([this, alive = alive_] {
    if (*alive) Pump();
  });
}

void RedisPool::Pump() {
  pump_scheduled_ = false;
  while (!queue_.empty()) {
    PendingBatch* b = queue_.front();
    // A batch whose request can no longer use its replies costs Redis nothing: its
    // timer may not have fired yet (whole milliseconds), so look before writing.
    if (deadline_exceeded(b->deadline)) {
      FinishExpired(b);  // leaves the queue
      continue;
    }
    RedisConnection* c = PickConnection(b->commands.size());
    if (c == nullptr) break;
    queue_.pop_front();
    b->queued = false;
    Send(c, b);
  }
  if (!queue_.empty() && !AnyConnectingOrLive()) {
    std::string why = NotLiveReason();
    while (!queue_.empty())
      Finish(queue_.front(), UnavailableError(queue_.front(), "no live connection", why));
  }
}

}  // namespace rankd
