// ThreadPool: fixed CPU worker threads fed from one queue. Each shard owns its own pool
// (its slice of the CPU workers), so shards never contend on a queue.
//
// Threads: Submit, wait_idle and in_flight may be called from any thread; the destructor
// and Shutdown from any thread but a worker.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rankd {

class ThreadPool {
 public:
  // `nice` > 0 lowers the workers' scheduling priority (Linux nice value, per thread):
  // for background work that must yield the cores to the shard loops.
  explicit ThreadPool(size_t threads, std::string name = "cpu", int nice = 0);
  ~ThreadPool();  // Shutdown()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues a job. Returns false (job dropped, never run) after Shutdown began.
  bool Submit(std::function<void()> job);

  // Blocks until every submitted job has finished running. Jobs post their completions
  // to event loops, so drain the pool before stopping the loops it posts to (seed 001).
  void wait_idle();

  // Finishes queued jobs, then joins the workers. Idempotent.
  void Shutdown();

  size_t size() const { return workers_.size(); }
  size_t in_flight() const;

 private:
  void WorkerMain();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  size_t in_flight_ = 0;                    // queued + running, guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::vector<std::thread> workers_;
  std::string name_;
  int nice_ = 0;
};

}  // namespace rankd
