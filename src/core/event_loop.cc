#include "core/event_loop.h"

#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace rankd {

namespace {

// Callables refused when no loop thread is left to destroy them. Destroying one on the
// posting thread could touch loop-owned objects (a Responder writes to its connection)
// from the wrong thread, so they are kept here, reachable, for the life of the process.
void KeepForever(LoopCallback cb) {
  static std::mutex mu;
  static auto* kept = new std::vector<LoopCallback>();
  std::lock_guard lk(mu);
  kept->push_back(cb);
}

}  // namespace

EventLoop::EventLoop(std::string name) : name_(std::move(name)) {}

EventLoop::~EventLoop() {
  assert(!InLoopThread() && "EventLoop destroyed from its own thread");
  Stop();
  Join();
}

void EventLoop::DieOffLoopThread(std::source_location where) const {
  std::fprintf(
      stderr, "rankd: %s (%s:%u) is for the thread of loop '%s' only, and ran on another\n",
      where.function_name(), where.file_name(), static_cast<unsigned>(where.line()), name_.c_str());
  std::abort();
}

void EventLoop::Start() {
  std::lock_guard jlk(join_mu_);
  std::unique_lock lk(life_mu_);
  State expected = State::kIdle;
  if (!state_.compare_exchange_strong(expected, State::kStarting)) return;
  thread_ = std::thread([this] { ThreadMain(); });
  life_cv_.wait(lk, [this] { return state() != State::kStarting; });
}

bool EventLoop::Enqueue(LoopCallback cb) {
  bool wake;
  {
    std::lock_guard lk(queue_mu_);
    // Re-check under the lock: Stop flips the state under this lock, so nothing is
    // enqueued after the final drain has begun.
    State s = state();
    if (s != State::kRunning) {
      // Refused, and never run. While Stopping the loop thread destroys it (Shutdown);
      // otherwise there is no loop thread to do so. Inline callables own nothing.
      if (cb.boxed()) {
        if (s == State::kStopping)
          refused_.push_back(cb);
        else
          KeepForever(cb);
      }
      return false;
    }
    wake = queue_.empty();
    queue_.push_back(cb);
  }
  // uv_async_send coalesces anyway; skipping it while a wake-up is already pending saves
  // an atomic exchange and, often, an eventfd write per post.
  if (wake) uv_async_send(&async_);
  return true;
}

void EventLoop::Stop() {
  bool flipped = false;
  {
    std::lock_guard qlk(queue_mu_);
    State s = state();
    if (s == State::kIdle) {
      state_.store(State::kStopped, std::memory_order_release);
      return;
    }
    if (s == State::kStarting || s == State::kRunning) {
      state_.store(State::kStopping, std::memory_order_release);
      stop_requested_.store(true, std::memory_order_release);
      flipped = true;
    }
  }
  if (flipped) {
    if (InLoopThread()) {
      uv_stop(&loop_);  // the thread finishes once the current callback returns
      return;           // the destructor (on another thread) joins
    }
    // Before async_ready_ the thread wakes itself (see ThreadMain). async_ stays open
    // until Shutdown, which cannot begin before a wake-up is consumed.
    if (async_ready_.load(std::memory_order_acquire)) uv_async_send(&async_);
  }
  if (InLoopThread()) return;
  Join();
}

