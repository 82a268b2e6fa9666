// FunctionRef<R(Args...)>: a non-owning reference to a callable, for callbacks that are
// called only while the call that receives them runs (a block sink, a visitor). Unlike
// std::function it never allocates, whatever the lambda captures; the callable must
// outlive every call through the reference.
//
// Threads: a plain value; calls run on the caller's thread.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace rankd {

template <class Sig>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>) FunctionRef(F&& f)
  noexcept  // NOLINT(google-explicit-constructor): used like a lambda
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace rankd
