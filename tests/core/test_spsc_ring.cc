// SpscRing: all-or-nothing records, wrap-around, and one producer against one consumer
// on two threads (every byte arrives once, in order; a full ring refuses, never blocks).
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "core/spsc_ring.h"

using namespace rankd;

namespace {
std::string Take(SpscRing& r) {
  auto p = r.Readable();
  std::string out(p.first);
  out += p.second;
  r.Release(p.size());
  return out;
}
}  // namespace

TEST_CASE("SpscRing: records are whole or refused") {
  SpscRing r(16);
  CHECK(r.TryPush("hello ", "world"));  // 11 bytes
  CHECK_FALSE(r.TryPush("123456"));     // 6 more do not fit: nothing written
  CHECK(r.TryPush("12345"));            // 5 do
  CHECK_FALSE(r.TryPush("x"));
  CHECK(Take(r) == "hello world12345");
  CHECK(r.empty());
}

TEST_CASE("SpscRing: reads across the wrap in two pieces") {
  SpscRing r(8);
  CHECK(r.TryPush("abcdef"));
  CHECK(Take(r) == "abcdef");
  CHECK(r.TryPush("ghijk"));  // wraps at 8
  auto p = r.Readable();
  CHECK(p.first == "gh");
  CHECK(p.second == "ijk");
  r.Release(p.size());
  CHECK(r.empty());
}

TEST_CASE("SpscRing: one producer, one consumer thread") {
  SpscRing r(256);
  constexpr int kLines = 50000;
  size_t refused = 0;
  std::string got;
  std::thread consumer([&] {
    size_t want = 0;
    for (int i = 0; i < kLines; ++i) want += std::to_string(i).size() + 1;
    while (got.size() < want) got += Take(r);
  });
  std::string sent;
  for (int i = 0; i < kLines; ++i) {
    std::string line = std::to_string(i);
    while (!r.TryPush(line, "\n")) {  // retry: this test wants every line through
      ++refused;
      std::this_thread::yield();
    }
    sent += line + "\n";
  }
  consumer.join();
  CHECK(got == sent);
  INFO("refusals while full: " << refused);
}
