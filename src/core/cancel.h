// CancelToken: tells work that nobody needs its result any more. The loop thread
// cancels (the request has answered, or the node's timeout race was lost); the work,
// usually on a CPU worker, polls cancelled() between blocks of rows and stops early.
// A token may have a parent and then reads as cancelled when either is (a node's token
// under its request's).
//
// Threads: Cancel and cancelled from any thread. set_parent before the token is shared.
// The parent must outlive the token.
#pragma once

#include <atomic>

namespace rankd {

class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void set_parent(const CancelToken* parent) { parent_ = parent; }
  // Relaxed: the flag carries no data; a worker that sees it a little late only does a
  // little more work.
  void Cancel() { flag_.store(true, std::memory_order_relaxed); }
  bool cancelled() const {
    return flag_.load(std::memory_order_relaxed) || (parent_ && parent_->cancelled());
  }

 private:
  std::atomic<bool> flag_{false};
  const CancelToken* parent_ = nullptr;
};

}  // namespace rankd
