// First-wins races between work and a loop timer:
//   OffloadCpuWithTimeout — CPU work on a pool vs a timer;
//   AsyncWithTimeout      — a coroutine (IO) vs a timer.
// Whichever finishes first decides the result; the loser's completion is discarded and,
// if it is the work, counted in LateCompletions(). The race itself never stops work: the
// caller cancels it cooperatively (core/cancel.h) once the race is over, and the work
// owns (via shared_ptr) everything it touches, so nothing dangles.
// AsyncWithTimeout runs the inner coroutine in a runner that holds the loop's work gate
// (EventLoop::HoldWork), and EventLoop::Stop lets holders finish before it closes
// handles; CPU work is waited for by ThreadPool::WaitIdle before loops stop.
//
// Threads: co_await on the loop thread of `loop` only (checked in debug and sanitizer
// builds). LateCompletions() from any thread.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "core/coro.h"
#include "core/error.h"
#include "core/event_loop.h"
#include "core/thread_pool.h"

namespace rankd {

// Completions that arrived after their race was lost, process-wide.
std::atomic<uint64_t>& LateCompletions();

namespace detail {

// Result<T>, except that a T which already is a Result<X> stays Result<X>.
template <class T>
struct Flatten {
  using type = Result<T>;
};
template <class X>
struct Flatten<std::expected<X, Error>> {
  using type = Result<X>;
};

template <class T>
typename Flatten<T>::type WrapValue(T&& v) {
  return typename Flatten<T>::type(std::move(v));
}

inline Error ExceptionToError(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return Error::Internal(std::string("uncaught exception: ") + ex.what());
  } catch (...) {
    return Error::Internal("uncaught non-standard exception");
  }
}

inline Error TimeoutError(uint64_t ms) {
  return Error::DeadlineExceeded("timed out after " + std::to_string(ms) + " ms");
}

// State shared by the awaiter, the timer and the work. Loop thread only, except `value`
// and `error`, which a CPU worker writes before it posts to the loop.
template <class T>
struct RaceState {
  EventLoop* loop = nullptr;
  bool done = false;
  bool timed_out = false;
  std::optional<T> value;
  std::exception_ptr error;
  std::optional<Error> refused;  // the pool did not take the work (queue full, shut down)
  std::coroutine_handle<> waiter;
  TimerQueue::Id timer = 0;
  uint64_t timeout_ms = 0;

  // The timer callback holds a raw pointer: the awaiter keeps the state alive until the
  // waiter resumes, and the timer is always cancelled or fired before that.
  void StartTimer() {
    timer = loop->timers().Start(timeout_ms, [this] {
      timer = 0;
      done = true;
      timed_out = true;
      waiter.resume();
    });
  }
  void StopTimer() {
    if (timer) loop->timers().Cancel(timer);
    timer = 0;
  }
  typename Flatten<T>::type Take() {
    if (timed_out) return std::unexpected(TimeoutError(timeout_ms));
    if (refused) return std::unexpected(std::move(*refused));
    if (error) return std::unexpected(ExceptionToError(error));
    return WrapValue(std::move(*value));
  }
};

}  // namespace detail

// co_await OffloadCpuWithTimeout(loop, pool, timeout_ms, fn) -> Result<R> (flattened):
// fn's value, Error::Internal if it threw, Error::DeadlineExceeded if the timer won, or
// the pool's refusal (Error::Unavailable when its queue is full: ThreadPool::TrySubmit).
// timeout_ms == 0 means the time is already up: fn does not run.
template <class F>
class OffloadCpuWithTimeout {
 public:
  using R = std::invoke_result_t<F&>;
  using Out = typename detail::Flatten<R>::type;

  OffloadCpuWithTimeout(EventLoop& loop, ThreadPool& pool, uint64_t timeout_ms, F fn)
      : pool_(pool),
        fn_(std::make_shared<F>(std::move(fn))),
        st_(std::make_shared<detail::RaceState<R>>()) {
    st_->loop = &loop;
    st_->timeout_ms = timeout_ms;
  }

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    auto st = st_;
    st->loop->AssertInLoopThread();
    if (st->timeout_ms == 0) {
      st->done = st->timed_out = true;
      return false;
    }
    st->waiter = h;
    Status queued = pool_.TrySubmit([st, fn = fn_] {
      try {
        st->value.emplace((*fn)());
      } catch (...) {
        st->error = std::current_exception();
      }
      st->loop->Post([st] {
        if (st->done) {
          LateCompletions().fetch_add(1, std::memory_order_relaxed);
          return;
        }
        st->done = true;
        st->StopTimer();
        st->waiter.resume();
      });
    });
    if (!queued) {
      st->refused = std::move(queued.error());
      st->done = true;
      return false;
    }
    st->StartTimer();
    return true;
  }
  Out await_resume() { return st_->Take(); }

 private:
  ThreadPool& pool_;
  std::shared_ptr<F> fn_;
  std::shared_ptr<detail::RaceState<R>> st_;
};

// co_await AsyncWithTimeout(loop, std::move(task), timeout_ms) -> Result<T> (flattened).
// REQUIRES: the task owns everything it touches (it may outlive the awaiter).
template <class T>
class AsyncWithTimeout {
 public:
  using Out = typename detail::Flatten<T>::type;

  AsyncWithTimeout(EventLoop& loop, Coro<T> task, uint64_t timeout_ms)
      : task_(std::move(task)), st_(std::make_shared<detail::RaceState<T>>()) {
    st_->loop = &loop;
    st_->timeout_ms = timeout_ms;
  }

  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    if (st_->timeout_ms == 0) {
      st_->done = st_->timed_out = true;
      return false;  // the task never starts
    }
    st_->waiter = h;
    Runner(st_, std::move(task_));  // runs until its first suspension
    if (st_->done) return false;    // finished without suspending: resume at once
    st_->StartTimer();
    return true;
  }
  Out await_resume() { return st_->Take(); }

 private:
  static detail::Detached Runner(std::shared_ptr<detail::RaceState<T>> st, Coro<T> task) {
    EventLoop& loop = *st->loop;
    WorkGate::Hold hold = loop.HoldWork();
    std::optional<T> value;
    std::exception_ptr error;
    try {
      value.emplace(co_await std::move(task));
    } catch (...) {
      error = std::current_exception();
    }
    if (st->done) {
      LateCompletions().fetch_add(1, std::memory_order_relaxed);
    } else {
      bool suspended = st->timer != 0;  // await_suspend already returned true
      st->done = true;
      st->StopTimer();
      st->value = std::move(value);
      st->error = error;
      // Resume the waiter later in this loop turn, never from inside this runner's body
      // (its frame is still live) nor from inside a foreign callback.
      if (suspended) loop.Defer(st->waiter);
    }
  }

  Coro<T> task_;
  std::shared_ptr<detail::RaceState<T>> st_;
};

}  // namespace rankd
