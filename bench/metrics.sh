#!/usr/bin/env bash
# ops/bench metrics — what metrics cost (all loopback):
#   scrape_ms                  median time to serve GET /metrics with every plan of plans/
#                              loaded after traffic to each (2 shards)
#   loop_lag_during_scrape_ms  worst rankd_loop_lag_seconds seen on any shard while wrk
#                              loads POST /rank and /metrics is scraped 10x/s
#   loop_lag_worst_bucket_ms   the worst lag bucket of that run vs the same load without
#                              scrapes (what scraping itself adds)
#   rank_fixed_rps             POST /rank fixed_rank with metrics on vs --no-metrics, same
#                              run, alternating rounds (target ratio >= 0.97)
# Env: WRK_THREADS (1), WRK_CONNS (64), WRK_SECONDS (8).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-64} secs=${WRK_SECONDS:-8}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
start_redis
redis_port=$REDIS_PORT
"$build/src/server/rankd" seed --redis "redis://127.0.0.1:$redis_port" --users 2000 >/dev/null

start_rankd() {  # start_rankd [flags] -> rport, rpid
  rport=$(free_port)
  "$build/src/server/rankd" serve --host 127.0.0.1 --port "$rport" --shards 2 --plans "$root/plans" \
    --redis "redis_default=redis://127.0.0.1:$redis_port" --log-level error "$@" &
  rpid=$!
  bench_pids+=($rpid)
  wait_http "http://127.0.0.1:$rport/healthz"
}
stop_rankd() { kill -TERM "$rpid"; wait "$rpid" 2>/dev/null || true; }
body='{"plan":"fixed_rank","user_id":1}'
wrk_rps() {
  WRK_BODY="$body" wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$root/bench/wrk_report.lua" \
    "http://127.0.0.1:$rport/rank" | grep '^{"rps"' | python3 -c 'import json,sys; print(json.load(sys.stdin)["rps"])'
}

# 1+2: scrape time, and loop lag while scraped under load
start_rankd
python3 - "$rport" "$root/plans" <<'PY' > "$tmp/scrape.json"
import http.client, json, os, statistics, sys, time
port, plans = int(sys.argv[1]), sys.argv[2]
names = sorted(f[:-len(".plan.json")] for f in os.listdir(plans) if f.endswith(".plan.json"))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
for name in names:
    for uid in range(1, 21):
        c.request("POST", "/rank", json.dumps({"plan": name, "user_id": uid}))
        c.getresponse().read()
times = []
for _ in range(50):
    t0 = time.perf_counter()
    c.request("GET", "/metrics")
    text = c.getresponse().read()
    times.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"scrape_ms": statistics.median(times), "p90_ms": sorted(times)[44],
                  "bytes": len(text), "series": sum(1 for l in text.splitlines() if l and not l.startswith(b"#")),
                  "plans": len(names)}))
PY
stop_rankd

# The worst loop lag a shard's histogram saw: the upper bound of its highest non-empty
# bucket (the histogram sees every 100 ms tick; a scrape only samples the gauge).
worst_lag_bucket_ms() {
  curl -s "http://127.0.0.1:$rport/metrics" | python3 -c '
import re, sys
worst, prev = 0.0, {}
for line in sys.stdin:
    m = re.match(r"rankd_loop_lag_distribution_seconds_bucket\{shard=\"(\d+)\",le=\"([^\"]+)\"\} (\d+)", line)
    if not m:
        continue
    shard, le, n = m.group(1), m.group(2), int(m.group(3))
    if n > prev.get(shard, 0):
        worst = max(worst, float(le))
    prev[shard] = n
print(worst * 1000)'
}

# 2a: the same load without scrapes, as the baseline of the loop lag
start_rankd
WRK_BODY="$body" wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$root/bench/wrk_report.lua" \
  "http://127.0.0.1:$rport/rank" > /dev/null
lag_no_scrape=$(worst_lag_bucket_ms)
stop_rankd

# 2b: the load while /metrics is scraped 10x/s
start_rankd
WRK_BODY="$body" wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$root/bench/wrk_report.lua" \
  "http://127.0.0.1:$rport/rank" > "$tmp/wrk_lag.out" &
wrk_pid=$!
python3 - "$rport" "$secs" <<'PY' > "$tmp/lag.json"
import http.client, json, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
worst, scrapes, end = 0.0, 0, time.monotonic() + secs - 0.5
time.sleep(0.3)
while time.monotonic() < end:
    t0 = time.monotonic()
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("rankd_loop_lag_seconds{"):
            worst = max(worst, float(line.rsplit(" ", 1)[1]))
    scrapes += 1
    time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
print(json.dumps({"worst_ms": worst * 1000, "scrapes": scrapes}))
PY
wait "$wrk_pid"
lag_scraped=$(worst_lag_bucket_ms)
stop_rankd

# 3: rank_fixed rps, metrics on vs off, alternating
on=() off=()
for round in 1 2 3; do
  start_rankd; on+=("$(wrk_rps)"); stop_rankd
  start_rankd --no-metrics; off+=("$(wrk_rps)"); stop_rankd
done

python3 - "$MACHINE" "$tmp/scrape.json" "$tmp/lag.json" "$tmp/wrk_lag.out" "${on[*]}" "${off[*]}" \
  "wrk -t$threads -c$conns -d${secs}s" "$lag_scraped" "$lag_no_scrape" <<'PY'
import json, statistics, sys
machine, scrape, lag, wrk_out, on, off, wrk, lag_scraped, lag_no_scrape = sys.argv[1:]
lag_scraped, lag_no_scrape = float(lag_scraped), float(lag_no_scrape)
scrape, lag = json.load(open(scrape)), json.load(open(lag))
load = next((json.loads(l) for l in open(wrk_out) if l.startswith('{"rps"')), {})
on, off = [float(x) for x in on.split()], [float(x) for x in off.split()]
ctx = {"machine": machine, "build": "release+lto", "shards": 2}
def emit(d):
    d.update(ctx)
    print(json.dumps(d))
emit({"name": "scrape_ms", "value": round(scrape["scrape_ms"], 3), "unit": "ms", "target_max": 5,
      "p90_ms": round(scrape["p90_ms"], 3), "series": scrape["series"], "bytes": scrape["bytes"],
      "plans_loaded": scrape["plans"]})
emit({"name": "loop_lag_during_scrape_ms", "value": round(lag["worst_ms"], 3), "unit": "ms", "target_max": 1,
      "scrapes": lag["scrapes"], "load_rps": load.get("rps"), "wrk": wrk,
      "measure": "worst rankd_loop_lag_seconds sampled by the 10/s scrapes"})
emit({"name": "loop_lag_worst_bucket_ms", "value": lag_scraped, "unit": "ms", "baseline": lag_no_scrape,
      "ratio": round(lag_scraped / lag_no_scrape, 3) if lag_no_scrape else None,
      "baseline_is": "same load, no scrapes", "wrk": wrk,
      "measure": "upper bound of the highest non-empty rankd_loop_lag_distribution_seconds bucket, any shard"})
v, b = statistics.median(on), statistics.median(off)
emit({"name": "rank_fixed_rps", "value": round(v, 1), "unit": "req/s", "baseline": round(b, 1),
      "ratio": round(v / b, 3), "target_ratio_min": 0.97, "baseline_is": "--no-metrics",
      "rounds_on": on, "rounds_off": off, "wrk": wrk})
PY
