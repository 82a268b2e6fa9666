// LoopRuntime: one event loop thread with its slice of CPU workers, started and stopped
// in the one order that is safe for the work they share:
//
//   Start: the loop thread runs; the CPU workers already wait for jobs.
//   Stop:  1. on the loop, the closers registered with AtStop, newest first: the owners
//             of IO (Redis pools, timers) close it, so that pending work fails at once
//             and detached work can finish;
//          2. the CPU workers finish their jobs: a job that ended after the loop stopped
//             could not post its result back;
//          3. the loop runs what was posted, waits (bounded) for the holders of its work
//             gate, closes every handle and joins its thread;
//          4. the CPU workers exit.
//
// It also runs plain callables and Tasks on the loop for a caller that waits (OnLoop,
// Run). ShardRuntime (sched/shard_runtime.h) adds what a shard's requests need on top.
//
// Threads: construct, Start, OnLoop, Run, Stop and destroy from any thread but the
// loop's (the main or test thread). AtStop on the loop thread only (checked). loop() and
// cpu() from anywhere; what they allow is in their own headers.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/coro.h"
#include "core/event_loop.h"
#include "core/run_sync.h"
#include "core/thread_pool.h"

namespace rankd {

class LoopRuntime {
 public:
  // cpu_queue_max: jobs that may wait for a CPU worker (ThreadPool::set_max_queued);
  // 0 = unbounded.
  LoopRuntime(std::string name, size_t cpu_threads, size_t cpu_queue_max = 0);
  ~LoopRuntime();  // Stop()
  LoopRuntime(const LoopRuntime&) = delete;
  LoopRuntime& operator=(const LoopRuntime&) = delete;

  void Start();
  // The order at the top of this file. Idempotent; does nothing before Start but stop
  // the workers.
  void Stop();

  // Runs fn on the loop thread and returns its result (or rethrows what it threw).
  template <class F>
  decltype(auto) OnLoop(F fn) {
    return RunOnLoop(loop_, std::move(fn));
  }
  // Runs the task on the loop thread and returns once it has finished.
  template <class T>
  T Run(Coro<T> task) {
    return RunSync(loop_, std::move(task));
  }

  // Loop thread: `closer` runs first in Stop, on the loop thread (see step 1).
  void AtStop(std::function<void()> closer);

  EventLoop& loop() { return loop_; }
  const EventLoop& loop() const { return loop_; }
  ThreadPool& cpu() { return cpu_; }

 private:
  EventLoop loop_;
  ThreadPool cpu_;
  std::vector<std::function<void()>> closers_;  // loop thread
};

}  // namespace rankd
