-- wrk script for ops/bench: bench/wrk_report.lua (WRK_BODY, WRK_USERS, WRK_USER_FORMAT and
-- its JSON line at the end) plus pacing, for open-loop runs at a fixed offered rate.
-- WRK_RATE=R: the whole run's offered rate, requests per second; WRK_PACE_THREADS=T: wrk's
-- -t (1 by default), each thread offering R/T.
-- wrk calls delay() before every request a connection sends (the first included) and
-- starts the latency clock only when the request is written. Here each thread keeps its
-- own schedule, one slot every T*1000/R ms, and delay() gives the asking connection the
-- next free slot: the offered rate is R whatever the answers' latency, as long as a
-- connection is free when a slot comes (connections >= R/T x latency); a connection that
-- comes back after its slot went by sends at once (a backlog of up to 100 ms is caught up,
-- more is dropped). A fixed per-connection gap (connections*1000/R) would instead offer
-- connections / (gap + latency): less to a slower server, the feedback of a closed loop.
-- The clock is CLOCK_MONOTONIC through LuaJIT's ffi (wrk is built on LuaJIT).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")

local rate = tonumber(os.getenv("WRK_RATE") or "")
local pace_threads = tonumber(os.getenv("WRK_PACE_THREADS") or "1")
if not rate or rate <= 0 then
  error("wrk_paced.lua: set WRK_RATE to the offered requests per second")
end

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } wrk_paced_timespec;
int clock_gettime(int clk_id, wrk_paced_timespec *tp);
]]
local ts = ffi.new("wrk_paced_timespec")
local CLOCK_MONOTONIC = 1
local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local gap_ms = pace_threads * 1000 / rate  -- between two slots of this thread
local next_slot = nil

delay = function()
  local now = now_ms()
  if not next_slot or next_slot < now - 100 then next_slot = now end
  local slot = next_slot
  next_slot = slot + gap_ms
  local wait = slot - now
  if wait <= 0 then return 0 end
  return math.floor(wait + 0.5)
end
