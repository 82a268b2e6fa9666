#include "core/timer_queue.h"

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

void TimerQueue::Place(size_t pos, const Entry& e) {
  heap_[pos] = e;
  slots_[e.slot].heap_pos = static_cast<uint32_t>(pos);
}

void TimerQueue::SiftUp(size_t pos) {
  Entry e = heap_[pos];
  while (pos > 0) {
    size_t parent = (pos - 1) / 2;
    if (!Before(e, heap_[parent])) break;
    Place(pos, heap_[parent]);
    pos = parent;
  }
  Place(pos, e);
}

void TimerQueue::SiftDown(size_t pos) {
  Entry e = heap_[pos];
  size_t n = heap_.size();
  for (;;) {
    size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], e)) break;
    Place(pos, heap_[child]);
    pos = child;
  }
  Place(pos, e);
}

void TimerQueue::RemoveAt(size_t pos) {
  Entry last = heap_.back();
  heap_.pop_back();
  if (pos == heap_.size()) return;  // it was the last one
  Place(pos, last);
  // The moved entry may belong above or below its new place.
  if (pos > 0 && Before(last, heap_[(pos - 1) / 2]))
    SiftUp(pos);
  else
    SiftDown(pos);
}

void TimerQueue::FreeSlot(uint32_t slot) {
  Slot& s = slots_[slot];
  s.armed = false;
  ++s.gen;
  --live_;
  free_slots_.push_back(slot);
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
  Entry e{uv_now(loop_) + ms, seq_++, slot};
  heap_.push_back(e);
  SiftUp(heap_.size() - 1);
  if (e.due < armed_due_) Arm();
  return (uint64_t{slots_[slot].gen} << 32 | slot) + 1;
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
  bool was_first = s.heap_pos == 0;
  RemoveAt(s.heap_pos);
  FreeSlot(slot);
  // The uv timer may now be armed early for a removed entry; re-arm only when that
  // entry was the first (otherwise the armed time is still the heap's first).
  if (was_first) Arm();
  return true;
}

void TimerQueue::Arm() {
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
    uint32_t slot = heap_.front().slot;
    RemoveAt(0);
    LoopCallback cb = slots_[slot].cb;
    FreeSlot(slot);
    cb.Run();
  }
  if (!closed_) Arm();
}

}  // namespace rankd
