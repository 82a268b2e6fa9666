// TestShard: an EventLoop on its own thread with RedisPools built on it, driven from the
// test thread (OnLoop, Batch) the way a shard is driven by its requests.
//
// Threads: the test's own thread.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/event_loop.h"
#include "core/run_sync.h"
#include "redis/endpoint.h"
#include "redis/pools.h"

namespace rankd::testing {

class TestShard {
 public:
  explicit TestShard(const std::vector<std::string>& redis_flags, RedisClientOptions opts = {})
      : loop_("test-shard") {
    auto eps = ParseRedisFlags(redis_flags);
    if (!eps) throw std::runtime_error(eps.error().message);
    loop_.Start();
    OnLoop([&] { pools_ = std::make_unique<RedisPools>(loop_, *eps, opts); });
  }
  ~TestShard() {
    OnLoop([&] { pools_.reset(); });
    loop_.Stop();
  }

  EventLoop& loop() { return loop_; }
  RedisPools& pools() { return *pools_; }
  RedisPool& pool(const std::string& name = "redis_default") { return *pools_->Get(name); }

  // Runs f on the loop thread and waits for its result.
  template <class F>
  auto OnLoop(F f) -> decltype(f()) {
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto fut = task->get_future();
    if (!loop_.Post([task] { (*task)(); })) throw std::runtime_error("loop not running");
    return fut.get();
  }

  // One Batch() on the loop; deadline_ms < 0 means none.
  Result<std::vector<RedisReply>> Batch(std::vector<RedisCommand> cmds, int deadline_ms = -1,
                                        const std::string& name = "redis_default") {
    Deadline d;
    if (deadline_ms >= 0) d = Clock::now() + std::chrono::milliseconds(deadline_ms);
    return RunSync(loop_, pool(name).Batch(std::move(cmds), d));
  }

  // Polls until every endpoint is live (true) or `ms` passed (false).
  bool WaitReady(int ms = 10000) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      if (OnLoop([&] { return pools_->Ready(); })) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  EventLoop loop_;
  std::unique_ptr<RedisPools> pools_;
};

}  // namespace rankd::testing
