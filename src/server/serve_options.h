// ServeOptions: what `rankd serve` runs with, its flags parsed and checked. The defaults
// are the member initialisers below (and those of http::HttpOptions and RankOptions it
// holds); the flags' names, bounds and help are one table in cli/serve_flags.cc.
// Plain value type: parsed on the main thread, then copied into each shard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "http/options.h"
#include "model/model.h"
#include "rank/stage.h"
#include "redis/endpoint.h"
#include "redis/invalidation.h"
#include "redis/options.h"
#include "served/sink_config.h"

namespace rankd {

struct ServeOptions {
  // --host, --port and the HTTP limits (docs/operations.md, "HTTP limits"); a shard's
  // listener takes a copy with its id and bound port.
  http::HttpOptions http;
  // What the /rank path reads: --deadline-ms, admission, priorities, experiments, pages,
  // --access-log.
  RankOptions rank;
  int shards = 0;       // 0: number of CPUs
  int cpu_threads = 1;  // CPU workers per shard
  std::string plans = "plans";
  uint64_t watch_plans_ms = 0;  // poll the plans folder and reload on change; 0: SIGHUP only
  ModelLimits model_limits;     // --max-model-bytes
  // --redis NAME=URL (default redis_default), with passwords read and TLS contexts loaded
  // (cli/redis_flags.h).
  std::vector<RedisEndpoint> redis;
  int redis_conns = 2;                 // connections per endpoint per shard
  ReplyLimits redis_reply_limits;      // --redis-max-reply-bytes, --redis-max-reply-depth
  int redis_max_redirects = 5;         // Redis Cluster MOVED/ASK redirects per command
  int redis_max_cluster_nodes = 1000;  // nodes one CLUSTER SLOTS reply may name
  // The cache (docs/cache.md): MiB for the whole process, split evenly across shards;
  // 0 = no cache (nodes with cache: true then read Redis like the others).
  uint64_t cache_mb = 0;
  uint64_t cache_ttl_ms = 60000;                       // no entry lives longer
  TrackingMode cache_tracking = TrackingMode::kBcast;  // docs/cache.md, "Tracking mode"
  int64_t node_timeout_ms = 0;                         // 0: none
  // The schema's indexes (docs/vectors.md, "Indexes"): where each build is saved and
  // loaded from at start ("" = not saved), and the bytes all of them may hold together.
  std::string index_dir;
  uint64_t index_max_bytes = uint64_t{4} << 30;
  size_t cpu_queue_max = 1024;  // CPU jobs waiting for a worker, per shard
  // SIGTERM/SIGINT: time between failing /readyz and closing the listeners. 0 keeps a
  // bare process quick to stop; behind a balancer set it above the balancer's time to
  // notice (docs/operations.md, "Behind a load balancer").
  uint64_t drain_delay_ms = 0;
  uint64_t drain_timeout_ms = 10000;
  size_t max_queued_scrapes = 64;  // /metrics waiting, per address, per process
  // One API token a line (docs/operations.md, "Security"); "" = no token needed.
  std::string auth_token_file;
  std::string metrics_host;  // "" = --host
  int metrics_port = 0;      // 0: /metrics on the main port; else only on this one
  // Connections of the metrics address; at the cap the longest idle is closed for a new one.
  size_t metrics_max_connections = 256;
  // Cross-site use (docs/operations.md, "HTTP budgets and origins"): the browser origins
  // that may call the API (CORS), and the Host names requests may carry (empty: the
  // loopback names on a loopback listener, any name otherwise; "*": any name).
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;
  // The web console (docs/api.md, "The console") and the API routes it calls, on the metrics
  // address too. REQUIRES: metrics_port (ParseServeArgs checks).
  bool console = false;
  // The served log (docs/served-log.md): sinks by name, and the bytes of records a shard
  // holds for all of them before it drops new ones.
  std::vector<SinkConfig> served_log;
  size_t served_log_buffer_bytes = 16u << 20;
  bool allow_forced_logging = false;  // honour a request's "log": true (an operator's tool)
  // POST /events (docs/events.md): how long a shard gathers events before writing them
  // as one batch (0: each request's at once, unaggregated), and the events one request
  // may carry.
  uint64_t events_flush_ms = 2;
  size_t max_events_per_request = 1000;
  // The key page cursors are signed with ("" = a random key per process: cursors then
  // work on one replica).
  std::string cursor_key_file;
  // Plans may use the test-only ops (sleep, busy_cpu, fixed_source): tests, benchmarks.
  bool enable_test_ops = false;
  LogLevel log_level = LogLevel::kInfo;
  bool metrics = true;  // --no-metrics: request-path metrics off (for benchmarks)
};

}  // namespace rankd
