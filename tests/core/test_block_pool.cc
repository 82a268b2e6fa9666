// The block pool (coroutine frames, request states): blocks are reused, the per-thread
// cache stays within its bound, big blocks bypass it, and blocks freed on another thread
// or after a thread's cache is gone are handled. (ASan builds make the pool a
// pass-through: the reuse checks are skipped there.)
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "core/block_pool.h"
#include "core/coro.h"

using namespace rankd;

namespace {
constexpr bool kPooled = block_pool::kPooled;

Coro<int> Leaf(int v) { co_return v; }
Coro<int> Tree(int depth) {
  if (depth == 0) co_return 1;
  int a = co_await Tree(depth - 1);
  int b = co_await Tree(depth - 1);
  co_return a + b;
}
int RunSync(Coro<int> t) {
  int out = 0;
  auto body = [](Coro<int> t, int& out) -> Coro<void> { out = co_await std::move(t); };
  Spawn(body(std::move(t), out));
  return out;
}
}  // namespace

TEST_CASE("a freed block of a size class is handed out again") {
  void* a = block_pool::Allocate(100);
  block_pool::Free(a, 100);
  void* b = block_pool::Allocate(120);  // the same 128-byte class
  if (kPooled) CHECK(b == a);
  block_pool::Free(b, 120);
}

TEST_CASE("frames of a finished coroutine tree are reused, not reallocated") {
  CHECK(RunSync(Tree(6)) == 64);
  size_t cached = block_pool::CachedBytes();
  if (kPooled) CHECK(cached > 0);
  CHECK(RunSync(Tree(6)) == 64);
  CHECK(block_pool::CachedBytes() == cached);  // the same blocks went out and came back
}

TEST_CASE("the per-thread cache never holds more than its bound") {
  std::vector<void*> blocks;
  size_t n = 2 * block_pool::kMaxCachedBytes / 256;
  for (size_t i = 0; i < n; ++i) blocks.push_back(block_pool::Allocate(256));
  for (void* p : blocks) block_pool::Free(p, 256);
  CHECK(block_pool::CachedBytes() <= block_pool::kMaxCachedBytes);
}

TEST_CASE("frames bigger than the largest class bypass the cache") {
  size_t before = block_pool::CachedBytes();
  void* p = block_pool::Allocate(block_pool::kMaxBlock + 1);
  block_pool::Free(p, block_pool::kMaxBlock + 1);
  CHECK(block_pool::CachedBytes() == before);
}

TEST_CASE("a frame allocated on one thread may be freed on another, and threads exit clean") {
  void* p = nullptr;
  std::thread([&] { p = block_pool::Allocate(300); }).join();
  block_pool::Free(p, 300);  // joins this thread's cache
  for (int i = 0; i < 4; ++i)
    std::thread([] {
      CHECK(RunSync(Tree(5)) == 32);
      CHECK(RunSync(Leaf(3)) == 3);
    }).join();  // each thread's cache is drained at its exit (LeakSanitizer would see it)
}
