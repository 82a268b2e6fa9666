// ServeOptions: the flags of `rankd serve`, parsed and checked. The defaults are the
// member initialisers below; the flags' names, bounds and help are one table in
// serve_options.cc.
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
  std::string host = "0.0.0.0";
  int port = 8080;
  int shards = 0;       // 0: number of CPUs
  int cpu_threads = 1;  // CPU workers per shard
  std::string plans = "plans";
  uint64_t watch_plans_ms = 0;  // poll the plans folder and reload on change; 0: SIGHUP only
  ModelLimits model_limits;     // --max-model-bytes
  // --redis NAME=URL (default redis_default), with passwords read and TLS contexts loaded
  // (server/redis_flags.h).
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
  int64_t deadline_ms = 200;
  int64_t node_timeout_ms = 0;     // 0: none
  size_t max_connections = 10000;  // per shard
  size_t max_inflight = 1024;      // per shard, counted until a request's work stopped
  // Overload (docs/operations.md, "Overload"): the limit adapts to latency under
  // --max-inflight (false: --max-inflight is the limit); "priority" in /rank honoured.
  bool adaptive_admission = true;
  double admission_tolerance = 2.0;  // latency over no-load latency the limit accepts
  bool allow_priority = false;
  size_t cpu_queue_max = 1024;  // CPU jobs waiting for a worker, per shard
  size_t max_body_bytes = 1 << 20;
  size_t max_headers = 100;  // header lines of a request, trailers included (431 past it)
  uint64_t read_timeout_ms = 10000;
  uint64_t idle_timeout_ms = 60000;
  uint64_t header_timeout_ms = 10000;  // accept to first complete head, both listeners
  // SIGTERM/SIGINT: time between failing /readyz and closing the listeners. 0 keeps a
  // bare process quick to stop; behind a balancer set it above the balancer's time to
  // notice (docs/operations.md, "Behind a load balancer").
  uint64_t drain_delay_ms = 0;
  uint64_t drain_timeout_ms = 10000;
  // HTTP limits (docs/operations.md, "HTTP limits").
  size_t max_pipeline_depth = 16;               // answers a client has not taken, per connection
  size_t max_buffered_input_bytes = 64u << 20;  // per shard
  size_t max_unsent_bytes = 256u << 20;         // per shard
  size_t max_queued_scrapes = 64;               // /metrics waiting, per address, per process
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
  // Experiments (docs/experiments.md): honour X-Rankd-Variant (QA), and the shadow runs
  // a shard may have at once.
  bool allow_forced_variants = false;
  size_t shadow_max_inflight = 16;
  // Pages (docs/api.md, "Pages"): the snapshot of a ranking asked with page_size, which
  // its later pages are read from — items kept, lifetime, where — and the key cursors
  // are signed with ("" = a random key per process: cursors then work on one replica).
  size_t page_max_items = 1000;
  uint64_t page_ttl_ms = 600000;
  // Bounds on what clients make rankd write: live snapshots per (plan, user), across
  // shards and replicas, and snapshot bytes a shard writes a second.
  size_t page_max_snapshots = 4;
  uint64_t page_write_bytes_per_s = 8u << 20;
  std::string page_endpoint = "redis_default";
  std::string cursor_key_file;
  // Plans may use the test-only ops (sleep, busy_cpu, fixed_source): tests, benchmarks.
  bool enable_test_ops = false;
  LogLevel log_level = LogLevel::kInfo;
  bool access_log = false;
  bool metrics = true;  // --no-metrics: request-path metrics off (for benchmarks)
};

// What the command line asked for.
struct ServeArgs {
  ServeOptions options;
  bool help = false;
  bool version = false;
};

// Parses argv after the subcommand. Errors are bad_request naming the flag.
Result<ServeArgs> ParseServeArgs(const std::vector<std::string>& args);
// `rankd serve --help`: the routes and every flag with its default (serve_options.cc).
const std::string& ServeUsage();

// What shard `shard`'s listener (on `port`) and /rank path take of the flags.
http::HttpOptions HttpOptionsOf(const ServeOptions& o, int shard, int port);
RankOptions RankOptionsOf(const ServeOptions& o);

}  // namespace rankd
