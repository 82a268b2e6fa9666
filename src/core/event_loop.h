// EventLoop: one libuv loop on its own thread (one per shard), with the lifecycle
// Idle -> Starting -> Running -> Stopping -> Stopped.
//
// Threads: Start, Stop, Post, state, InLoopThread and name may be called from any
// thread. Everything else (uv(), Defer, NextTurn, the turn budget, timers, HoldWork,
// shutdown hooks) is for the loop thread only, and checks it (AssertInLoopThread) in
// debug and sanitizer builds. Callbacks must not destroy the EventLoop; the destructor
// must not run on the loop thread.
#pragma once

#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <mutex>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "core/loop_callback.h"
#include "core/spin_lock.h"
#include "core/timer_queue.h"
#include "core/work_gate.h"

namespace rankd {

class EventLoop {
 public:
  enum class State : uint8_t { kIdle, kStarting, kRunning, kStopping, kStopped };

  explicit EventLoop(std::string name = "loop");
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Spawns the loop thread and returns once it is Running. A second call does nothing.
  void Start();

  // Queues fn (any void() callable) to run on the loop thread. Returns false, and never
  // runs fn, unless the state is Running. Safe from any thread at any time.
  // A refused fn is not destroyed on the calling thread either: what it holds (a
  // Responder, a connection's state) belongs to the loop thread. While the loop is
  // Stopping it is kept and destroyed (not run) on the loop thread at the end of Stop;
  // once the loop is Stopped, or before it started, no loop thread is left to destroy
  // it, and it is leaked on purpose (reachable, so leak checkers stay quiet).
  // Pass fn as an rvalue: a copy left with the caller is destroyed by the caller.
  template <class F>
  bool Post(F&& fn) {
    return Enqueue(LoopCallback::Make(std::forward<F>(fn)));
  }

  // Flips to Stopping at once (Post refuses from then on), runs every callback accepted
  // before, waits up to kWorkGraceMs for the holders of the work gate (HoldWork), closes
  // every handle and joins the thread. Idempotent. From the loop thread it only asks the
  // loop to finish; the destructor joins.
  void Stop();

  State state() const { return state_.load(std::memory_order_acquire); }
  bool InLoopThread() const { return std::this_thread::get_id() == thread_id_.load(); }

  // The check at the top of every loop-only entry point: aborts, naming the caller, when
  // called from another thread. On in debug and sanitizer builds, compiled out with
  // NDEBUG (release), so it costs the hot path nothing where it is measured.
  void AssertInLoopThread(std::source_location where = std::source_location::current()) const {
#ifndef NDEBUG
    if (!InLoopThread()) DieOffLoopThread(where);
#else
    (void)where;
#endif
  }
  const std::string& name() const { return name_; }

  // --- loop thread only ---------------------------------------------------------------
  uv_loop_t* uv() {
    AssertInLoopThread();
    return &loop_;
  }

  // Runs fn later in this loop turn, after the current callback returns (used to resume
  // coroutines from inside another component's callback, such as a connection's read
  // handler).
  void Defer(std::function<void()> fn);
  void Defer(std::coroutine_handle<> h) {
    Defer([h] { h.resume(); });
  }

  // --- turn budget ----------------------------------------------------------------------
  // One loop turn should not run so long that its timers fire late. Code that admits new
  // work (the HTTP reader) asks TurnOverBudget() before taking more, and when the turn
  // has used its budget it queues the rest with NextTurn instead. A turn starts just
  // before libuv polls for IO, or when the NextTurn batch starts, whichever is first.
  bool TurnOverBudget() const {
    AssertInLoopThread();
    return uv_hrtime() - turn_start_ns_ > turn_budget_ns_;
  }
  // Runs fn in the next loop turn, after that turn's timers and before its IO.
  void NextTurn(std::function<void()> fn);
  void set_turn_budget_us(uint64_t us) {
    AssertInLoopThread();
    turn_budget_ns_ = us * 1000;
  }
  static constexpr uint64_t kDefaultTurnBudgetUs = 250;

  // --- before poll ----------------------------------------------------------------------
  // Calls fn(arg) once, just before the loop next waits for IO: after every callback and
  // deferred job of this turn. A connection gathers the turn's writes and sends them
  // there in one syscall instead of arming EPOLLOUT for them (in libuv each change of a
  // poll's events costs an epoll_ctl DEL and ADD, and the write waits for another poll).
  // Allocates nothing once warm. CancelBeforePoll(arg) withdraws every pending call with
  // that arg: an owner going away calls it.
  using BeforePollFn = void (*)(void* arg);
  void BeforePoll(BeforePollFn fn, void* arg) {
    AssertInLoopThread();
    before_poll_.push_back({fn, arg});
  }
  void CancelBeforePoll(void* arg);

