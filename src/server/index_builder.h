// IndexBuilder: builds the schema's indexes (schema.json `indexes`, docs/vectors.md) from
// Redis and publishes them in an AnnIndexes, on one thread of its own at the lowest CPU
// priority (nice 19), with its own Redis connections: never on a shard's loop or CPU
// workers. Each index is built (or loaded from --index-dir when the saved one matches
// the schema) as soon as the builder starts, retried every second while that fails
// (Redis down), then rebuilt every refresh_s; a failed or refused build keeps the index
// built before. A build reads with SCAN per master (of each Redis Cluster master, found
// with CLUSTER SLOTS) the keys matching the family's whole key template, and the field
// of each with pipelined HMGET (hash) or MGET (json) of the keys one SCAN step returned.
//
// Threads: Start, Prepare, Stop on the main thread; Ready and NotReadyReason from any
// thread; everything else runs on the builder's own loop thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ann/ann_set.h"
#include "core/coro.h"
#include "core/loop_runtime.h"
#include "plan/schema.h"
#include "redis/endpoint.h"
#include "redis/options.h"

namespace rankd {

class RedisClient;
class RedisPool;

class IndexBuilder {
 public:
  struct Options {
    RedisEndpoint endpoint;  // where the indexed families live: redis_default
    RedisClientOptions redis;
    std::string index_dir;  // "" = builds are not saved
    uint64_t max_bytes = 0;
  };
  IndexBuilder(Options opts, AnnIndexes& out);
  ~IndexBuilder();  // Stop()

  // Starts the thread and the first builds of `schema`'s indexes (in the background).
  void Start(SchemaPtr schema);
  // A reload's schema: builds its indexes that are new or whose declaration changed, then
  // makes it the schema refreshes follow and drops the indexes it no longer declares.
  // Waits for those builds: an error (naming the index) when one failed, and then
  // nothing changed. Without a started builder (no index ever declared) it starts one.
  Status Prepare(SchemaPtr schema);
  // Every index of the current schema has a build.
  bool Ready() const;
  // "" when Ready(); else which indexes have none yet and why ("index 'items' has no
  // build yet: redis_default (127.0.0.1:6379): connection refused").
  std::string NotReadyReason() const;
  void Stop();

 private:
  struct Pending;  // a Prepare waiting for the builder
  Coro<void> Run();
  // Builds (or loads) one index and installs it; false when it failed (counted, logged).
  Coro<bool> BuildOne(const AnnIndexSpec& spec, const Schema& schema, bool may_load);
  Coro<Result<AnnItems>> ReadItems(const AnnIndexSpec& spec, const KeyFamily& family,
                                   AnnIndexStats& stats);
  // The clients to SCAN: the server, or each master of the cluster.
  Coro<Result<std::vector<RedisClient*>>> Masters();
  RedisClient& PoolAt(const RedisEndpoint& at);
  Coro<Result<void>> WaitLive(RedisClient& pool);
  void SetProblem(const std::string& index, std::string why);  // "" when built

  Options opts_;
  AnnIndexes& out_;
  LoopRuntime runtime_{"index-build", 1};
  bool started_ = false;  // main thread
  // Builder loop thread only:
  SchemaPtr schema_;
  std::map<std::string, int64_t> due_ms_;                    // by index name: when it is built next
  std::map<std::string, std::unique_ptr<RedisPool>> pools_;  // by host:port
  // Shared with the main thread:
  std::mutex mu_;
  std::condition_variable cv_;
  Pending* pending_ = nullptr;
  // Set under mu_ (the waits on cv_ see it); atomic because a faiss build in progress
  // reads it without the lock, between chunks, to end early.
  std::atomic<bool> stopping_{false};
  bool finished_ = false;  // Run() has returned
  // Shared with any thread (readiness):
  mutable std::mutex problems_mu_;
  std::vector<std::string> declared_;            // the current schema's index names
  std::map<std::string, std::string> problems_;  // index -> why it has no build
};

}  // namespace rankd
