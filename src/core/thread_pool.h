// ThreadPool: fixed CPU worker threads fed from one queue. Each shard owns its own pool
// (its slice of the CPU workers), so shards never contend on a queue.
//
// Threads: Submit, TrySubmit, WaitIdle and inflight may be called from any thread;
// set_max_queued before jobs are submitted; the destructor and Shutdown from any thread
// but a worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace rankd {

class ThreadPool {
 public:
  // `nice` > 0 lowers the workers' scheduling priority (Linux nice value, per thread):
  // for background work that must yield the cores to the shard loops.
  explicit ThreadPool(size_t threads, std::string name = "cpu", int nice = 0);
  ~ThreadPool();  // Shutdown()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues a job whatever the queue holds. Returns false (job dropped, never run) after
  // Shutdown began. For control work; request work goes through TrySubmit.
  bool Submit(std::function<void()> job);
  // Queues a job unless max_queued() jobs already wait (unavailable: the caller answers
  // "busy" rather than letting work pile up unboundedly) or Shutdown began (internal).
  Status TrySubmit(std::function<void()> job);
  // Jobs waiting for a worker (not counting running ones) that TrySubmit accepts;
  // 0 = no bound.
  void set_max_queued(size_t n) { max_queued_ = n; }
  size_t max_queued() const { return max_queued_; }
  // Once the oldest waiting job has waited longer than `d`, workers take the newest
  // first (adaptive LIFO); 0 = always FIFO. Set before jobs are submitted.
  void set_lifo_after(std::chrono::milliseconds d) { lifo_after_ = d; }

  // Blocks until every submitted job has finished running. Jobs post their completions
  // to event loops, so wait for it before stopping the loops it posts to (LoopRuntime::Stop
  // does).
  void WaitIdle();

  // Finishes queued jobs, then joins the workers. Idempotent.
  void Shutdown();

  size_t size() const { return workers_.size(); }
  size_t inflight() const;

 private:
  void WorkerMain();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  struct Queued {
    std::chrono::steady_clock::time_point queued;
    std::function<void()> run;
  };
  std::deque<Queued> jobs_;  // guarded by mu_
  size_t inflight_ = 0;      // queued + running, guarded by mu_
  bool stopping_ = false;    // guarded by mu_
  size_t max_queued_ = 0;
  std::chrono::milliseconds lifo_after_{0};
  std::vector<std::thread> workers_;
  std::string name_;
  int nice_ = 0;
};

}  // namespace rankd
