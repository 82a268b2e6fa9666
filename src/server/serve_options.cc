#include "server/serve_options.h"

#include <charconv>
#include <thread>

namespace rankd {

namespace {

Result<int64_t> ParseInt(std::string_view flag, std::string_view v, int64_t lo, int64_t hi) {
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    return Fail(Error::BadRequest(std::string(flag) + ": '" + std::string(v) + "' is not an integer"));
  if (out < lo || out > hi)
    return Fail(Error::BadRequest(std::string(flag) + ": " + std::to_string(out) +
                                  " is out of bounds " + std::to_string(lo) + ".." + std::to_string(hi)));
  return out;
}

}  // namespace

const char* ServeUsage() {
  return R"(usage: rankd serve [flags]      (serve is the default command)

Serves POST /rank, GET /healthz, /readyz, /metrics, /plans, /plans/{name}.

  --host ADDR              listen address, IPv4 or IPv6 (0.0.0.0; :: for both)
  --port N                 listen port (8080)
  --shards N               event-loop shards, each with its own listener (number of CPUs)
  --cpu-threads N          CPU worker threads per shard (1)
  --plans DIR              folder of *.plan.json (plans); SIGHUP reloads it
  --watch-plans-ms N       also reload when the folder's files change, checked every
                           N ms; 0 = only on SIGHUP (0)
  --redis NAME=URL         a Redis endpoint, repeatable; URL is
                           redis://[:password@]host:port[/db][?prefix=P]
                           (redis_default=redis://127.0.0.1:6379)
  --redis-conns N          connections per endpoint per shard (2)
  --redis-max-reply-bytes N
                           bytes one Redis reply may take; a reply that announces
                           more fails its connection at once and its requests get
                           502 backend_error (67108864)
  --redis-max-reply-depth N
                           arrays nested in one Redis reply, 1..7 (4)
  --deadline-ms N          default request deadline (200)
  --node-timeout-ms N      default per-node timeout, 0 = none (0)
  --max-connections N      open connections per shard; accepting pauses at it (10000)
  --max-inflight N         requests running per shard, counted until their CPU work
                           has stopped; more get 503 (1024)
  --cpu-queue-max N        CPU jobs waiting for a worker per shard; a job past it
                           fails its request with 503 (an optional node degrades) (1024)
  --max-body-bytes N       request body limit, 413 over it (1048576)
  --read-timeout-ms N      time to read a request head and body, 408 past it (10000)
  --idle-timeout-ms N      keep-alive idle limit (60000)
  --drain-timeout-ms N     SIGTERM/SIGINT: time to finish requests already read (10000)
  --max-pipeline-depth N   answers a connection's client has not read before rankd
                           stops parsing its pipelined requests (16); a connection
                           also buffers at most N x 16 KiB of unparsed input
  --max-buffered-input-bytes N  unparsed input a shard holds; past it, connections
                           whose input waits stop reading (67108864)
  --max-unsent-bytes N     response bytes a shard holds for clients that do not read;
                           past it, the slowest readers are closed (268435456)
  --max-queued-scrapes N   /metrics requests waiting for a serialisation, per address;
                           more get 503 (64)
  --metrics-host ADDR      address of the metrics listener (--host)
  --metrics-port N         serve /metrics only on this port (on shard 0); the main
                           port then answers 404 for it (0 = main port serves it)
  --log-level LEVEL        error | warn | info | debug (info)
  --access-log             one JSON line per request on stdout
  --no-metrics             skip request-path metrics (benchmarking their cost)
  --help, --version
)";
}

Result<ServeArgs> ParseServeArgs(const std::vector<std::string>& args) {
  ServeArgs out;
  ServeOptions& o = out.options;
  std::vector<std::string> redis_flags;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_inline = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto need = [&]() -> Result<std::string> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return Fail(Error::BadRequest(flag + ": needs a value"));
      return args[++i];
    };
    auto num = [&](int64_t lo, int64_t hi) -> Result<int64_t> {
      auto v = need();
      if (!v) return Fail(v.error());
      return ParseInt(flag, *v, lo, hi);
    };
#define RANKD_NUM(field, lo, hi)                 \
  {                                              \
    auto v = num(lo, hi);                        \
    if (!v) return Fail(v.error());              \
    o.field = static_cast<decltype(o.field)>(*v); \
  }
    if (flag == "--help" || flag == "-h") out.help = true;
    else if (flag == "--version") out.version = true;
    else if (flag == "--host") {
      auto v = need();
      if (!v) return Fail(v.error());
      o.host = *v;
    } else if (flag == "--port") RANKD_NUM(port, 0, 65535)
    else if (flag == "--shards") RANKD_NUM(shards, 1, 256)
    else if (flag == "--cpu-threads") RANKD_NUM(cpu_threads, 1, 256)
    else if (flag == "--plans") {
      auto v = need();
      if (!v) return Fail(v.error());
      o.plans = *v;
    } else if (flag == "--redis") {
      auto v = need();
      if (!v) return Fail(v.error());
      redis_flags.push_back(*v);
    } else if (flag == "--redis-conns") RANKD_NUM(redis_conns, 1, 64)
    else if (flag == "--redis-max-reply-bytes")
      RANKD_NUM(redis_reply_limits.max_bytes, 16, int64_t{1} << 40)
    else if (flag == "--redis-max-reply-depth") RANKD_NUM(redis_reply_limits.max_depth, 1, 7)
    else if (flag == "--deadline-ms") RANKD_NUM(deadline_ms, 1, 60000)
    else if (flag == "--node-timeout-ms") RANKD_NUM(node_timeout_ms, 0, 60000)
    else if (flag == "--max-connections") RANKD_NUM(max_connections, 1, 1000000)
    else if (flag == "--max-inflight") RANKD_NUM(max_inflight, 1, 1000000)
    else if (flag == "--cpu-queue-max") RANKD_NUM(cpu_queue_max, 1, 1000000)
    else if (flag == "--max-body-bytes") RANKD_NUM(max_body_bytes, 1, int64_t{1} << 30)
    else if (flag == "--read-timeout-ms") RANKD_NUM(read_timeout_ms, 1, 3600000)
    else if (flag == "--idle-timeout-ms") RANKD_NUM(idle_timeout_ms, 1, 86400000)
    else if (flag == "--drain-timeout-ms") RANKD_NUM(drain_timeout_ms, 0, 3600000)
    else if (flag == "--watch-plans-ms") RANKD_NUM(watch_plans_ms, 0, 3600000)
    else if (flag == "--max-pipeline-depth") RANKD_NUM(max_pipeline_depth, 1, 1024)
    else if (flag == "--max-buffered-input-bytes") RANKD_NUM(max_buffered_input_bytes, 65536, int64_t{1} << 40)
    else if (flag == "--max-unsent-bytes") RANKD_NUM(max_unsent_bytes, 65536, int64_t{1} << 40)
    else if (flag == "--max-queued-scrapes") RANKD_NUM(max_queued_scrapes, 1, 100000)
    else if (flag == "--metrics-port") RANKD_NUM(metrics_port, 1, 65535)
    else if (flag == "--metrics-host") {
      auto v = need();
      if (!v) return Fail(v.error());
      o.metrics_host = *v;
    }
    else if (flag == "--log-level") {
      auto v = need();
      if (!v) return Fail(v.error());
      if (!ParseLogLevel(*v, &o.log_level))
        return Fail(Error::BadRequest("--log-level: '" + *v + "' is not one of error, warn, info, debug"));
    } else if (flag == "--access-log") o.access_log = true;
    else if (flag == "--no-metrics") o.metrics = false;
    else return Fail(Error::BadRequest("unknown flag '" + args[i] + "' (see rankd serve --help)"));
#undef RANKD_NUM
  }
  if (o.metrics_port != 0 && o.metrics_port == o.port &&
      (o.metrics_host.empty() || o.metrics_host == o.host))
    return Fail(Error::BadRequest("--metrics-port: " + std::to_string(o.metrics_port) +
                                  " is the main --port; pick another (or leave it unset)"));
  if (o.metrics_host.empty()) o.metrics_host = o.host;
  if (o.shards == 0) o.shards = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto eps = ParseRedisFlags(redis_flags);
  if (!eps) return Fail(Error::BadRequest("--redis: " + eps.error().message));
  o.redis = std::move(*eps);
  return out;
}

}  // namespace rankd
