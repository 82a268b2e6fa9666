#!/usr/bin/env bash
# ops/bench http — rankd's HTTP throughput against nginx on the same machine, same wrk
# settings, in one run (all loopback):
#   healthz_rps              GET /healthz, rankd (2 shards) vs nginx (2 workers, reuseport,
#                            `return 200` with a 15-byte JSON body, access log off);
#                            median of 3 rounds that alternate between the two
#   healthz_cpu_us_per_req   the server's CPU time per request in those rounds (user +
#                            system: the kernel's TCP work included), rankd vs nginx
#   rank_fixed_rps           POST /rank of tests/plans/fixed_rank (fixed_source 100 -> vm ->
#                            sort -> take 20; --enable-test-ops), vs the same nginx
#   rank_fixed_cpu_us_per_req  rankd's CPU per request in those rounds (target <= 8.5 us)
#   rank_fixed_p99_over_p50  latency spread at that load
#   shards_2_over_1          rank_fixed rps with 2 shards / 1 shard
# Env: WRK_THREADS (1), WRK_CONNS (64), WRK_SECONDS (10), RANKD_BENCH_FLAGS (extra serve flags).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-64} secs=${WRK_SECONDS:-10}
source "$root/bench/lib.sh"
wrk_desc="wrk -t$threads -c$conns -d${secs}s --latency"
tmp=$BENCH_TMP

# run_wrk URL [BODY] -> the JSON line of bench/wrk_report.lua
run_wrk() {
  WRK_BODY="${2:-}" wrk -t"$threads" -c"$conns" -d1s -s "$root/bench/wrk_report.lua" "$1" >/dev/null  # warm-up
  WRK_BODY="${2:-}" wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/wrk_report.lua" "$1" | grep '^{"rps"'
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

# nginx baseline
nport=$(free_port)
mkdir -p "$tmp/nginx/logs"
cat > "$tmp/nginx/nginx.conf" <<NGINX
worker_processes 2;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nport reuseport;
    location / { default_type application/json; return 200 '{"status":"ok"}'; }
  }
}
NGINX
nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" -g 'daemon off;' &
bench_pids+=($!)
wait_http "http://127.0.0.1:$nport/"

# The one plan it serves, a test fixture: loaded with --enable-test-ops.
mkdir -p "$tmp/plans"
cp "$(plan_file fixed_rank)" "$tmp/plans/"
start_rankd() {  # start_rankd SHARDS -> sets rport, rpid
  rport=$(free_port)
  "$build/src/cli/rankd" serve --host 127.0.0.1 --port "$rport" --shards "$1" \
    --plans "$tmp/plans" --enable-test-ops --redis "redis_default=redis://127.0.0.1:$(free_port)" \
    --log-level error ${RANKD_BENCH_FLAGS:-} &
  rpid=$!
  bench_pids+=($rpid)
  wait_http "http://127.0.0.1:$rport/healthz"
}
stop_rankd() { kill -TERM "$rpid"; wait "$rpid" 2>/dev/null || true; }

body='{"plan":"fixed_rank","user_id":1}'

# measured URL BODY PID... -> the wrk JSON line plus "cpu_us_per_req": the server's CPU
# (its threads' user + system time, kernel TCP work included) per request served.
measured() {
  local url=$1 b=$2
  shift 2
  local t0 line t1
  t0=$(cpu_ticks "$@")
  line=$(run_wrk "$url" "$b")
  t1=$(cpu_ticks "$@")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
ticks = int(sys.argv[3]) - int(sys.argv[2])
warm = 1.0  # run_wrk warms up for 1 s first: assume the same rate for those requests
d["cpu_us_per_req"] = ticks / os.sysconf("SC_CLK_TCK") * 1e6 / (d["requests"] * (1 + warm / float(sys.argv[4])))
print(json.dumps(d))' "$line" "$t0" "$t1" "$secs"
}

# Rounds alternate between nginx and rankd so that both see the same machine: the
# load generator shares the cores, and a single run of each swings by ±10%.
nginx_workers=$(pgrep -P "$(cat "$tmp/nginx/nginx.pid")" | tr '\n' ' ')
start_rankd 2
: > "$tmp/rounds.jsonl"
round_line() { echo "{\"round\": $1, \"what\": \"$2\", \"r\": $3}" >> "$tmp/rounds.jsonl"; }
for round in 1 2 3; do
  # shellcheck disable=SC2086  # the worker pids are separate words
  round_line "$round" nginx "$(measured "http://127.0.0.1:$nport/" "" $nginx_workers)"
  round_line "$round" healthz "$(measured "http://127.0.0.1:$rport/healthz" "" "$rpid")"
  round_line "$round" rank2 "$(measured "http://127.0.0.1:$rport/rank" "$body" "$rpid")"
