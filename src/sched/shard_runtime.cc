#include "sched/shard_runtime.h"

#include <chrono>
#include <thread>

#include "redis/pools.h"

namespace rankd {

ShardRuntime::ShardRuntime(std::string name, size_t cpu_threads, size_t cpu_queue_max)
    : LoopRuntime(std::move(name), cpu_threads, cpu_queue_max) {
  env_.loop = &loop();
  env_.pool = &cpu();
}

ShardRuntime::~ShardRuntime() { Stop(); }

void ShardRuntime::Stop() {
  LoopRuntime::Stop();
  redis_.reset();  // the loop has stopped: nothing can use them any more
}

RedisPools& ShardRuntime::OpenRedis(const std::vector<RedisEndpoint>& endpoints,
                                    const RedisClientOptions& opts) {
  loop().AssertInLoopThread();
  redis_ = std::make_unique<RedisPools>(loop(), endpoints, opts);
  env_.redis = redis_.get();
  AtStop([this] { redis_->Close(); });
  return *redis_;
}

RedisPools* ShardRuntime::redis() const {
  loop().AssertInLoopThread();
  return redis_.get();
}

bool ShardRuntime::WaitRedisReady(int ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    if (OnLoop([this] { return redis_ && redis_->Ready(); })) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ShardRuntime::InstallPlans(std::shared_ptr<const PlanSet> plans) {
  loop().AssertInLoopThread();
  plans_ = std::move(plans);
}

const std::shared_ptr<const PlanSet>& ShardRuntime::plans() const {
  loop().AssertInLoopThread();
  return plans_;
}

}  // namespace rankd
