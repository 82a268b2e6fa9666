// Coro<T>: values, void, exceptions, laziness, and a 100,000-deep await chain that must
// not grow the stack (symmetric transfer).
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "core/coro.h"

using namespace rankd;

namespace {
Coro<int> Value(int v) { co_return v; }
Coro<std::string> Concat(std::string a, std::string b) { co_return a + b; }
Coro<void> Nothing(int& touched) {
  touched = 1;
  co_return;
}
Coro<int> Throws() {
  throw std::runtime_error("boom");
  co_return 0;
}
Coro<int> Sum(int a, int b) { co_return (co_await Value(a)) + (co_await Value(b)); }
Coro<int> Chain(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await Chain(depth - 1);
}
Coro<std::unique_ptr<int>> MoveOnly() { co_return std::make_unique<int>(7); }

// Drives a task to completion from plain code (these tasks never suspend on IO).
template <class T>
T Drive(Coro<T> t) {
  T out{};
  bool done = false;
  auto outer = [&]() -> Coro<void> {
    out = co_await std::move(t);
    done = true;
  };
  Spawn(outer());
  REQUIRE(done);
  return out;
}
}  // namespace

TEST_CASE("Coro returns values") {
  CHECK(Drive(Value(42)) == 42);
  CHECK(Drive(Concat("ab", "cd")) == "abcd");
  CHECK(Drive(Sum(2, 3)) == 5);
  CHECK(*Drive(MoveOnly()) == 7);
}

TEST_CASE("Coro<void> runs its body") {
  int touched = 0;
  bool done = false;
  auto outer = [&]() -> Coro<void> {
    co_await Nothing(touched);
    done = true;
  };
  Spawn(outer());
  CHECK(done);
  CHECK(touched == 1);
}

TEST_CASE("Coro is lazy: nothing runs until awaited; destroying it unstarted is fine") {
  int touched = 0;
  {
    auto t = Nothing(touched);
    CHECK(t.valid());
    CHECK(touched == 0);
  }
  CHECK(touched == 0);
}

TEST_CASE("Coro propagates exceptions to the awaiter") {
  bool caught = false;
  auto outer = [&]() -> Coro<void> {
    try {
      co_await Throws();
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "boom";
    }
  };
  Spawn(outer());
  CHECK(caught);
}

// Sanitizer builds instrument every frame and GCC then no longer turns the symmetric
// transfer into a tail call, so the chain does use stack there (TSan also caps its
// shadow stack at 65,536 frames). The full depth is checked in the optimised build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kChainDepth = 1000;
#else
constexpr int kChainDepth = 100000;
#endif

TEST_CASE("A chain of 100,000 awaits does not grow the stack") {
  CHECK(Drive(Chain(kChainDepth)) == kChainDepth);
}

TEST_CASE("Coro is move-only and moves keep the frame") {
  Coro<int> a = Value(9);
  Coro<int> b = std::move(a);
  CHECK_FALSE(a.valid());
  CHECK(b.valid());
  CHECK(Drive(std::move(b)) == 9);
}
