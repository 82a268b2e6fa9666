// Blocking calls onto a started EventLoop, for the CLI, benchmarks, tests and start-up:
//   RunOnLoop(loop, fn) runs a plain callable on the loop thread and returns its result;
//   RunSync(loop, task) runs a Task there and returns once it has finished.
// Both rethrow what the work threw, and throw LoopNotRunning if the loop refused the
// work (not started yet, or stopping).
//
// Threads: call from any thread except the loop's own.
#pragma once

#include <cassert>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "core/event_loop.h"
#include "core/task.h"

namespace rankd {

struct LoopNotRunning : std::runtime_error {
  explicit LoopNotRunning(const EventLoop& loop)
      : std::runtime_error("loop '" + loop.name() + "' is not running") {}
};

namespace detail {
template <class T>
Task<void> FulfilInto(Task<T> t, std::shared_ptr<std::promise<T>> p) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(t);
      p->set_value();
    } else {
      p->set_value(co_await std::move(t));
    }
  } catch (...) {
    p->set_exception(std::current_exception());
  }
}
}  // namespace detail

template <class F>
auto RunOnLoop(EventLoop& loop, F fn) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  assert(!loop.InLoopThread() && "RunOnLoop from the loop thread would wait for itself");
  auto p = std::make_shared<std::promise<R>>();
  auto fut = p->get_future();
  bool posted = loop.Post([p, fn = std::move(fn)]() mutable {
    try {
      if constexpr (std::is_void_v<R>) {
        fn();
        p->set_value();
      } else {
        p->set_value(fn());
      }
    } catch (...) {
      p->set_exception(std::current_exception());
    }
  });
  if (!posted) throw LoopNotRunning(loop);
  return fut.get();
}

template <class T>
T RunSync(EventLoop& loop, Task<T> task) {
  auto p = std::make_shared<std::promise<T>>();
  auto fut = p->get_future();
  auto holder = std::make_shared<Task<T>>(std::move(task));
  if (!loop.Post([holder, p] { Spawn(detail::FulfilInto(std::move(*holder), p)); }))
    throw LoopNotRunning(loop);
  return fut.get();
}

}  // namespace rankd
