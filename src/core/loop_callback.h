// LoopCallback: the type-erased void() callable that EventLoop queues. Small trivially
// copyable callables (a coroutine handle, a pointer or two) are stored inline and cost
// one indirect call, like a hand-written (function pointer, argument) pair; anything
// else is boxed on the heap. Each LoopCallback is run exactly once.
//
// Threads: built on the posting thread, run and destroyed on the loop thread.
#pragma once

#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace rankd {

class LoopCallback {
 public:
  static constexpr size_t kInline = 24;

  template <class F>
  static LoopCallback Make(F&& f) {
    using Fn = std::decay_t<F>;
    LoopCallback cb;
    if constexpr (std::is_trivially_copyable_v<Fn> && sizeof(Fn) <= kInline &&
                  alignof(Fn) <= alignof(void*)) {
      new (cb.buf_) Fn(std::forward<F>(f));
      cb.op_ = [](void* buf, bool run) {
        if (run) (*std::launder(reinterpret_cast<Fn*>(buf)))();
      };
    } else {
      Fn* boxed = new Fn(std::forward<F>(f));
      std::memcpy(cb.buf_, &boxed, sizeof(boxed));
      cb.boxed_ = true;
      cb.op_ = [](void* buf, bool run) {
        Fn* p;
        std::memcpy(&p, buf, sizeof(p));
        if (run) (*p)();
        delete p;
      };
    }
    return cb;
  }

  // Runs the callable (and frees a boxed one). REQUIRES: Run or Discard, once.
  void Run() { op_(buf_, true); }
  // Frees it without running it.
  void Discard() { op_(buf_, false); }
  // Whether it owns a heap object that Run or Discard must destroy (inline callables are
  // trivially copyable: dropping them destroys nothing).
  bool boxed() const { return boxed_; }

 private:
  void (*op_)(void*, bool) = nullptr;
  bool boxed_ = false;
  alignas(void*) unsigned char buf_[kInline];
};

static_assert(std::is_trivially_copyable_v<LoopCallback>);

}  // namespace rankd
