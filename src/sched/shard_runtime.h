// ShardRuntime: what one shard runs requests with — its loop and CPU worker slice (a
// LoopRuntime, with its start and stop order), its Redis pools, its current plan
// snapshot, and the ExecEnv that hands these to every request (RunPlan). `rankd serve`
// has one per shard; `rankd run`, `rankd bench`, the benchmarks and the engine tests
// use one each.
//
//   ShardRuntime rt("run", /*cpu_threads=*/2);
//   rt.Start();
//   rt.OnLoop([&] { rt.OpenRedis(endpoints, opts); });  // optional
//   rt.OnLoop([&] { rt.OpenCache(cache_opts, TrackingMode::kDefault); });  // optional
//   rt.WaitRedisReady(5000);
//   auto result = rt.Run(RunPlan(rt.env(), std::move(request)));
//   rt.Stop();  // or the destructor
//
// Stop closes the Redis pools on the loop before the loop stops (pending commands fail
// with unavailable, so detached work ends), and frees them after it has stopped.
//
// Threads: as LoopRuntime for Start, Stop, OnLoop, Run, destruction. OpenRedis, redis,
// InstallPlans and plans on the loop thread only (checked). WaitRedisReady from any
// thread but the loop's. env() is filled in before the runs that read it (from the
// thread that then posts them) and read on the loop thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/cache_sink.h"
#include "cache/shard_cache.h"
#include "core/loop_runtime.h"
#include "plan/plan.h"
#include "redis/endpoint.h"
#include "redis/invalidation.h"
#include "redis/options.h"
#include "sched/scheduler.h"

namespace rankd {

class RedisPools;

class ShardRuntime : public LoopRuntime {
 public:
  ShardRuntime(std::string name, size_t cpu_threads, size_t cpu_queue_max = 0);
  ~ShardRuntime();  // Stop()

  // LoopRuntime::Stop, then frees the Redis pools.
  void Stop();

  // Opens one pool per endpoint (they connect in the background) and points env() at them.
  RedisPools& OpenRedis(const std::vector<RedisEndpoint>& endpoints,
                        const RedisClientOptions& opts);
  RedisPools* redis() const;  // null before OpenRedis
  // The shard's cache (docs/cache.md): made with `opts` and fed by every endpoint's
  // invalidations (each endpoint tracks with `mode`). REQUIRES: after OpenRedis, once.
  ShardCache& OpenCache(const ShardCache::Options& opts, TrackingMode mode);
  ShardCache* cache() const { return cache_.get(); }  // null before OpenCache
  // Polls until every endpoint has a live connection (true) or `ms` passed (false).
  bool WaitRedisReady(int ms);

  // The plan snapshot new requests start with; a request keeps the one it started with
  // (its PlanPtr), so replacing it frees nothing a request still uses. A new schema is
  // applied to the cache first (ShardCache::SetFamilies, the tracking prefixes).
  void InstallPlans(std::shared_ptr<const PlanSet> plans);
  const std::shared_ptr<const PlanSet>& plans() const;

  ExecEnv& env() { return env_; }

 private:
  std::unique_ptr<RedisPools> redis_;
  // Declared after redis_'s users would be wrong: the pools call the sinks, which call
  // the cache; Stop frees the pools first.
  std::unique_ptr<ShardCache> cache_;
  std::vector<std::unique_ptr<CacheSink>> sinks_;
  std::shared_ptr<const PlanSet> plans_;
  SchemaPtr applied_schema_;  // the schema the cache's families and tracking follow
  ExecEnv env_;

  void ApplySchema();
};

}  // namespace rankd
