-- wrk script for bench/events.sh: every request a POST /events of its own batch of events,
-- and the JSON line of wrk_report.lua at the end (µs).
-- WRK_EVENTS (100) events a request; items drawn Zipf (s = WRK_ZIPF_S, 1.1; 0: uniform) over
-- 1..WRK_ITEMS (100000), item 1 the most popular; users uniform over 1..WRK_USERS (10000);
-- types impression and click 9:1. No ts_ms: each event counts at its request's time.
local events = tonumber(os.getenv("WRK_EVENTS") or "") or 100
local items = tonumber(os.getenv("WRK_ITEMS") or "") or 100000
local users = tonumber(os.getenv("WRK_USERS") or "") or 10000
local s = tonumber(os.getenv("WRK_ZIPF_S") or "") or 1.1

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
-- setup (a tid per thread) and done (the JSON line) from wrk_report.lua; no WRK_BODY here,
-- so it defines no request of its own.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")

-- The Zipf CDF over ranks 1..items, built once per thread (100,000 doubles: ~2 MB).
local cdf
init = function(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
  if s > 0 then
    cdf = {}
    local sum = 0
    for r = 1, items do
      sum = sum + r ^ -s
      cdf[r] = sum
    end
  end
end

-- The first rank whose CDF reaches x: a binary search, log2(items) steps.
local function zipf()
  local x = math.random() * cdf[items]
  local lo, hi = 1, items
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < x then lo = mid + 1 else hi = mid end
  end
  return lo
end

local parts = {}
request = function()
  for i = 1, events do
    local item = cdf and zipf() or math.random(1, items)
    local kind = math.random(10) == 1 and "click" or "impression"
    parts[i] = string.format('{"type":"%s","user_id":%d,"item_id":%d}', kind, math.random(1, users), item)
  end
  return wrk.format(nil, nil, nil, '{"events":[' .. table.concat(parts, ",", 1, events) .. "]}")
end
