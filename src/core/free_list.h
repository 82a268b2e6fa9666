// ThreadFreeList<T>: a small per-thread stock of emptied containers (std::string,
// std::vector) kept with their capacity, so that the buffers of one batch serve the next
// (RespReplies' reply bytes, RedisCommands' encoded commands, a /rank response body)
// instead of a malloc and a free per batch and per growth step.
//
// Per thread because each shard is one loop thread and a buffer may outlive the pool
// that filled it (replies handed to a task). Bounded: at most kMaxEntries containers,
// and none whose capacity is over the caller's cap, so one huge batch does not pin its
// memory. Safe during thread exit: once the stock is destroyed, Take makes new
// containers and Give lets them go.
//
// Threads: each thread has its own stock; nothing is shared.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace rankd {

template <class T>
class ThreadFreeList {
 public:
  static constexpr size_t kMaxEntries = 64;

  // An empty container, with the capacity of one given back earlier if any.
  static T Take() {
    if (gone_) return T();
    Stock& s = stock_;
    if (s.items.empty()) return T();
    T t = std::move(s.items.back());
    s.items.pop_back();
    return t;
  }
  // Keeps `t`'s storage when it is worth it (0 < capacity <= max_capacity) and there is
  // room; `t` is left empty either way.
  static void Give(T& t, size_t max_capacity) {
    const size_t cap = t.capacity();
    if (!gone_ && cap > 0 && cap <= max_capacity) {
      Stock& s = stock_;
      if (s.items.size() < kMaxEntries) {
        t.clear();
        s.items.push_back(std::move(t));
      }
    }
    t = T();
  }

 private:
  struct Stock {
    Stock() { items.reserve(kMaxEntries); }
    ~Stock() { gone_ = true; }
    std::vector<T> items;
  };
  static inline thread_local Stock stock_;
  static inline thread_local bool gone_ = false;  // trivially destructible: readable at exit
};

// Recycled<T, kMax, kMin>: a container taken from this thread's ThreadFreeList when made
// and given back when destroyed or overwritten by a move — the one way a buffer that is
// filled and dropped once per batch or request is held. Storage over kMax bytes (capacity) is
// freed, and storage of kMin or less is not worth keeping (a std::string's own small buffer).
template <class T, size_t kMax, size_t kMin = 0>
class Recycled {
 public:
  Recycled() : v_(ThreadFreeList<T>::Take()) {}
  ~Recycled() { GiveBack(); }
  Recycled(Recycled&& o) noexcept : v_(std::exchange(o.v_, T())) {}
  Recycled& operator=(Recycled&& o) noexcept {
    if (this != &o) {
      GiveBack();
      v_ = std::exchange(o.v_, T());
    }
    return *this;
  }
  Recycled(const Recycled&) = delete;
  Recycled& operator=(const Recycled&) = delete;

  T& operator*() { return v_; }
  const T& operator*() const { return v_; }
  T* operator->() { return &v_; }
  const T* operator->() const { return &v_; }

 private:
  void GiveBack() {
    if (v_.capacity() > kMin)
      ThreadFreeList<T>::Give(v_, kMax);
    else
      v_ = T();
  }
  T v_;
};

}  // namespace rankd