  // One-shot timers in a flat heap (coroutine sleeps, timeout races): see TimerQueue.
  TimerQueue& timers() {
    AssertInLoopThread();
    return timers_;
  }

  // Pooled uv timer handles, for code that needs a real uv_timer_t (repeating timers,
  // uv_timer_again): no uv_timer_init/uv_close per use.
  uv_timer_t* AcquireTimer();
  void ReleaseTimer(uv_timer_t* t);  // stops it and returns it to the pool

  // Detached coroutines that outlive their awaiter (timeout races, plan nodes) hold the
  // loop's work gate while they run, so that Stop lets them finish before it tears the
  // loop down (see WorkGate).
  WorkGate::Hold HoldWork() {
    AssertInLoopThread();
    return WorkGate::Hold(work_gate_);
  }
  // Detached runs holding the gate now.
  int runners() const {
    AssertInLoopThread();
    return work_gate_.holders();
  }
  // How long Stop lets the gate's holders finish before it closes handles anyway.
  static constexpr uint64_t kWorkGraceMs = 5000;

  // Components that own handles register a closer; Stop calls each on the loop thread
  // before the final walk, so they can close their handles with their own callbacks.
  void AddShutdownHook(std::function<void()> fn) {
    AssertInLoopThread();
    shutdown_hooks_.push_back(std::move(fn));
  }

 private:
  [[noreturn]] void DieOffLoopThread(std::source_location where) const;
  bool Enqueue(LoopCallback cb);
  void ThreadMain();
  void Join();
  // Run what is queued (posted, deferred, next-turn), including what it queues anew.
  void RunPosted();
  void RunDeferred();
  void RunNextTurn();
  void RunBeforePoll();
  void Shutdown();        // loop thread: final drain, hooks, close handles
  void DiscardRefused();  // loop thread: destroys callables Post refused while Stopping
  static void OnAsync(uv_async_t* a);
  static void OnCheck(uv_check_t* c);
  static void OnIdle(uv_idle_t* i);
  static void OnPrepare(uv_prepare_t* p);

  std::string name_;
  // Cache-line layout matters for Post: every post reads state_ and writes the queue
  // block; the loop thread writes the queue block once per batch. Keeping the two apart,
  // and away from loop-only fields, avoids false sharing between producer and loop.
  alignas(64) std::atomic<State> state_{State::kIdle};
  std::atomic<std::thread::id> thread_id_{};
  std::thread thread_;
  std::mutex join_mu_;  // guards thread_ (Start, Join)
  std::mutex life_mu_;  // with life_cv_: start-up and stop hand-shakes
  std::condition_variable life_cv_;
  std::atomic<bool> async_ready_{false};

  alignas(64) SpinLock queue_mu_;                // held for a push or a swap only
  std::vector<LoopCallback> queue_;              // guarded by queue_mu_
  std::vector<LoopCallback> refused_;            // guarded by queue_mu_: refused while Stopping
  alignas(64) std::vector<LoopCallback> batch_;  // loop thread: the queue being run
  std::atomic<bool> stop_requested_{false};

  uv_loop_t loop_{};
  uv_async_t async_{};
  uv_check_t check_{};
  uv_idle_t idle_{};        // active while Defer or NextTurn work waits: poll must not block
  uv_prepare_t prepare_{};  // runs the before-poll calls, starts the turn's budget
  std::vector<std::function<void()>> deferred_;
  std::vector<std::function<void()>> deferred_spare_;
  std::vector<std::function<void()>> next_turn_;
  std::vector<std::function<void()>> next_turn_running_;
  struct BeforePollCall {
    BeforePollFn fn;  // nullptr once cancelled
    void* arg;
  };
  std::vector<BeforePollCall> before_poll_;
  std::vector<BeforePollCall> before_poll_running_;
  uint64_t turn_start_ns_ = 0;
  uint64_t turn_budget_ns_ = kDefaultTurnBudgetUs * 1000;
  bool turn_started_by_next_turn_ = false;
  TimerQueue timers_;
  std::vector<uv_timer_t*> all_timers_;  // owned; closed at shutdown
  std::vector<uv_timer_t*> free_timers_;
  std::vector<std::function<void()>> shutdown_hooks_;
  WorkGate work_gate_;
};

}  // namespace rankd
