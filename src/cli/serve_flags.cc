#include "cli/serve_flags.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <thread>

#include "api/routes.h"
#include "cli/cli_flags.h"
#include "cli/redis_flags.h"
#include "core/parse_f64.h"
#include "http/origin_policy.h"

namespace rankd {

namespace {

constexpr std::array<std::string_view, 4> kLogLevelNames = {"error", "warn", "info", "debug"};

// Every flag of `rankd serve`, bound to `a`: the parser reads it, and --help writes its
// lines from a table bound to default ServeArgs, so the defaults shown are the ones used.
// Adding a flag: a field in ServeOptions (or the HttpOptions or RankOptions it holds)
// and a row here.
std::vector<Flag> ServeFlags(ServeArgs& a, RedisFlags& redis_flags,
                             std::vector<std::string>& sink_flags) {
  ServeOptions& o = a.options;
  constexpr int64_t kMax = int64_t{1} << 40;
  std::vector<Flag> flags = {
      TextFlag("--host", "ADDR", "listen address, IPv4 or IPv6 ({}; :: for both)", o.http.host),
      IntFlag("--port", "N", "listen port ({})", o.http.port, 0, 65535),
      IntFlag("--shards", "N", "event-loop shards, each with its own listener (number of CPUs)",
              o.shards, 1, 256),
      IntFlag("--cpu-threads", "N", "CPU worker threads per shard ({})", o.cpu_threads, 1, 256),
      TextFlag("--plans", "DIR", "folder of *.plan.json ({}); SIGHUP reloads it", o.plans),
      IntFlag("--watch-plans-ms", "N",
              "also reload when the folder's files change, checked every\n"
              "N ms; 0 = only on SIGHUP ({})",
              o.watch_plans_ms, 0, 3600000),
      IntFlag("--max-model-bytes", "N",
              "size limit of a model file (NAME.model.json); a larger\n"
              "one fails the plans folder's load ({})",
              o.model_limits.max_bytes, 1, kMax),
      SwitchFlag("--enable-test-ops",
                 "load plans that use the test-only ops sleep, busy_cpu and\n"
                 "fixed_source (tests, benchmarks); without it such a plan fails\n"
                 "the load",
                 o.enable_test_ops),
      IntFlag("--redis-conns", "N", "connections per endpoint per shard ({})", o.redis_conns, 1,
              64),
      IntFlag("--redis-max-reply-bytes", "N",
              "bytes one Redis reply may take; a reply that announces\n"
              "more fails its connection at once and its requests get\n"
              "502 backend_error ({})",
              o.redis_reply_limits.max_bytes, 16, kMax),
      IntFlag("--redis-max-reply-depth", "N", "arrays nested in one Redis reply, 1..7 ({})",
              o.redis_reply_limits.max_depth, 1, 7),
      IntFlag("--redis-max-redirects", "N",
              "Redis Cluster MOVED/ASK redirects followed per command ({})", o.redis_max_redirects,
              0, 100),
      IntFlag("--redis-max-cluster-nodes", "N",
              "nodes one CLUSTER SLOTS reply may name; a larger reply is\n"
              "refused (logged) and the slot map kept ({})",
              o.redis_max_cluster_nodes, 1, 100000),
      IntFlag("--cache-mb", "N",
              "MiB of decoded Redis values cached for the IO nodes with\n"
              "cache: true, for the whole process, split across shards;\n"
              "0 = no cache ({})",
              o.cache_mb, 0, 1 << 20),
      IntFlag("--cache-ttl-ms", "N", "no cache entry lives longer than N ms ({})", o.cache_ttl_ms,
              1, 86400000),
      Flag{"--cache-tracking",
           {},
           "MODE",
           "bcast | default: how Redis tells the cache what changed:\n"
           "every write under the cached key families, or only\n"
           "writes to keys this shard read ({})",
           [&o](std::string_view v) -> Status {
             if (v == "default")
               o.cache_tracking = TrackingMode::kDefault;
             else if (v == "bcast")
               o.cache_tracking = TrackingMode::kBcast;
             else
               return Fail(Error::BadRequest("--cache-tracking: '" + std::string(v) +
                                             "' is not one of default, bcast"));
             return {};
           },
           [&o] {
             return std::string(o.cache_tracking == TrackingMode::kBcast ? "bcast" : "default");
           }},
      IntFlag("--deadline-ms", "N", "default request deadline ({})", o.rank.deadline_ms, 1, 60000),
      IntFlag("--node-timeout-ms", "N", "default per-node timeout, 0 = none ({})",
              o.node_timeout_ms, 0, 60000),
      IntFlag("--max-connections", "N", "open connections per shard; accepting pauses at it ({})",
              o.http.max_connections, 1, 1000000),
      IntFlag("--max-inflight", "N",
              "requests running per shard, counted until their CPU work\n"
              "has stopped: the ceiling of the adaptive limit; more get\n"
              "503 ({})",
              o.rank.admission.max_inflight, 1, 1000000),
      Flag{"--admission",
           {},
           "MODE",
           "adaptive: a concurrency limit per shard that follows\n"
           "latency (docs/operations.md, \"Overload\"); fixed: the\n"
           "limit is --max-inflight ({})",
           [&o](std::string_view v) -> Status {
             if (v != "adaptive" && v != "fixed")
               return Fail(Error::BadRequest("--admission: '" + std::string(v) +
                                             "' is not one of adaptive, fixed"));
             o.rank.admission.adaptive = v == "adaptive";
             return {};
           },
           [&o] { return std::string(o.rank.admission.adaptive ? "adaptive" : "fixed"); }},
      Flag{"--admission-tolerance",
           {},
           "X",
           "how many times its plan's no-load latency a request may\n"
           "take before the adaptive limit shrinks, 1.1..100 ({})",
           [&o](std::string_view v) -> Status {
             std::optional<double> x = ParseStrictF64(v);
             if (!x || !(*x >= 1.1 && *x <= 100))
               return Fail(Error::BadRequest("--admission-tolerance: '" + std::string(v) +
                                             "' is not a number from 1.1 to 100"));
             o.rank.admission.tolerance = *x;
             return {};
           },
           [&o] {
             std::string s = std::to_string(o.rank.admission.tolerance);
             s.erase(s.find_last_not_of('0') + 1);
             if (s.back() == '.') s.pop_back();
             return s;
           }},
      SwitchFlag("--allow-priority",
                 "honour /rank's \"priority\" (critical | default | sheddable);\n"
                 "without it the field is ignored and counted",
                 o.rank.allow_priority),
      IntFlag("--cpu-queue-max", "N",
              "CPU jobs waiting for a worker per shard; a job past it\n"
              "fails its request with 503 (an optional node degrades) ({})",
              o.cpu_queue_max, 1, 1000000),
      IntFlag("--max-body-bytes", "N", "request body limit, 413 over it ({})",
              o.http.max_body_bytes, 1, int64_t{1} << 30),
      IntFlag("--max-headers", "N",
              "header lines of a request, trailers included; 431 past\n"
              "it ({})",
              o.http.max_headers, 1, 10000),
      IntFlag("--read-timeout-ms", "N", "time to read a request head and body, 408 past it ({})",
              o.http.read_timeout_ms, 1, 3600000),
      IntFlag("--header-timeout-ms", "N",
              "from accept to the first request's complete head; past it\n"
              "the connection is closed without an answer ({})",
              o.http.header_timeout_ms, 1, 3600000),
      IntFlag("--idle-timeout-ms", "N", "keep-alive idle limit ({})", o.http.idle_timeout_ms, 1,
              86400000),
      IntFlag("--drain-delay-ms", "N",
              "SIGTERM/SIGINT: /readyz fails at once, but rankd serves on\n"
              "(new connections too) for N ms before it stops accepting,\n"
              "so balancers stop sending first; a second signal cuts the\n"
              "delay short ({})",
              o.drain_delay_ms, 0, 3600000),
      IntFlag("--drain-timeout-ms", "N",
              "SIGTERM/SIGINT: time to finish requests already read ({})", o.drain_timeout_ms, 0,
              3600000),
      IntFlag("--max-pipeline-depth", "N",
              "answers a connection's client has not read before rankd\n"
              "stops parsing its pipelined requests ({}); a connection\n"
              "also buffers at most N x 16 KiB of unparsed input",
              o.http.max_pipeline_depth, 1, 1024),
      IntFlag("--max-buffered-input-bytes", "N",
              "unparsed input and unfinished request bodies a shard\n"
              "holds; past it, connections whose input waits or whose\n"
              "body is under way stop reading ({})",
              o.http.max_buffered_input_bytes, 65536, kMax),
      IntFlag("--max-unsent-bytes", "N",
              "response bytes a shard holds for clients that do not read;\n"
              "past it, the slowest readers are closed ({})",
              o.http.max_unsent_bytes, 65536, kMax),
      IntFlag("--max-queued-scrapes", "N",
              "/metrics (and /console/api/metrics) requests waiting for a\n"
              "serialisation, per address; more get 503 ({})",
              o.max_queued_scrapes, 1, 100000),
      TextFlag("--index-dir", "DIR",
               "save each built index (schema.json indexes) here and load\n"
               "it at start when it matches the schema (none)",
               o.index_dir),
      IntFlag("--index-max-bytes", "N",
              "bytes all indexes may hold together; a build over it\n"
              "fails and the old index stays ({})",
              o.index_max_bytes, 1 << 20, int64_t{1} << 40),
      TextFlag("--auth-token-file", "FILE",
               "API tokens, one a line (# comments); every route but\n"
               "/healthz and /readyz then needs 'Authorization: Bearer\n"
               "<token>' (401 without); SIGHUP re-reads it (none)",
               o.auth_token_file),
      TextFlag("--metrics-host", "ADDR", "address of the metrics listener (--host)",
               o.metrics_host),
      IntFlag("--metrics-port", "N",
              "serve /metrics only on this port (on shard 0), with\n"
              "/healthz and /readyz (and --console), never asking a token\n"
              "for them; the main port then answers 404 for /metrics\n"
              "({} = main port serves it)",
              o.metrics_port, 1, 65535),
      IntFlag("--metrics-max-connections", "N",
              "connections of the metrics address; at the cap the one idle\n"
              "the longest is closed for the new one ({})",
              o.metrics_max_connections, 1, 100000),
      RepeatedFlag("--allowed-origins", "ORIGIN",
                   "a browser origin (scheme://host[:port]) that may call the\n"
                   "API, with CORS; repeatable. A request whose Origin is\n"
                   "neither listed nor its own Host's gets 403",
                   o.allowed_origins),
      RepeatedFlag("--allowed-hosts", "HOST",
                   "a Host name requests may carry (421 otherwise; the probes\n"
                   "and /metrics excepted), repeatable; * = any. Default: the\n"
                   "loopback names on a loopback address, else any",
                   o.allowed_hosts),
      SwitchFlag("--console",
                 "serve the web console on the metrics address, at\n"
                 "/console/, with the API routes it calls (/rank, /plans,\n"
                 "/schema, /experiments: same limits, same token); needs\n"
                 "--metrics-port (off)",
                 o.console),
      Flag{"--log-level",
           {},
           "LEVEL",
           "error | warn | info | debug ({})",
           [&o](std::string_view v) -> Status {
             if (!ParseLogLevel(v, &o.log_level))
               return Fail(Error::BadRequest("--log-level: '" + std::string(v) +
                                             "' is not one of error, warn, info, debug"));
             return {};
           },
           [&o] { return std::string(kLogLevelNames[static_cast<size_t>(o.log_level)]); }},
      SwitchFlag("--access-log", "one JSON line per request on stdout", o.rank.access_log),
      RepeatedFlag("--served-log", "NAME=URL",
                   "a served-log sink, repeatable (docs/served-log.md):\n"
                   "redis-stream://ENDPOINT?stream=S&maxlen=N or\n"
                   "file:///path/served.jsonl?max_mb=N&keep=K",
                   sink_flags),
      SwitchFlag("--allow-forced-logging",
                 "honour a request's \"log\": true (debugging); without it the\n"
                 "field is ignored and counted",
                 o.allow_forced_logging),
      SwitchFlag("--allow-forced-variants",
                 "honour X-Rankd-Variant: EXPERIMENT=VARIANT (QA); without it the\n"
                 "header is ignored and counted",
                 o.rank.allow_forced_variants),
      IntFlag("--shadow-max-inflight", "N",
              "shadow plan runs a shard may have at once; more are shed ({})",
              o.rank.shadow_max_inflight, 0, 100000),
      IntFlag("--served-log-buffer-bytes", "N",
              "served-log records a shard holds for its sinks; past it,\n"
              "new records are dropped and counted ({})",
              o.served_log_buffer_bytes, 65536, kMax),
      IntFlag("--events-flush-ms", "N",
              "POST /events: how long a shard gathers events before one\n"
              "aggregated write to Redis; 0 = each request's at once,\n"
              "one increment per event ({})",
              o.events_flush_ms, 0, 1000),
      IntFlag("--max-events-per-request", "N", "events one POST /events may carry ({})",
              o.max_events_per_request, 1, 100000),
      IntFlag("--page-max-items", "N",
              "items of a ranking asked with page_size kept for its later\n"
              "pages; the chain of pages ends after them ({})",
              o.rank.page_max_items, 1, 100000),
      IntFlag("--page-ttl-ms", "N",
              "how long a ranking's later pages can be asked for; past it\n"
              "a cursor gets 410 cursor_expired ({})",
              o.rank.page_ttl_ms, 1, 86400000),
      IntFlag("--page-max-snapshots", "N",
              "live snapshots of one plan and user_id, across shards and\n"
              "replicas; a new chain ends the oldest ({})",
              o.rank.page_max_snapshots, 1, 1000),
      IntFlag("--page-write-bytes-per-s", "N",
              "snapshot bytes a shard writes a second; past it a first\n"
              "page goes without cursor, counted ({})",
              o.rank.page_write_bytes_per_s, 1, int64_t{1} << 40),
      TextFlag("--page-endpoint", "NAME",
               "the --redis endpoint that keeps the rankings of later pages\n"
               "({})",
               o.rank.page_endpoint),
      TextFlag("--cursor-key-file", "FILE",
               "key that signs page cursors (its bytes, at least 32);\n"
               "replicas behind one balancer need the same file; without\n"
               "it a random key per process: cursors work on one replica\n"
               "only (none)",
               o.cursor_key_file),
      Flag{"--no-metrics",
           {},
           {},
           "skip request-path metrics (benchmarking their cost)",
           [&o](std::string_view) -> Status {
             o.metrics = false;
             return {};
           },
           [] { return std::string(); }},
      SwitchFlag("--help", {}, a.help, "-h"),
      SwitchFlag("--version", {}, a.version),
  };
  // The Redis flags every command shares, after --watch-plans-ms.
  std::vector<Flag> redis = RedisFlagRows(redis_flags);
  auto at = std::find_if(flags.begin(), flags.end(),
                         [](const Flag& f) { return f.name == "--watch-plans-ms"; });
  flags.insert(at + 1, std::make_move_iterator(redis.begin()),
               std::make_move_iterator(redis.end()));
  return flags;
}

// "POST /rank, GET /healthz, /readyz, ...": each route with its first method, the method
// written only when it changes.
std::string RouteSummary() {
  std::string out;
  std::string_view last_method;
  for (const auto& r : kRoutes) {
    std::string_view method = r.allow.substr(0, r.allow.find(','));
    if (!out.empty()) out += ", ";
    if (method != last_method) out += std::string(method) + " ";
    out += r.pattern;
    last_method = method;
  }
  return out;
}

}  // namespace

const std::string& ServeUsage() {
  static const std::string text = [] {
    ServeArgs defaults;
    RedisFlags unused;
    std::vector<std::string> unused_sinks;
    return "usage: rankd serve [flags]      (serve is the default command)\n\nServes " +
           RouteSummary() + ".\n\n" + FlagUsage(ServeFlags(defaults, unused, unused_sinks));
  }();
  return text;
}

Result<ServeArgs> ParseServeArgs(const std::vector<std::string>& args) {
  ServeArgs out;
  ServeOptions& o = out.options;
  RedisFlags redis_flags;
  std::vector<std::string> sink_flags;
  if (auto st = ParseFlags(args, ServeFlags(out, redis_flags, sink_flags)); !st) {
    if (st.error().code == ErrorCode::kNotFound)
      return Fail(
          Error::BadRequest("unknown flag '" + st.error().message + "' (see rankd serve --help)"));
    return Fail(st.error());
  }
  // Help and version need nothing resolved (no password file read, no TLS file loaded).
  if (out.help || out.version) return out;
  if (o.metrics_port != 0 && o.metrics_port == o.http.port &&
      (o.metrics_host.empty() || o.metrics_host == o.http.host))
    return Fail(Error::BadRequest("--metrics-port: " + std::to_string(o.metrics_port) +
                                  " is the main --port; pick another (or leave it unset)"));
  if (o.console && o.metrics_port == 0)
    return Fail(Error::BadRequest(
        "--console needs --metrics-port: the console is served on the metrics address only"));
  if (o.metrics_host.empty()) o.metrics_host = o.http.host;
  // Unparsed input per connection: a full head for each request it may run ahead.
  o.http.max_pending_input = o.http.max_pipeline_depth * o.http.max_head_bytes;
  AdmissionOptions& adm = o.rank.admission;
  adm.min_limit = std::min(adm.min_limit, adm.max_inflight);
  adm.initial_limit = std::min(adm.initial_limit, adm.max_inflight);
  // Checked here so that a bad entry is a usage error; each shard builds its own.
  if (auto p = http::OriginPolicy::Make(o.allowed_origins, o.allowed_hosts, false); !p)
    return Fail(p.error());
  if (o.shards == 0) o.shards = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto eps = ResolveRedisFlags(redis_flags);
  if (!eps) return Fail(eps.error());
  o.redis = std::move(*eps);
  auto sinks = ParseSinkFlags(sink_flags, o.redis);
  if (!sinks) return Fail(sinks.error());
  o.served_log = std::move(*sinks);
  if (std::none_of(o.redis.begin(), o.redis.end(),
                   [&](const RedisEndpoint& e) { return e.name == o.rank.page_endpoint; }))
    return Fail(Error::BadRequest("--page-endpoint: no --redis endpoint is named '" +
                                  o.rank.page_endpoint + "'"));
  return out;
}

}  // namespace rankd
