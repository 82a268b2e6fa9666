#include "sched/shard_runtime.h"

#include <uv.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "redis/shard_clients.h"
#include "tasks/cache_families.h"

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
  applied_schema_ = plans_ ? plans_->schema : nullptr;
  if (applied_schema_) cache_->SetFamilies(CacheFamiliesOf(*applied_schema_));
  if (redis_ && opts.budget_bytes > 0) {
    const auto& pools = redis_->pools();
    for (size_t i = 0; i < pools.size(); ++i) {
      sinks_.push_back(std::make_unique<CacheSink>(*cache_, static_cast<uint16_t>(i)));
      TrackingConfig config;
      config.sink = sinks_.back().get();
      config.mode = mode;
      if (applied_schema_) config.bcast_prefixes = TrackingPrefixesOf(*applied_schema_);
      pools[i]->EnableTracking(config);
    }
  }
  return *cache_;
}

void ShardRuntime::ApplySchema() {
  if (!cache_ || !plans_ || plans_->schema == applied_schema_) return;
  applied_schema_ = plans_->schema;
  if (!applied_schema_) return;
  // Entries of families whose definition changed (or that are gone) are dropped, and no
  // read begun under the old schema stores, before a request of the new one starts.
  cache_->SetFamilies(CacheFamiliesOf(*applied_schema_));
  if (redis_ && cache_->budget_bytes() > 0)
    for (const auto& pool : redis_->pools())
      pool->SetTrackingPrefixes(TrackingPrefixesOf(*applied_schema_));
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
  ApplySchema();
}

const std::shared_ptr<const PlanSet>& ShardRuntime::plans() const {
  loop().AssertInLoopThread();
  return plans_;
}

}  // namespace rankd