done
stop_rankd
start_rankd 1
round_line 1 rank1 "$(measured "http://127.0.0.1:$rport/rank" "$body" "$rpid")"
stop_rankd

nginx_cmd="nginx -c $tmp/nginx/nginx.conf -p $tmp/nginx -g 'daemon off;' (worker_processes 2, reuseport, access_log off, return 200 '{\"status\":\"ok\"}')"
rankd1_cmd="rankd serve --host 127.0.0.1 --shards 1 --plans (tests/plans/fixed_rank.plan.json) --enable-test-ops --log-level error ${RANKD_BENCH_FLAGS:-}"
python3 - "$MACHINE" "$wrk_desc" "$tmp/rounds.jsonl" "$nginx_cmd" "$rankd1_cmd" <<'PY'
import json, statistics, sys
machine, wrk, rounds_file, nginx_cmd, rankd1_cmd = sys.argv[1:]
vs_nginx = f"{wrk} -s bench/wrk_report.lua http://127.0.0.1:PORT/ against {nginx_cmd}"
by = {}
for line in open(rounds_file):
    row = json.loads(line)
    by.setdefault(row["what"], []).append(row["r"])
ctx = {"machine": machine, "wrk": wrk, "build": "release+lto"}
def med(what, key):
    return statistics.median(r[key] for r in by[what])
def rounds(what, key):
    return [round(r[key], 2) for r in by[what]]
def emit(name, value, unit, baseline=None, **extra):
    d = {"name": name, "value": round(value, 3), "unit": unit}
    if baseline is not None:
        d["baseline"] = round(baseline, 3)
        d["ratio"] = round(value / baseline, 3)
    d.update(extra)
    d.update(ctx)
    print(json.dumps(d))
for what, runs in by.items():
    bad = sum(r["non2xx"] + r["socket_errors"] for r in runs)
    if bad:
        print(json.dumps({"name": "errors", "value": bad, "unit": "count", "run": what}))
emit("healthz_rps", med("healthz", "rps"), "req/s", med("nginx", "rps"), target_ratio_min=1.0,
     shards=2, rounds=rounds("healthz", "rps"), baseline_rounds=rounds("nginx", "rps"),
     p50_us=med("healthz", "p50_us"), p99_us=med("healthz", "p99_us"),
     baseline_server="nginx 2 workers return 200", measure="median of 3 alternating rounds",
     baseline_command=vs_nginx)
emit("healthz_cpu_us_per_req", med("healthz", "cpu_us_per_req"), "us", med("nginx", "cpu_us_per_req"),
     shards=2, rounds=rounds("healthz", "cpu_us_per_req"),
     baseline_rounds=rounds("nginx", "cpu_us_per_req"), baseline_command=vs_nginx,
     measure="server CPU (user + system, kernel TCP work included) per request; lower is better")
emit("rank_fixed_rps", med("rank2", "rps"), "req/s", med("nginx", "rps"), target_ratio_min=0.7,
     shards=2, rounds=rounds("rank2", "rps"), p50_us=med("rank2", "p50_us"),
     p99_us=med("rank2", "p99_us"), plan="fixed_rank",
     cpu_us_per_req=round(med("rank2", "cpu_us_per_req"), 2), baseline_command=vs_nginx)
emit("rank_fixed_cpu_us_per_req", med("rank2", "cpu_us_per_req"), "us", target_max=8.5, shards=2,
     rounds=rounds("rank2", "cpu_us_per_req"), plan="fixed_rank",
     measure="rankd's CPU (user + system, kernel TCP work included) per POST /rank of "
             "fixed_rank, median of 3 rounds; lower is better")
spread = [r["p99_us"] / max(r["p50_us"], 1) for r in by["rank2"]]
emit("rank_fixed_p99_over_p50", statistics.median(spread), "ratio", target_max=5.0,
     rounds=[round(x, 2) for x in spread], measure="median of 3 rounds")
emit("shards_2_over_1", med("rank2", "rps"), "req/s", med("rank1", "rps"),
     note="2 cores shared with wrk: shows contention, not the ceiling",
     baseline_command=f"{wrk} -s bench/wrk_report.lua http://127.0.0.1:PORT/rank (POST fixed_rank) against {rankd1_cmd}")
PY
