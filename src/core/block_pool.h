// The block pool: a per-thread, bounded cache of small heap blocks in 64-byte size
// classes, for the blocks every request needs and gives back at its end — coroutine
// frames (core/coro.h allocates every Coro and Detached frame here) and the scheduler's
// request state. Once a shard has warmed up, a request takes these from its thread's
// cache instead of asking malloc for each.
//
// Bounded: each thread keeps at most kMaxCachedBytes of free blocks; blocks larger than
// kMaxBlock always go to operator new, and past the bound a freed block goes back to
// operator delete. A block may be freed on another thread than the one that allocated
// it (it joins that thread's cache). A thread's cache is returned to the heap when the
// thread exits; blocks freed after that go straight to operator delete.
//
// In ASan builds the pool is a pass-through, so that a use of a freed frame or request
// state is still reported as heap-use-after-free instead of landing in a recycled block.
//
// Threads: any; the cache is the calling thread's own (thread_local), no locks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rankd::block_pool {

// False in ASan builds, where every call goes straight to operator new/delete.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kPooled = false;
#else
inline constexpr bool kPooled = true;
#endif
inline constexpr std::size_t kGranule = 64;
inline constexpr std::size_t kMaxBlock = 8192;
inline constexpr std::size_t kMaxCachedBytes = 1 << 20;  // per thread

// `n` bytes, aligned for any fundamental type. Throws std::bad_alloc like operator new.
void* Allocate(std::size_t n);
// Returns a block of `n` bytes (the size Allocate was given).
void Free(void* p, std::size_t n) noexcept;

// This thread's cached free bytes (tests).
std::size_t CachedBytes() noexcept;

// An allocator over the pool, for std::allocate_shared and containers.
template <class T>
struct Allocator {
  using value_type = T;
  Allocator() = default;
  template <class U>
  Allocator(const Allocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(Allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { Free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const Allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace rankd::block_pool

namespace rankd {

// Containers whose storage comes from the pool: what a request builds and drops (row-set
// cells, selections, task inputs, the parsed HTTP request) reuses the blocks of the
// requests before it. Past kMaxBlock bytes they go to the heap as any vector would.
template <class T>
using PoolVector = std::vector<T, block_pool::Allocator<T>>;
using PoolString = std::basic_string<char, std::char_traits<char>, block_pool::Allocator<char>>;

}  // namespace rankd
