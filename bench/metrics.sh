#!/usr/bin/env bash
# ops/bench metrics — what metrics cost (all loopback):
#   scrape_ms                  median time to serve GET /metrics with every plan of plans/
#                              and the test fixture fixed_rank (--enable-test-ops) loaded
#                              after traffic to each (2 shards)
#   loop_lag_during_scrape_ms  worst loop lag while wrk loads POST /rank and /metrics is
#                              scraped 10x/s: 1 shard, so that the server's loop has one
#                              core and wrk the other (target <= 1 ms)
#   loop_lag_worst_bucket_ms   the worst lag bucket of that run vs the same load without
#                              scrapes (what scraping itself adds)
#   loop_lag_during_scrape_2_shards_ms
#                              the same with 2 shards: three busy threads on two cores, so
#                              the kernel's scheduling shows in the lag
#   loop_lag_during_scrape_2_shards_paced_ms
#                              2 shards, the load offered at LAG_RATE requests/s (open loop,
#                              bench/wrk_paced.lua) so that the cores are not all busy: what
#                              a scrape adds to the loops, not the kernel's time slices
#                              (target <= 1 ms); baseline: the same paced load unscraped
#   rank_fixed_rps             POST /rank fixed_rank with metrics on vs --no-metrics, same
#                              run, alternating rounds, 2 shards (target ratio >= 0.97)
#   rank_fixed_cpu_us_per_req  rankd's CPU time per request in those rounds, on vs off
# 4 rounds, the order of the sides reversed every other round. Every wrk run fails the
# bench when wrk fails or over 1% of its requests got a non-2xx answer or a socket error.
# Env: WRK_THREADS (1), WRK_CONNS (64), WRK_SECONDS (8), LAG_RATE (20000).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-64} secs=${WRK_SECONDS:-8}
lag_rate=${LAG_RATE:-20000}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
start_redis
redis_port=$REDIS_PORT
"$build/src/cli/rankd" seed --no-embeddings --redis "redis://127.0.0.1:$redis_port" --users 2000 >/dev/null