void EventLoop::Join() {
  std::lock_guard lk(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void EventLoop::ThreadMain() {
  thread_id_.store(std::this_thread::get_id());
  uv_loop_init(&loop_);
  uv_async_init(&loop_, &async_, &EventLoop::OnAsync);
  async_.data = this;
  async_ready_.store(true, std::memory_order_release);
  // A Stop() that came before async_ready_ could not wake us: wake ourselves.
  if (stop_requested_.load(std::memory_order_acquire)) uv_async_send(&async_);
  uv_check_init(&loop_, &check_);
  check_.data = this;
  uv_check_start(&check_, &EventLoop::OnCheck);
  uv_unref(reinterpret_cast<uv_handle_t*>(&check_));
  uv_idle_init(&loop_, &idle_);
  idle_.data = this;
  uv_prepare_init(&loop_, &prepare_);
  prepare_.data = this;
  uv_prepare_start(&prepare_, &EventLoop::OnPrepare);
  uv_unref(reinterpret_cast<uv_handle_t*>(&prepare_));
  timers_.Init(&loop_);
  {
    std::lock_guard lk(life_mu_);
    State expected = State::kStarting;
    // Stop() during start-up already moved us to Stopping: then we only clean up.
    state_.compare_exchange_strong(expected, State::kRunning);
  }
  life_cv_.notify_all();

  uv_run(&loop_, UV_RUN_DEFAULT);  // returns after OnAsync sees stop_requested_
  Shutdown();
  thread_id_.store(std::thread::id{});
}

void EventLoop::Shutdown() {
  // 1. Every callback accepted before Stop runs (Post refuses new ones already).
  RunPosted();
  RunDeferred();
  RunNextTurn();
  // 2. Let detached work finish: its timers and IO still work at this point.
  if (work_gate_.holders() > 0) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWorkGraceMs);
    // The guard timer only bounds the wait: uv_run(ONCE) returns when it fires.
    uv_timer_t* guard = AcquireTimer();
    uv_timer_start(
        guard, [](uv_timer_t*) {}, kWorkGraceMs, 0);
    while (work_gate_.holders() > 0 && std::chrono::steady_clock::now() < until) {
      uv_run(&loop_, UV_RUN_ONCE);
      RunDeferred();
      RunNextTurn();
    }
    ReleaseTimer(guard);
  }
  // Callables refused since Stop began: destroyed here, on the loop thread, while the
  // connections they may answer are still open.
  DiscardRefused();
  // 3. Components close their own handles, then we close whatever is left.
  auto hooks = std::move(shutdown_hooks_);
  for (auto& h : hooks) h();
  timers_.Close();
  for (auto* t : all_timers_)
    uv_close(reinterpret_cast<uv_handle_t*>(t),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  all_timers_.clear();
  free_timers_.clear();
  uv_walk(
      &loop_,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  RunDeferred();
  next_turn_.clear();  // their handles are closed: nothing is left for them to do
  uv_loop_close(&loop_);
  // Flip to Stopped under the queue lock: a callable refused before the flip is in
  // refused_ (destroyed just below, on this thread); one refused after it is kept forever.
  std::vector<LoopCallback> last;
  {
    std::lock_guard lk(life_mu_);
    std::lock_guard qlk(queue_mu_);
    last.swap(refused_);
    state_.store(State::kStopped, std::memory_order_release);
  }
  for (auto& cb : last) cb.Discard();
  life_cv_.notify_all();
}

void EventLoop::DiscardRefused() {
  std::vector<LoopCallback> batch;
  {
    std::lock_guard lk(queue_mu_);
    batch.swap(refused_);
  }
  for (auto& cb : batch) cb.Discard();
}

void EventLoop::RunPosted() {
  // Swap the whole queue out per wake-up: uv_async_send coalesces, so one wake-up may
  // stand for many posts.
  for (;;) {
    {
      std::lock_guard lk(queue_mu_);
      if (queue_.empty()) return;
      batch_.swap(queue_);
    }
    for (auto& cb : batch_) cb.Run();
    batch_.clear();
  }
}

void EventLoop::Defer(std::function<void()> fn) {
  AssertInLoopThread();
  if (deferred_.empty()) uv_idle_start(&idle_, &EventLoop::OnIdle);  // poll must not block
  deferred_.push_back(std::move(fn));
}

void EventLoop::RunDeferred() {
  while (!deferred_.empty()) {
    deferred_spare_.swap(deferred_);
    for (auto& fn : deferred_spare_) fn();
    deferred_spare_.clear();
  }
  if (next_turn_.empty()) uv_idle_stop(&idle_);
}

void EventLoop::NextTurn(std::function<void()> fn) {
  AssertInLoopThread();
  if (next_turn_.empty()) uv_idle_start(&idle_, &EventLoop::OnIdle);
  next_turn_.push_back(std::move(fn));
}

void EventLoop::RunNextTurn() {
  if (next_turn_.empty()) return;
  // The batch is this turn's work: it starts the budget (OnPrepare then leaves it), and
  // whatever it queues again waits for the turn after.
  turn_start_ns_ = uv_hrtime();
  turn_started_by_next_turn_ = true;
  next_turn_running_.swap(next_turn_);
  for (auto& fn : next_turn_running_) fn();
  next_turn_running_.clear();
}

uv_timer_t* EventLoop::AcquireTimer() {
  AssertInLoopThread();
  if (!free_timers_.empty()) {
    auto* t = free_timers_.back();
    free_timers_.pop_back();
    return t;
  }
  auto* t = new uv_timer_t;
  uv_timer_init(&loop_, t);
  all_timers_.push_back(t);
  return t;
}

void EventLoop::ReleaseTimer(uv_timer_t* t) {
  AssertInLoopThread();
  uv_timer_stop(t);
  t->data = nullptr;
  free_timers_.push_back(t);
}

void EventLoop::OnAsync(uv_async_t* a) {
  auto* self = static_cast<EventLoop*>(a->data);
  self->RunPosted();
  self->RunDeferred();
  if (self->stop_requested_.load(std::memory_order_acquire)) uv_stop(&self->loop_);
}

void EventLoop::OnCheck(uv_check_t* c) { static_cast<EventLoop*>(c->data)->RunDeferred(); }

void EventLoop::OnIdle(uv_idle_t* i) {
  auto* self = static_cast<EventLoop*>(i->data);
  self->RunNextTurn();
  self->RunDeferred();
}

void EventLoop::CancelBeforePoll(void* arg) {
  AssertInLoopThread();
  // In place, never erased: RunBeforePoll may be walking the running batch.
  for (auto* calls : {&before_poll_, &before_poll_running_})
    for (BeforePollCall& c : *calls)
      if (c.arg == arg) c.fn = nullptr;
}

void EventLoop::RunBeforePoll() {
  while (!before_poll_.empty()) {
    before_poll_running_.swap(before_poll_);
    // By index: a call may cancel later ones (their owner closed).
    for (size_t i = 0; i < before_poll_running_.size(); ++i)
      if (BeforePollCall c = before_poll_running_[i]; c.fn != nullptr) c.fn(c.arg);
    before_poll_running_.clear();
  }
}

// libuv runs prepare handles right before it computes the poll timeout and polls, so
// the before-poll calls see everything this turn queued; work they Defer keeps the poll
// from blocking (the idle handle) and runs in the check phase after it.
void EventLoop::OnPrepare(uv_prepare_t* p) {
  auto* self = static_cast<EventLoop*>(p->data);
  self->RunBeforePoll();
  if (!self->turn_started_by_next_turn_) self->turn_start_ns_ = uv_hrtime();
  self->turn_started_by_next_turn_ = false;
}

}  // namespace rankd
