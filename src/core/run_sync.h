// RunSync: runs a Task on a started EventLoop and blocks the calling thread until it
// finishes; for the CLI, benchmarks and tests.
//
// Threads: call from any thread except the loop's own.
#pragma once

#include <exception>
#include <future>
#include <memory>
#include <stdexcept>

#include "core/event_loop.h"
#include "core/task.h"

namespace rankd {

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

template <class T>
T RunSync(EventLoop& loop, Task<T> task) {
  auto p = std::make_shared<std::promise<T>>();
  auto fut = p->get_future();
  auto holder = std::make_shared<Task<T>>(std::move(task));
  if (!loop.Post([holder, p] { Spawn(detail::FulfilInto(std::move(*holder), p)); }))
    throw std::runtime_error("RunSync: loop is not running");
  return fut.get();
}

}  // namespace rankd
