// Blocking calls onto a started EventLoop, for the CLI, benchmarks, tests and start-up:
//   RunOnLoop(loop, fn) runs a plain callable on the loop thread and returns its result;
//   RunSync(loop, task) runs a Coro there and returns once it has finished.
// Both rethrow what the work threw, and throw LoopNotRunning if the loop refused the
// work (not started yet, or stopping).
//
// Threads: call from any thread except the loop's own.
#pragma once

#include <cassert>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "core/coro.h"
#include "core/event_loop.h"

namespace rankd {

struct LoopNotRunning : std::runtime_error {
  explicit LoopNotRunning(const EventLoop& loop)
      : std::runtime_error("loop '" + loop.name() + "' is not running") {}
};

namespace detail {

// One result (value, reference or exception) handed from the loop thread to a waiting
// caller. Not std::promise: its shared state can be destroyed on the loop thread while
// the caller still reads the exception it rethrew, and the exception's reference count
// lives in uninstrumented libsupc++, so ThreadSanitizer reports a race there. Here the
// loop thread's last touch of the exception happens before the mutex is released, and
// the caller takes the only reference out.
template <class T>
class Handoff {
 public:
  void SetValue() {  // T = void
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_one();
  }
  template <class V>
  void SetValue(V&& v) {
    std::lock_guard lock(mu_);
    if constexpr (std::is_reference_v<T>) {
      value_ = &v;
    } else {
      value_.emplace(std::forward<V>(v));
    }
    done_ = true;
    cv_.notify_one();
  }
  void SetException(std::exception_ptr e) {
    std::lock_guard lock(mu_);
    error_ = std::move(e);
    done_ = true;
    cv_.notify_one();
  }
  // Caller thread, once.
  T Get() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if constexpr (std::is_reference_v<T>) {
      return *value_;
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(*value_);
    }
  }

 private:
  using Stored = std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*,
                                    std::optional<std::conditional_t<std::is_void_v<T>, int, T>>>;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Stored value_{};
  std::exception_ptr error_;
};

template <class T>
Coro<void> FulfilInto(Coro<T> t, std::shared_ptr<Handoff<T>> h) {
  std::exception_ptr error;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      h->SetValue();
    } else {
      h->SetValue(co_await std::move(t));
    }
    co_return;
  } catch (...) {
    error = std::current_exception();
  }
  h->SetException(std::move(error));  // outside the handler: see Handoff
}
}  // namespace detail

template <class F>
auto RunOnLoop(EventLoop& loop, F fn) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  assert(!loop.InLoopThread() && "RunOnLoop from the loop thread would wait for itself");
  auto h = std::make_shared<detail::Handoff<R>>();
  bool posted = loop.Post([h, fn = std::move(fn)]() mutable {
    std::exception_ptr error;
    try {
      if constexpr (std::is_void_v<R>) {
        fn();
        h->SetValue();
      } else {
        h->SetValue(fn());
      }
      return;
    } catch (...) {
      error = std::current_exception();
    }
    h->SetException(std::move(error));  // outside the handler: see Handoff
  });
  if (!posted) throw LoopNotRunning(loop);
  return h->Get();
}

template <class T>
T RunSync(EventLoop& loop, Coro<T> task) {
  auto h = std::make_shared<detail::Handoff<T>>();
  auto holder = std::make_shared<Coro<T>>(std::move(task));
  if (!loop.Post([holder, h] { Spawn(detail::FulfilInto(std::move(*holder), h)); }))
    throw LoopNotRunning(loop);
  return h->Get();
}

}  // namespace rankd
