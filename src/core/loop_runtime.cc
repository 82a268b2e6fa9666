#include "core/loop_runtime.h"

#include <cassert>
#include <utility>

namespace rankd {

LoopRuntime::LoopRuntime(std::string name, size_t cpu_threads, size_t cpu_queue_max)
    : loop_(name), cpu_(cpu_threads, name + "-cpu") {
  cpu_.set_max_queued(cpu_queue_max);
}

LoopRuntime::~LoopRuntime() { Stop(); }

void LoopRuntime::Start() { loop_.Start(); }

void LoopRuntime::AtStop(std::function<void()> closer) {
  loop_.AssertInLoopThread();
  closers_.push_back(std::move(closer));
}

void LoopRuntime::Stop() {
  assert(!loop_.InLoopThread() && "LoopRuntime::Stop from its own loop thread");
  // 1. A loop that never started, or already stops, refuses the closers: then its own
  // shutdown (hooks, handle walk) closes what they would have.
  if (loop_.state() == EventLoop::State::kRunning) {
    try {
      OnLoop([this] {
        auto closers = std::exchange(closers_, {});
        for (auto it = closers.rbegin(); it != closers.rend(); ++it) (*it)();
      });
    } catch (const LoopNotRunning&) {
    }
  }
  cpu_.WaitIdle();  // 2.
  loop_.Stop();     // 3.
  cpu_.Shutdown();  // 4.
}

}  // namespace rankd
