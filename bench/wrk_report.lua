-- wrk script for ops/bench: optional POST body from the environment, and a JSON line
-- with throughput and latency percentiles at the end (µs).
local body = os.getenv("WRK_BODY")
if body and #body > 0 then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end

done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  local non2xx = summary.errors.status
  io.write(string.format(
    '{"rps": %.1f, "requests": %d, "non2xx": %d, "socket_errors": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests / secs, summary.requests, non2xx,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
