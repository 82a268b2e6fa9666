-- wrk script for ops/bench: optional POST body from the environment, and a JSON line
-- with throughput and latency percentiles at the end (µs).
-- WRK_USERS=N: every request gets its own viewer, "$USER" in WRK_BODY replaced by a
-- user id drawn uniformly from 0..N-1 (so that a run does not hit one user's hot keys).
local body = os.getenv("WRK_BODY")
local users = tonumber(os.getenv("WRK_USERS") or "")
-- WRK_USER_FORMAT (string.format, default "%d"): how the drawn id is written ("%06d" for
-- the marketplace's acct-000123).
local user_format = os.getenv("WRK_USER_FORMAT") or "%d"
if body and #body > 0 then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
end

local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)  -- a different random sequence per wrk thread
end

init = function(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
end

if users and body and #body > 0 then
  request = function()
    local b = body:gsub("%$USER", string.format(user_format, math.random(0, users - 1)))
    return wrk.format(nil, nil, nil, b)
  end
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
