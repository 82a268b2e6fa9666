#include "core/block_pool.h"

#include <new>

namespace rankd::block_pool {

namespace {

constexpr size_t kClasses = kMaxBlock / kGranule;

size_t ClassOf(size_t n) { return (n + kGranule - 1) / kGranule - 1; }  // n >= 1

struct FreeBlock {
  FreeBlock* next;
};

// A thread's state: trivially destructible, so it stays readable while the thread's
// thread_local objects are destroyed.
enum class State : unsigned char { kNew, kLive, kGone };
thread_local State state = State::kNew;

struct Cache {
  FreeBlock* heads[kClasses] = {};
  size_t bytes = 0;

  ~Cache() {
    state = State::kGone;  // frees from later destructors bypass the cache
    for (size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = heads[c]) {
        heads[c] = b->next;
        ::operator delete(b, (c + 1) * kGranule);
      }
    bytes = 0;
  }
};

thread_local Cache cache;  // constructed on the thread's first use; drained at its exit

Cache* Mine() {
  switch (state) {
    case State::kLive: return &cache;
    case State::kGone: return nullptr;
    case State::kNew: state = State::kLive; return &cache;
  }
  return nullptr;
}

}  // namespace

void* Allocate(size_t n) {
  if (!kPooled || n == 0 || n > kMaxBlock) return ::operator new(n);
  size_t c = ClassOf(n);
  if (Cache* k = Mine(); k != nullptr && k->heads[c] != nullptr) {
    FreeBlock* b = k->heads[c];
    k->heads[c] = b->next;
    k->bytes -= (c + 1) * kGranule;
    return b;
  }
  return ::operator new((c + 1) * kGranule);
}

void Free(void* p, size_t n) noexcept {
  if (p == nullptr) return;
  if (!kPooled || n == 0 || n > kMaxBlock) return ::operator delete(p, n);
  size_t c = ClassOf(n);
  size_t size = (c + 1) * kGranule;
  Cache* k = Mine();
  if (k == nullptr || k->bytes + size > kMaxCachedBytes) return ::operator delete(p, size);
  auto* b = static_cast<FreeBlock*>(p);
  b->next = k->heads[c];
  k->heads[c] = b;
  k->bytes += size;
}

size_t CachedBytes() noexcept {
  Cache* k = Mine();
  return k ? k->bytes : 0;
}

}  // namespace rankd::block_pool
