// WorkGate: counts detached work — coroutines that outlive whoever started them (a lost
// timeout race, a plan node still running after its request answered) — so that the
// owner of the loop can let that work finish before it closes the handles the work uses.
// Work takes a Hold for as long as it runs; the Hold lets go when it is destroyed, also
// when a suspended coroutine frame is destroyed without finishing. EventLoop::Stop waits
// (bounded) until no Hold is left.
//
//   Coro<void> Runner(EventLoop& loop) {
//     WorkGate::Hold hold = loop.HoldWork();
//     co_await ...;
//   }
//
// Threads: the thread of the loop that owns the gate only (a plain counter, no atomics:
// it is taken once per detached run on the request path).
#pragma once

#include <utility>

namespace rankd {

class WorkGate {
 public:
  class [[nodiscard]] Hold {
   public:
    Hold() = default;
    explicit Hold(WorkGate& gate) : gate_(&gate) { ++gate_->holders_; }
    Hold(Hold&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        Release();
        gate_ = std::exchange(o.gate_, nullptr);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Release(); }

   private:
    void Release() {
      if (gate_) --std::exchange(gate_, nullptr)->holders_;
    }
    WorkGate* gate_ = nullptr;
  };

  WorkGate() = default;
  WorkGate(const WorkGate&) = delete;
  WorkGate& operator=(const WorkGate&) = delete;

  int holders() const { return holders_; }

 private:
  int holders_ = 0;
};

}  // namespace rankd
