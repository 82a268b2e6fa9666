#include "core/thread_pool.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rankd {

ThreadPool::ThreadPool(size_t threads, std::string name, int nice)
    : name_(std::move(name)), nice_(nice) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { WorkerMain(); });
    pthread_setname_np(workers_.back().native_handle(), name_.substr(0, 15).c_str());
  }
}

ThreadPool::~ThreadPool() { Shutdown(); }

bool ThreadPool::Submit(std::function<void()> job) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return false;
    jobs_.push_back({std::chrono::steady_clock::now(), std::move(job)});
    ++inflight_;
  }
  work_cv_.notify_one();
  return true;
}

Status ThreadPool::TrySubmit(std::function<void()> job) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return Fail(Error::Internal("CPU pool '" + name_ + "' is shut down"));
    if (max_queued_ && jobs_.size() >= max_queued_)
      return Fail(Error::Unavailable("CPU queue '" + name_ + "' is full (" +
                                     std::to_string(max_queued_) + " jobs wait); retry later"));
    jobs_.push_back({std::chrono::steady_clock::now(), std::move(job)});
    ++inflight_;
  }
  work_cv_.notify_one();
  return {};
}

void ThreadPool::WaitIdle() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [this] { return inflight_ == 0; });
}

size_t ThreadPool::inflight() const {
  std::lock_guard lk(mu_);
  return inflight_;
}

void ThreadPool::Shutdown() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
}

void ThreadPool::WorkerMain() {
  // On Linux a nice value set with the thread id applies to that thread alone. Failing
  // to lower it is harmless: the work still runs.
  if (nice_ > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lk(mu_);
      work_cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and nothing left
      // Adaptive LIFO (docs/operations.md, "Overload"): once the oldest waiting job has
      // waited longer than lifo_after_, the queue is a standing backlog and the newest
      // job goes first — its request is the one most likely to still meet its deadline;
      // the oldest either still has time once the backlog clears or is skipped unstarted
      // when its request answers (cancelled). FIFO otherwise: a short queue starves no one.
      if (lifo_after_.count() > 0 &&
          std::chrono::steady_clock::now() - jobs_.front().queued > lifo_after_) {
        job = std::move(jobs_.back().run);
        jobs_.pop_back();
      } else {
        job = std::move(jobs_.front().run);
        jobs_.pop_front();
      }
    }
    job();
    job = nullptr;  // destroy captures before we report idle
    {
      std::lock_guard lk(mu_);
      if (--inflight_ == 0) idle_cv_.notify_all();
    }
  }
}

}  // namespace rankd
