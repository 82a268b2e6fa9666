// Coro<T>: a lazy, move-only coroutine returning T (or void), with symmetric transfer so
// that a chain of awaits of any depth runs in constant stack. Spawn() starts a Coro<void>
// detached: its frame frees itself when it finishes.
//
// Threads: a Coro is resumed on whatever thread resumes it; in rankd that is always the
// loop thread of the shard that owns the request. Not thread-safe.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>
#include <variant>

#include "core/block_pool.h"

namespace rankd {

template <class T>
class Coro;

namespace detail {

// Resumes the awaiting coroutine when the task finishes (symmetric transfer: no stack
// growth however long the chain of awaits).
struct FinalAwaiter {
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> h) noexcept {
    auto& p = h.promise();
    if (p.detached) {
      // Spawned: nobody awaits the result. An exception escaping a detached task is a
      // bug: stop loudly rather than lose it.
      if (p.has_error()) std::terminate();
      h.destroy();
      return std::noop_coroutine();
    }
    auto next = p.continuation;
    return next ? next : std::noop_coroutine();
  }
  void await_resume() const noexcept {}
};

// Frames come from the thread's block pool (core/block_pool.h), not from malloc.
struct PooledFrame {
  static void* operator new(std::size_t n) { return block_pool::Allocate(n); }
  static void operator delete(void* p, std::size_t n) noexcept { block_pool::Free(p, n); }
};

struct PromiseBase : PooledFrame {
  std::coroutine_handle<> continuation;
  bool detached = false;  // started by Spawn: frees its own frame at the end
  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
};

template <class T>
struct Promise : PromiseBase {
  std::variant<std::monostate, T, std::exception_ptr> result;

  Coro<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& v) {
    result.template emplace<1>(std::forward<U>(v));
  }
  void unhandled_exception() noexcept { result.template emplace<2>(std::current_exception()); }

  bool has_error() const { return result.index() == 2; }
  T take() {
    if (result.index() == 2) std::rethrow_exception(std::get<2>(result));
    return std::move(std::get<1>(result));
  }
};

template <>
struct Promise<void> : PromiseBase {
  std::exception_ptr error;

  Coro<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void unhandled_exception() noexcept { error = std::current_exception(); }
  bool has_error() const { return static_cast<bool>(error); }
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace detail

template <class T = void>
class [[nodiscard]] Coro {
 public:
  using promise_type = detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Coro() = default;
  explicit Coro(Handle h) : h_(h) {}
  Coro(Coro&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Coro& operator=(Coro&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Coro(const Coro&) = delete;
  Coro& operator=(const Coro&) = delete;
  ~Coro() { reset(); }

  bool valid() const { return static_cast<bool>(h_); }

  // Awaiting starts the task and resumes the awaiter with its result (or rethrows).
  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle h;
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        h.promise().continuation = awaiting;
        return h;
      }
      T await_resume() { return h.promise().take(); }
    };
    return Awaiter{h_};
  }

  // REQUIRES: valid(). Hands the frame over; used by Spawn and the timeout wrappers.
  Handle release() { return std::exchange(h_, {}); }

 private:
  void reset() {
    if (h_) h_.destroy();
    h_ = {};
  }
  Handle h_;
};

namespace detail {
template <class T>
Coro<T> Promise<T>::get_return_object() noexcept {
  return Coro<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Coro<void> Promise<void>::get_return_object() noexcept {
  return Coro<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}

// A coroutine that starts at once and frees its own frame at the end (used where a
// plain function must become a coroutine, e.g. the runners of core/timeout.h).
struct Detached {
  struct promise_type : PooledFrame {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() noexcept {}
    // An exception escaping a detached task is a bug: stop loudly, never lose it.
    void unhandled_exception() noexcept { std::terminate(); }
  };
};
}  // namespace detail

// Starts `t` now, on the calling thread, and lets it run to completion on its own; its
// frame frees itself at the end. The task must catch its own exceptions (an escaping
// one terminates the process).
inline void Spawn(Coro<void> t) {
  auto h = t.release();
  h.promise().detached = true;
  h.resume();
}

}  // namespace rankd
