// TimerQueue: one-shot timers of one loop kept in a flat binary heap behind a single
// uv_timer_t. Starting and cancelling cost O(log n) heap moves, with no uv handle per
// timer and no pointer chasing, which is why coroutine sleeps and timeout races use it
// rather than a uv_timer_t each. The heap is indexed (each slot knows its entry's
// position), so Cancel removes the entry at once: memory follows the timers alive, not
// their due times (a 60 s deadline cancelled after 1 ms costs nothing for 60 s).
//
// Threads: loop thread only; reached through EventLoop::timers(), which checks it in
// debug and sanitizer builds. pending() may be read from any thread (for /metrics).
#pragma once

#include <uv.h>

#include <cstdint>
#include <vector>

#include "core/loop_callback.h"
#include "core/metric_value.h"

namespace rankd {

class TimerQueue {
 public:
  using Id = uint64_t;  // 0 is never a valid id

  void Init(uv_loop_t* loop);  // REQUIRES: loop thread, before any Start
  void Close();                // closes the uv timer; pending callbacks are discarded

  // Runs cb once, `ms` milliseconds after the loop's current time (uv_now), like a
  // uv timer would.
  template <class F>
  Id Start(uint64_t ms, F&& cb) {
    return Push(ms, LoopCallback::Make(std::forward<F>(cb)));
  }
  // Cancels a pending timer; false if it already ran or was cancelled.
  bool Cancel(Id id);
  size_t pending() const { return live_; }
  // Entries held in the heap (equal to pending(): nothing cancelled lingers).
  size_t entries() const { return heap_.size(); }

 private:
  struct Slot {
    LoopCallback cb;
    uint32_t gen = 0;       // bumped when the timer ends: stale ids do not match
    uint32_t heap_pos = 0;  // where its entry is in heap_, while armed
    bool armed = false;
  };
  struct Entry {
    uint64_t due;  // loop time, ms
    uint64_t seq;  // FIFO among equal due times
    uint32_t slot;
  };
  Id Push(uint64_t ms, LoopCallback cb);
  void Arm();
  void Fire();
  // Heap maintenance that keeps Slot::heap_pos in step with every move.
  void Place(size_t pos, const Entry& e);
  void SiftUp(size_t pos);
  void SiftDown(size_t pos);
  void RemoveAt(size_t pos);
  void FreeSlot(uint32_t slot);
  static bool Before(const Entry& a, const Entry& b) {
    return a.due != b.due ? a.due < b.due : a.seq < b.seq;
  }

  uv_loop_t* loop_ = nullptr;
  uv_timer_t uv_timer_{};
  bool closed_ = false;
  std::vector<Entry> heap_;  // min-heap by (due, seq); slots_[e.slot].heap_pos == index
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  uint64_t seq_ = 0;
  uint64_t armed_due_ = UINT64_MAX;
  MetricValue<size_t> live_;
};

}  // namespace rankd
