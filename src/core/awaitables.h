// Awaitables that suspend a coroutine on the loop: SleepMs (a pooled uv timer) and
// OffloadCpu (run a function on a ThreadPool, resume on the loop).
//
// Threads: co_await them on the loop thread of `loop` only (checked in debug builds).
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "core/event_loop.h"
#include "core/thread_pool.h"

namespace rankd {

// co_await SleepMs(loop, ms): resumes after `ms` on a loop timer (no thread blocked).
// SleepMs(loop, 0) does not suspend.
class SleepMs {
 public:
  SleepMs(EventLoop& loop, uint64_t ms) : loop_(loop), ms_(ms) {}
  bool await_ready() const noexcept { return ms_ == 0; }
  void await_suspend(std::coroutine_handle<> h) {
    loop_.timers().Start(ms_, [h] { h.resume(); });
  }
  void await_resume() const noexcept {}

 private:
  EventLoop& loop_;
  uint64_t ms_;
};

// co_await OffloadCpu(loop, pool, fn): runs fn() on a pool worker and resumes on the loop
// with its result (an exception thrown by fn is rethrown here). fn must own what it
// touches. If the pool is shut down the awaiter resumes at once with std::runtime_error.
// If the loop stops before the result is posted the coroutine is never resumed (wait for
// the pool to be idle before stopping the loop: LoopRuntime::Stop does).
template <class F>
class OffloadCpu {
 public:
  using R = std::invoke_result_t<F&>;
  static_assert(!std::is_void_v<R>, "OffloadCpu: return a value (e.g. std::monostate)");

  OffloadCpu(EventLoop& loop, ThreadPool& pool, F fn)
      : loop_(loop), pool_(pool), fn_(std::move(fn)) {}

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    loop_.AssertInLoopThread();
    bool queued = pool_.Submit([this, h] {
      try {
        result_.emplace(fn_());
      } catch (...) {
        error_ = std::current_exception();
      }
      loop_.Post([h] { h.resume(); });
    });
    if (!queued) error_ = std::make_exception_ptr(std::runtime_error("CPU pool is shut down"));
    return queued;
  }
  R await_resume() {
    if (error_) std::rethrow_exception(error_);
    return std::move(*result_);
  }

 private:
  EventLoop& loop_;
  ThreadPool& pool_;
  F fn_;
  std::optional<R> result_;
  std::exception_ptr error_;
};

}  // namespace rankd
