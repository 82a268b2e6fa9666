// TestShard: a LoopRuntime with RedisPools built on its loop, driven from the test thread
// (OnLoop, Batch) the way a shard is driven by its requests. The pools are closed on the
// loop when it stops and freed after (as ShardRuntime does: this layer cannot see it).
//
// Threads: the test's own thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/loop_runtime.h"
#include "redis/endpoint.h"
#include "redis/shard_clients.h"
#include "redis/tls_context.h"

namespace rankd::testing {

// Polls `pred` every 5 ms until it holds (true) or `ms` passed (false).
template <class F>
bool Eventually(F pred, int ms = 10000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

class TestShard {
 public:
  explicit TestShard(const std::vector<std::string>& redis_flags, RedisClientOptions opts = {}) {
    auto eps = ParseRedisFlags(redis_flags);
    if (!eps) throw std::runtime_error(eps.error().message);
    if (auto tls = LoadRedisTls(*eps); !tls) throw std::runtime_error(tls.error().message);
    runtime_.Start();
    runtime_.OnLoop([&] {
      pools_ = std::make_unique<RedisPools>(runtime_.loop(), *eps, opts);
      runtime_.AtStop([this] { pools_->Close(); });
    });
  }
  ~TestShard() {
    runtime_.Stop();
    pools_.reset();
  }

  EventLoop& loop() { return runtime_.loop(); }
  RedisPools& pools() { return *pools_; }
  RedisClient& pool(const std::string& name = "redis_default") { return *pools_->Get(name); }

  // Runs f on the loop thread and waits for its result.
  template <class F>
  decltype(auto) OnLoop(F f) {
    return runtime_.OnLoop(std::move(f));
  }

  // One Batch() on the loop; deadline_ms < 0 means none.
  Result<RespReplies> Batch(std::vector<RedisCommand> cmds, int deadline_ms = -1,
                            const std::string& name = "redis_default") {
    Deadline d;
    if (deadline_ms >= 0) d = Clock::now() + std::chrono::milliseconds(deadline_ms);
    return runtime_.Run(pool(name).Batch(std::move(cmds), d));
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
  LoopRuntime runtime_{"test-shard", /*cpu_threads=*/1};
  std::unique_ptr<RedisPools> pools_;
};

}  // namespace rankd::testing
