#include "sched/shard_runtime.h"

#include <uv.h>

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
  sinks_.clear();  // then what they called
  cache_.reset();
}

ShardCache& ShardRuntime::OpenCache(const ShardCache::Options& opts, TrackingMode mode) {
  loop().AssertInLoopThread();
  cache_ = std::make_unique<ShardCache>(opts, [] { return uv_hrtime() / 1000000; });
  env_.cache = cache_.get();
  if (redis_ && opts.budget_bytes > 0) {
    const auto& pools = redis_->pools();
    for (size_t i = 0; i < pools.size(); ++i) {
      sinks_.push_back(std::make_unique<CacheSink>(*cache_, static_cast<uint16_t>(i)));
      TrackingConfig config;
      config.sink = sinks_.back().get();
      config.mode = mode;
      for (CacheKind k : {CacheKind::kUser, CacheKind::kFollow, CacheKind::kRecs, CacheKind::kMedia,
                          CacheKind::kItem})
        config.bcast_prefixes.emplace_back(CacheKindPrefix(k));
      pools[i]->EnableTracking(config);
    }
  }
  return *cache_;
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
