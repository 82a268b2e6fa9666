#include "core/timer_queue.h"

#include <algorithm>

namespace rankd {

void TimerQueue::Init(uv_loop_t* loop) {
  loop_ = loop;
  uv_timer_init(loop_, &uv_timer_);
  uv_timer_.data = this;
}

void TimerQueue::Close() {
  if (closed_) return;
  closed_ = true;
  uv_timer_stop(&uv_timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&uv_timer_), nullptr);
  for (auto& s : slots_)
    if (s.armed) s.cb.Discard();
  slots_.clear();
  heap_.clear();
  live_ = 0;
}

TimerQueue::Id TimerQueue::Push(uint64_t ms, LoopCallback cb) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.cb = cb;
  s.armed = true;
  ++live_;
  Entry e{uv_now(loop_) + ms, seq_++, slot, s.gen};
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), Later);
  if (e.due < armed_due_) Arm();
  return (uint64_t{s.gen} << 32 | slot) + 1;
}

bool TimerQueue::Cancel(Id id) {
  if (id == 0) return false;
  --id;
  auto slot = static_cast<uint32_t>(id & 0xffffffffu);
  auto gen = static_cast<uint32_t>(id >> 32);
  if (slot >= slots_.size()) return false;
  Slot& s = slots_[slot];
  if (!s.armed || s.gen != gen) return false;
  s.cb.Discard();
  s.armed = false;
  ++s.gen;
  --live_;
  free_slots_.push_back(slot);
  return true;
}

void TimerQueue::Arm() {
  // Drop cancelled entries at the top so the uv timer is armed for a live one.
  while (!heap_.empty()) {
    const Entry& top = heap_.front();
    const Slot& s = slots_[top.slot];
    if (s.armed && s.gen == top.gen) break;
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    heap_.pop_back();
  }
  if (heap_.empty()) {
    armed_due_ = UINT64_MAX;
    uv_timer_stop(&uv_timer_);
    return;
  }
  armed_due_ = heap_.front().due;
  uint64_t now = uv_now(loop_);
  uv_timer_start(
      &uv_timer_, [](uv_timer_t* t) { static_cast<TimerQueue*>(t->data)->Fire(); },
      armed_due_ > now ? armed_due_ - now : 0, 0);
}

void TimerQueue::Fire() {
  armed_due_ = UINT64_MAX;
  uint64_t now = uv_now(loop_);
  // Callbacks may start or cancel timers: take each due entry off the heap first.
  while (!heap_.empty() && heap_.front().due <= now && !closed_) {
    Entry e = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    heap_.pop_back();
    Slot& s = slots_[e.slot];
    if (!s.armed || s.gen != e.gen) continue;  // cancelled
    LoopCallback cb = s.cb;
    s.armed = false;
    ++s.gen;
    --live_;
    free_slots_.push_back(e.slot);
    cb.Run();
  }
  if (!closed_) Arm();
}

}  // namespace rankd
