-- wrk script for ops/bench: POSTs request bodies read from a file, one JSON body a
-- line (WRK_BODIES_FILE), each request a line drawn uniformly at random, and prints the
-- same JSON line as wrk_report.lua at the end (µs). For requests that cannot be made
-- from a template, e.g. later pages, each with its own cursor (bench/pages_cursor.sh).
local path = os.getenv("WRK_BODIES_FILE")
local bodies = {}
for line in io.lines(path) do
  if #line > 0 then bodies[#bodies + 1] = line end
end
assert(#bodies > 0, "WRK_BODIES_FILE " .. path .. " holds no body")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

init = function(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
end

request = function()
  return wrk.format(nil, nil, nil, bodies[math.random(1, #bodies)])
end

done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  io.write(string.format(
    '{"rps": %.1f, "requests": %d, "non2xx": %d, "socket_errors": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests / secs, summary.requests, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
