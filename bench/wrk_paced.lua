-- wrk script for ops/bench: an open-loop client. WRK_BODY, WRK_USERS and WRK_USER_FORMAT
-- as in bench/wrk_report.lua, plus pacing at a fixed offered rate, latency from each
-- request's scheduled send time, and a JSON line at the end (first key "rps", as
-- wrk_report.lua's, so that `grep '^{"rps"'` finds it).
--
-- WRK_RATE=R: the whole run's offered rate, requests per second; WRK_PACE_THREADS=T: wrk's
-- -t (1 by default), each thread offering R/T.
--
-- Pacing. wrk calls delay() before every request a connection sends (the first included).
-- Each thread keeps its own schedule, one slot every T*1000/R ms, and delay() gives the
-- asking connection the next free slot (its wait rounded up to wrk's millisecond timer):
-- the offered rate is R whatever the answers' latency, as long as a connection is free
-- when a slot comes (connections >= R/T x latency). A connection that comes back after its
-- slot went by sends at once (a backlog of up to WRK_MAX_BACKLOG_MS, 100 by default, is
-- caught up); an older backlog is dropped and every dropped slot counted ("dropped", with
-- the slots that were due and still unsent when wrk stopped): the client offered them and
-- could not send them, so they count as offered and not answered. A fixed per-connection
-- gap (connections*1000/R) would instead offer connections / (gap + latency): less to a
-- slower server, the feedback of a closed loop.
--
-- Coordinated omission. wrk starts its latency clock when a request is written, so a
-- request that waited for a busy connection, or was sent late because the connection came
-- back late, hides that wait: the server's queueing disappears from the percentiles exactly
-- when it matters. Here the k-th request a thread sends is the k-th slot of its schedule
-- (request() takes the oldest slot delay() handed out and not yet sent), the slot's time
-- travels in the request's X-Request-Id ("ol<thread>-<n>-<µs since the thread's first
-- slot>": printable ASCII, which rankd echoes on every answer) and response() measures the
-- latency from that scheduled time (from the write when wrk's millisecond timer fired up to
-- 1 ms early), on CLOCK_MONOTONIC (LuaJIT's ffi: wrk is built on LuaJIT). The
-- percentiles (p50_us ... max_us) are these, from a log histogram per thread (1.6% wide
-- buckets, the bucket's upper bound reported), merged in done() through thread:get. wrk's
-- own latency statistics (its stdout table) still measure from the write and are not used.
--
-- Window and verdicts. WRK_WINDOW="W:M": only slots scheduled from W to W+M seconds after
-- the thread's first slot count (warm-up before, a tail after so that every counted request
-- had time to be answered: run wrk for more than W+M s); a counted slot that was sent and
-- never answered counts as "unanswered". Without it every slot of the run counts.
-- WRK_DEADLINE_MS=D: an answer is "good" when it is 2xx and came within D ms of its slot
-- (a 2xx past the deadline is not good); without it every 2xx is good.
-- WRK_TIMELINE_MS=B: also answers and good answers per B ms of CLOCK_MONOTONIC by the time
-- they came (the whole run, not only the window), and offered slots by their time, as
-- "timeline": {"bucket_ms": B, "t0_ms": first bucket's start, "answered": [...], "good":
-- [...], "offered": [...]} (CLOCK_MONOTONIC, the clock of Python's time.monotonic()).
--
-- The line: rps (answers per second of the run, as wrk_report.lua's), requests, non2xx,
-- socket_errors, p50_us..max_us (from the scheduled time, counted answers); window_s,
-- offered, sent, dropped, answered, good, unanswered, unmatched (answers without our
-- X-Request-Id: no latency, never good), resent (wrk's resends after a lost request, off the
-- schedule and not counted) and per second offered_rps, sent_rps, answered_rps,
-- goodput_rps; status (answers by status code); conns (WRK_CONNS: pass wrk's -c; else
-- null), max_in_flight (the most requests one thread had out at once, summed over threads:
-- the connections the load needed), conns_exhausted (a thread had every connection busy
-- at once: slots then wait or drop), send_lag_p99_us and send_lag_max_us (from slot to
-- the request's write: the client's own lateness, busy connections or a busy wrk thread).
-- Cost (wrk -t1): against nginx at 4,000 req/s with -c1000, ~0.25 of a core with this
-- script and with the plain pacing alike (wrk's event loop and TCP; every idle connection's
-- delay timer is an entry of a list wrk scans each turn: -c2000 ~0.31); against rankd at
-- 4,000 req/s 0.15 of a core, ~9 µs a request more than the plain pacing (the response
-- callback's header table and body string); at 8,000 req/s with -c2000, 0.23.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "wrk_report.lua")  -- wrk.method/body/headers from WRK_BODY; setup's tid

local rate = tonumber(os.getenv("WRK_RATE") or "")
local pace_threads = tonumber(os.getenv("WRK_PACE_THREADS") or "1")
if not rate or rate <= 0 then
  error("wrk_paced.lua: set WRK_RATE to the offered requests per second")
end
local max_backlog_ms = tonumber(os.getenv("WRK_MAX_BACKLOG_MS") or "100")
local deadline_ms = tonumber(os.getenv("WRK_DEADLINE_MS") or "")
local timeline_ms = tonumber(os.getenv("WRK_TIMELINE_MS") or "")
local window_start_ms, window_end_ms = 0, math.huge
do
  local w = os.getenv("WRK_WINDOW")
  if w and #w > 0 then
    local a, b = w:match("^([%d.]+):([%d.]+)$")
    if not a then error("wrk_paced.lua: WRK_WINDOW is WARMUP_S:MEASURE_S") end
    window_start_ms = tonumber(a) * 1000
    window_end_ms = window_start_ms + tonumber(b) * 1000
  end
end
local wrk_conns = tonumber(os.getenv("WRK_CONNS") or "")  -- wrk's -c, for the report
local users = tonumber(os.getenv("WRK_USERS") or "")
local user_format = os.getenv("WRK_USER_FORMAT") or "%d"

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

-- Per thread (each wrk thread runs its own copy of this file). Globals, so that done()
-- can read them with thread:get.
local gap_ms = pace_threads * 1000 / rate  -- between two slots of this thread
local t0 = nil          -- the thread's first slot, ms
local next_slot = nil   -- ms
q, q_head, q_tail = {}, 1, 0  -- slots handed out by delay(), not yet sent (ms)
last_now = 0            -- the thread's clock at its last callback: slots after it were not due
local in_flight = 0      -- requests on connections, not answered yet
c_offered, c_sent, c_dropped, c_answered, c_good, c_unmatched, c_resent = 0, 0, 0, 0, 0, 0, 0
seq = 0                 -- requests sent on the schedule
max_in_flight = 0
hist = {}               -- log bucket -> answers (counted ones)
lag_hist = {}           -- log bucket -> sends (counted ones)
status = {}             -- "503" -> answers (counted ones)
outstanding = {}        -- slot µs (counted, sent, not yet answered) -> true
tl_answered, tl_good, tl_offered = {}, {}, {}

local log, floor, ceil = math.log, math.floor, math.ceil
local HIST_SCALE = 64   -- buckets per e-fold: 1.6% wide
local function bucket(us)
  if us < 1 then us = 1 end
  return floor(log(us) * HIST_SCALE)
end

local function in_window(slot)
  local rel = slot - t0
  return rel >= window_start_ms and rel < window_end_ms
end

local function offer(slot)  -- a slot of the schedule that was due: sent or dropped
  if in_window(slot) then c_offered = c_offered + 1 end
  if timeline_ms then
    local b = floor(slot / timeline_ms)
    tl_offered[b] = (tl_offered[b] or 0) + 1
  end
end

local function take_slot(now)  -- the next slot of the schedule, dropping a stale backlog
  if not next_slot then
    next_slot = now
    t0 = now
    t0_slot = now
  elseif next_slot < now - max_backlog_ms then
    while next_slot < now do  -- offered, never sent
      offer(next_slot)
      if in_window(next_slot) then c_dropped = c_dropped + 1 end
      next_slot = next_slot + gap_ms
    end
  end
  local slot = next_slot
  next_slot = slot + gap_ms
  return slot
end

delay = function()
  local now = now_ms()
  last_now = now
  local slot = take_slot(now)
  q_tail = q_tail + 1
  q[q_tail] = slot
  local wait = slot - now
  if wait <= 0 then return 0 end
  return ceil(wait)
end

local prefix, body_template, static_body
init = (function(report_init)
  return function(args)
    report_init(args)
    local lines = {string.format("%s %s HTTP/1.1", wrk.method, wrk.path)}
    local has_host = false
    for name, value in pairs(wrk.headers) do
      if name:lower() == "host" then has_host = true end
      if name:lower() ~= "content-length" then lines[#lines + 1] = name .. ": " .. value end
    end
    if not has_host then lines[#lines + 1] = "Host: " .. wrk.host end
    prefix = table.concat(lines, "\r\n") .. "\r\n"
    body_template = wrk.body
    if body_template and users then
      static_body = nil
    else
      static_body = body_template or ""
    end
  end
end)(init)

local function make_body()
  if static_body then return static_body end
  return (body_template:gsub("%$USER", string.format(user_format, math.random(0, users - 1))))
end

request = function()
  local now = now_ms()
  if not next_slot then  -- wrk's check of the script's request, before the run: not sent
    local b = make_body()
    return prefix .. "X-Request-Id: ol0-0-0\r\nContent-Length: " .. #b .. "\r\n\r\n" .. b
  end
  last_now = now
  if q_head > q_tail then
    -- wrk resends without asking delay() after it reconnected mid-request (a write error,
    -- or the server closed the connection before answering): the lost request stays
    -- unanswered, the resend is off the schedule and not counted ("resent").
    c_resent = c_resent + 1  -- in_flight unchanged: one lost, one sent
    local b = make_body()
    return prefix .. "X-Request-Id: ol" .. (tid or 0) .. "-r\r\nContent-Length: " .. #b ..
        "\r\n\r\n" .. b
  end
  local slot = q[q_head]
  q[q_head] = nil
  q_head = q_head + 1
  offer(slot)
  in_flight = in_flight + 1
  if in_flight > max_in_flight then max_in_flight = in_flight end
  seq = seq + 1
  -- The latency's start: the slot, or the write if wrk's millisecond timer fired early.
  local stamp_us = floor(((now < slot and now or slot) - t0) * 1000 + 0.5)
  if in_window(slot) then
    c_sent = c_sent + 1
    outstanding[seq] = true
    local lb = bucket((now - slot) * 1000)
    lag_hist[lb] = (lag_hist[lb] or 0) + 1
  end
  local b = make_body()
  return prefix .. "X-Request-Id: ol" .. (tid or 0) .. "-" .. seq .. "-" .. stamp_us ..
      "\r\nContent-Length: " .. #b .. "\r\n\r\n" .. b
end

response = function(code, headers, body)
  local now = now_ms()
  last_now = now
  in_flight = in_flight - 1
  local id = headers["X-Request-Id"] or headers["x-request-id"] or ""
  local n, stamp_us = id:match("^ol%d+%-(%d+)%-(%d+)$")
  local lat_ms = stamp_us and now - (t0 + tonumber(stamp_us) / 1000)
  local ok = code >= 200 and code < 300
  local good = ok and lat_ms and (not deadline_ms or lat_ms <= deadline_ms)
  if timeline_ms then
    local tb = floor(now / timeline_ms)
    tl_answered[tb] = (tl_answered[tb] or 0) + 1
    if good then tl_good[tb] = (tl_good[tb] or 0) + 1 end
  end
  if not n then
    if not id:match("^ol%d+%-r$") then c_unmatched = c_unmatched + 1 end
    return
  end
  n = tonumber(n)
  if not outstanding[n] then return end  -- outside the window
  outstanding[n] = nil
  c_answered = c_answered + 1
  local b = bucket(lat_ms * 1000)
  hist[b] = (hist[b] or 0) + 1
  local st = tostring(code)
  status[st] = (status[st] or 0) + 1
  if good then c_good = c_good + 1 end
end

local threads = {}
setup = (function(report_setup)
  return function(thread)
    report_setup(thread)
    threads[#threads + 1] = thread
  end
end)(setup)

local function merge(into, from)
  for k, v in pairs(from) do into[k] = (into[k] or 0) + v end
end

local function percentile(h, p)  -- µs: the upper bound of the bucket holding the p-th
  local keys, total = {}, 0
  for k, v in pairs(h) do
    keys[#keys + 1] = k
    total = total + v
  end
  if total == 0 then return 0 end
  table.sort(keys)
  local want, seen = math.max(1, ceil(total * p / 100)), 0
  for _, k in ipairs(keys) do
    seen = seen + h[k]
    if seen >= want then return math.exp((k + 1) / HIST_SCALE) end
  end
  return math.exp((keys[#keys] + 1) / HIST_SCALE)
end

local function json_obj(t)
  local parts = {}
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = string.format('"%s": %d', k, t[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function json_list(t, lo, hi)
  local parts = {}
  for i = lo, hi do parts[#parts + 1] = tostring(t[i] or 0) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

done = function(summary, latency, requests)
  local secs = summary.duration / 1e6
  local tot = {offered = 0, sent = 0, dropped = 0, answered = 0, good = 0, unmatched = 0,
               max_in_flight = 0, unanswered = 0, resent = 0}
  local h, lag, st, tla, tlg, tlo = {}, {}, {}, {}, {}, {}
  local exhausted = false
  local per_thread_conns = wrk_conns and math.floor(wrk_conns / #threads) or math.huge
  for _, t in ipairs(threads) do
    tot.offered = tot.offered + t:get("c_offered")
    tot.sent = tot.sent + t:get("c_sent")
    tot.dropped = tot.dropped + t:get("c_dropped")
    tot.answered = tot.answered + t:get("c_answered")
    tot.good = tot.good + t:get("c_good")
    tot.unmatched = tot.unmatched + t:get("c_unmatched")
    tot.resent = tot.resent + t:get("c_resent")
    local m = t:get("max_in_flight")
    tot.max_in_flight = tot.max_in_flight + m
    if m >= per_thread_conns then exhausted = true end
    for _ in pairs(t:get("outstanding")) do tot.unanswered = tot.unanswered + 1 end
    -- slots handed out and due before the thread stopped, never sent: offered, not sent
    local tq, t_first, t_last, t_now = t:get("q"), t:get("q_head"), t:get("q_tail"), t:get("last_now")
    local t_t0 = t:get("t0_slot")
    for i = t_first, t_last do
      local rel = tq[i] and t_t0 and tq[i] - t_t0
      if rel and tq[i] <= t_now and rel >= window_start_ms and rel < window_end_ms then
        tot.offered = tot.offered + 1
        tot.dropped = tot.dropped + 1
      end
    end
    merge(h, t:get("hist"))
    merge(lag, t:get("lag_hist"))
    merge(st, t:get("status"))
    if timeline_ms then
      merge(tla, t:get("tl_answered"))
      merge(tlg, t:get("tl_good"))
      merge(tlo, t:get("tl_offered"))
    end
  end
  local window_s = secs
  if window_end_ms < math.huge then window_s = (window_end_ms - window_start_ms) / 1000 end
  local non2xx = 0
  for k, v in pairs(st) do
    local c = tonumber(k)
    if c < 200 or c > 299 then non2xx = non2xx + v end
  end
  local timeline = ""
  if timeline_ms then
    local lo, hi = math.huge, -math.huge
    for _, t in ipairs({tla, tlg, tlo}) do
      for k in pairs(t) do
        if k < lo then lo = k end
        if k > hi then hi = k end
      end
    end
    if lo <= hi then
      timeline = string.format(
          ', "timeline": {"bucket_ms": %g, "t0_ms": %.3f, "answered": %s, "good": %s, "offered": %s}',
          timeline_ms, lo * timeline_ms, json_list(tla, lo, hi), json_list(tlg, lo, hi),
          json_list(tlo, lo, hi))
    end
  end
  io.write(string.format(
      '{"rps": %.1f, "requests": %d, "non2xx": %d, "socket_errors": %d, ' ..
      '"p50_us": %d, "p90_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d, ' ..
      '"latency_from": "scheduled", "rate": %g, "deadline_ms": %s, "window_s": %.3f, ' ..
      '"offered": %d, "sent": %d, "dropped": %d, "answered": %d, "good": %d, ' ..
      '"unanswered": %d, "unmatched": %d, "resent": %d, "offered_rps": %.1f, "sent_rps": %.1f, ' ..
      '"answered_rps": %.1f, "goodput_rps": %.1f, "status": %s, "threads": %d, "conns": %s, ' ..
      '"max_in_flight": %d, "conns_exhausted": %s, "send_lag_p99_us": %d, ' ..
      '"send_lag_max_us": %d%s}\n',
      summary.requests / secs, summary.requests, non2xx,
      summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
      percentile(h, 50), percentile(h, 90), percentile(h, 99), percentile(h, 99.9),
      percentile(h, 100), rate, deadline_ms and tostring(deadline_ms) or "null", window_s,
      tot.offered, tot.sent, tot.dropped, tot.answered, tot.good, tot.unanswered,
      tot.unmatched, tot.resent, tot.offered / window_s, tot.sent / window_s, tot.answered / window_s,
      tot.good / window_s, json_obj(st), #threads, wrk_conns and tostring(wrk_conns) or "null",
      tot.max_in_flight,
      wrk_conns and tostring(exhausted) or "null", percentile(lag, 99), percentile(lag, 100), timeline))
end