# The shipped plans and the test fixture the load posts to.
mkdir -p "$tmp/plans"
cp "$root"/plans/*.plan.json "$root"/plans/*.model.json "$root"/plans/schema.json \
  "$root"/plans/experiments.json "$(plan_file fixed_rank)" "$tmp/plans/"
start_rankd() {  # start_rankd SHARDS [flags] -> rport, rpid
  local shards=$1
  shift
  rport=$(free_port)
  "$build/src/cli/rankd" serve --host 127.0.0.1 --port "$rport" --shards "$shards" \
    --plans "$tmp/plans" --enable-test-ops --redis "redis_default=redis://127.0.0.1:$redis_port" \
    --log-level error "$@" &
  rpid=$!
  bench_pids+=($rpid)
  wait_http "http://127.0.0.1:$rport/healthz"
}
stop_rankd() { kill -TERM "$rpid"; wait "$rpid" 2>/dev/null || true; }
body='{"plan":"fixed_rank","user_id":1}'
wrk_load() {  # wrk_load OUT: $secs of POST /rank at $rport, its report line in OUT
  # With PACED=1: offered at $lag_rate requests/s instead of as fast as answered. Fails
  # (and so ends the bench) when wrk fails, prints no report, or over 1% of the requests
  # got a non-2xx answer or a socket error: the figures of such a run mean nothing.
  local script=wrk_report.lua rc=0
  [ -n "${PACED:-}" ] && script=wrk_paced.lua
  WRK_BODY="$body" WRK_RATE=$lag_rate wrk -t"$threads" -c"$conns" -d"${secs}s" \
    -s "$root/bench/$script" "http://127.0.0.1:$rport/rank" > "$1.raw" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "metrics: wrk exited $rc:" >&2
    cat "$1.raw" >&2
    return 1
  fi
  grep '^{"rps"' "$1.raw" > "$1" || { echo "metrics: no report from wrk:" >&2; cat "$1.raw" >&2; return 1; }
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
n, bad2xx, socket = d["requests"], d["non2xx"], d["socket_errors"]
if bad2xx + socket > 0.01 * max(1, n):
    sys.exit(f"metrics: {bad2xx} non-2xx answers and {socket} socket errors in {n} requests (over 1%)")' "$1"
}
wrk_rps() {  # -> "RPS CPU_US_PER_REQUEST ERRORS" of the rankd at $rport ($rpid)
  local t0 t1
  t0=$(cpu_ticks "$rpid")
  wrk_load "$tmp/wrk_rps.out" || return 1
  t1=$(cpu_ticks "$rpid")
  python3 -c '
import json, os, sys
d = json.load(open(sys.argv[1]))
cpu_us = (int(sys.argv[3]) - int(sys.argv[2])) / os.sysconf("SC_CLK_TCK") * 1e6 / d["requests"]
print(d["rps"], round(cpu_us, 3), d["non2xx"] + d["socket_errors"])' "$tmp/wrk_rps.out" "$t0" "$t1"
}

# 1: scrape time
start_rankd 2
python3 "$root/bench/metrics_scrape_time.py" "$rport" "$tmp/plans" > "$tmp/scrape.json"
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

# lag_run SHARDS SCRAPE(0|1) OUT: the load for $secs, /metrics scraped 10x/s when
# SCRAPE=1 (sampling the lag gauge); OUT gets {worst_ms, scrapes, bucket_ms, rps}.
lag_run() {
  local shards=$1 scrape=$2 out=$3
  start_rankd "$shards"
  wrk_load "$tmp/wrk_lag.out" &
  local wrk_pid=$!
  if [ "$scrape" = 1 ]; then
    python3 "$root/bench/metrics_scrape_lag.py" "$rport" "$secs" > "$tmp/lag_samples.json"
  else
    echo '{"worst_ms": null, "scrapes": 0}' > "$tmp/lag_samples.json"
  fi
  wait "$wrk_pid" || { echo "metrics: the load of a lag run failed" >&2; return 1; }
  local bucket
  bucket=$(worst_lag_bucket_ms)
  stop_rankd
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
load = next((json.loads(l) for l in open(sys.argv[2]) if l.startswith("{\"rps\"")), {})
d.update({"bucket_ms": float(sys.argv[3]), "rps": load.get("rps")})
print(json.dumps(d))' "$tmp/lag_samples.json" "$tmp/wrk_lag.out" "$bucket" > "$out"
}

# 2: loop lag while scraped under load. The target run gives the server's one shard a
# core and wrk the other; with 2 shards, wrk shares a core with a shard and the kernel,
# not the loop, decides how late a timer fires: that run is reported alongside.
lag_run 1 1 "$tmp/lag_scraped.json"
lag_run 1 0 "$tmp/lag_plain.json"
lag_run 2 1 "$tmp/lag_2shards.json"
PACED=1 lag_run 2 1 "$tmp/lag_2shards_paced.json"
PACED=1 lag_run 2 0 "$tmp/lag_2shards_paced_plain.json"

# 3: rank_fixed rps, metrics on vs off, alternating, the order reversed every other
# round (on, off; off, on; ...) so that the machine's drift falls on both alike.
on=() off=()
measure_side() {  # measure_side on|off: one round of that side, appended to its list
  local r
  if [ "$1" = on ]; then
    start_rankd 2
  else
    start_rankd 2 --no-metrics
  fi
  r=$(wrk_rps) || exit 1
  stop_rankd
  if [ "$1" = on ]; then on+=("${r// /:}"); else off+=("${r// /:}"); fi
}
for round in 1 2 3 4; do
  if [ $((round % 2)) -eq 1 ]; then
    measure_side on; measure_side off
  else
    measure_side off; measure_side on
  fi
done

serve_cmd="$build/src/cli/rankd serve --host 127.0.0.1 --plans (plans/ and tests/plans/fixed_rank) --enable-test-ops --redis redis_default=redis://127.0.0.1:$redis_port --log-level error"
python3 - "$MACHINE" "$tmp" "${on[*]}" "${off[*]}" "wrk -t$threads -c$conns -d${secs}s" "$serve_cmd" "$lag_rate" <<'PY'
import json, statistics, sys
machine, tmp, on, off, wrk, serve, _ = sys.argv[1:]
load_cmd = f"{wrk} -s bench/wrk_report.lua http://127.0.0.1:PORT/rank (POST fixed_rank)"
load = lambda name: json.load(open(f"{tmp}/{name}.json"))
scrape, scraped, plain, two = load("scrape"), load("lag_scraped"), load("lag_plain"), load("lag_2shards")
paced, paced_plain = load("lag_2shards_paced"), load("lag_2shards_paced_plain")
on_cpu = [float(x.split(":")[1]) for x in on.split()]
off_cpu = [float(x.split(":")[1]) for x in off.split()]
on_err = sum(int(x.split(":")[2]) for x in on.split())
off_err = sum(int(x.split(":")[2]) for x in off.split())
on, off = [float(x.split(":")[0]) for x in on.split()], [float(x.split(":")[0]) for x in off.split()]
ctx = {"machine": machine, "build": "release+lto"}
def emit(d):
    d.update(ctx)
    print(json.dumps(d))
emit({"name": "scrape_ms", "value": round(scrape["scrape_ms"], 3), "unit": "ms", "target_max": 5,
      "p90_ms": round(scrape["p90_ms"], 3), "series": scrape["series"], "bytes": scrape["bytes"],
      "plans_loaded": scrape["plans"], "shards": 2})
emit({"name": "loop_lag_during_scrape_ms", "value": round(scraped["worst_ms"], 3), "unit": "ms",
      "target_max": 1, "worst_bucket_ms": scraped["bucket_ms"], "scrapes": scraped["scrapes"],
      "load_rps": scraped["rps"], "wrk": wrk, "shards": 1,
      "measure": "worst rankd_loop_lag_seconds sampled by the 10/s scrapes; worst_bucket_ms: "
                 "upper bound of the highest non-empty lag histogram bucket (every tick)"})
emit({"name": "loop_lag_worst_bucket_ms", "value": scraped["bucket_ms"], "unit": "ms",
      "baseline": plain["bucket_ms"],
      "ratio": round(scraped["bucket_ms"] / plain["bucket_ms"], 3) if plain["bucket_ms"] else None,
      "baseline_is": "same load, no scrapes", "load_rps": scraped["rps"],
      "baseline_command": f"{load_cmd} against {serve} --shards 1, /metrics not scraped",
      "baseline_load_rps": plain["rps"], "wrk": wrk, "shards": 1,
      "measure": "upper bound of the highest non-empty rankd_loop_lag_distribution_seconds bucket"})
emit({"name": "loop_lag_during_scrape_2_shards_ms", "value": round(two["worst_ms"], 3), "unit": "ms",
      "worst_bucket_ms": two["bucket_ms"], "scrapes": two["scrapes"], "load_rps": two["rps"],
      "wrk": wrk, "shards": 2,
      "note": "two shards and wrk share two cores: includes the kernel's scheduling delays"})
emit({"name": "loop_lag_during_scrape_2_shards_paced_ms", "value": round(paced["worst_ms"], 3),
      "unit": "ms", "target_max": 1, "worst_bucket_ms": paced["bucket_ms"],
      "baseline_worst_bucket_ms": paced_plain["bucket_ms"], "baseline_is": "same paced load, no scrapes",
      "scrapes": paced["scrapes"], "load_rps": paced["rps"], "offered_rps": int(sys.argv[7]),
      "wrk": wrk + " -s bench/wrk_paced.lua", "shards": 2,
      "measure": "worst rankd_loop_lag_seconds sampled by the 10/s scrapes under an open-loop load "
                 "that leaves the cores idle part of the time"})
v, b = statistics.median(on), statistics.median(off)
emit({"name": "rank_fixed_rps", "value": round(v, 1), "unit": "req/s", "baseline": round(b, 1),
      "ratio": round(v / b, 3), "target_ratio_min": 0.97, "baseline_is": "--no-metrics",
      "baseline_command": f"{load_cmd} against {serve} --shards 2 --no-metrics",
      "rounds_on": on, "rounds_off": off, "errors_on": on_err, "errors_off": off_err,
      "order": "on, off; then reversed every other round", "wrk": wrk, "shards": 2})
c, cb = statistics.median(on_cpu), statistics.median(off_cpu)
emit({"name": "rank_fixed_cpu_us_per_req", "value": round(c, 3), "unit": "us", "baseline": round(cb, 3),
      "ratio": round(c / cb, 3), "baseline_is": "--no-metrics", "rounds_on": on_cpu,
      "baseline_command": f"{load_cmd} against {serve} --shards 2 --no-metrics",
      "rounds_off": off_cpu, "shards": 2,
      "measure": "rankd CPU (user + system) per request in the same rounds; what metrics cost, "
                 "less disturbed by the shared cores than throughput"})
PY
