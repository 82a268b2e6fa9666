#!/usr/bin/env bash
# ops/bench http — rankd's HTTP throughput against nginx on the same machine, same wrk
# settings, in one run (all loopback):
#   healthz_rps              GET /healthz, rankd (2 shards) vs nginx (2 workers, reuseport,
#                            `return 200` with a 15-byte JSON body, access log off)
#   rank_fixed_rps           POST /rank of plans/fixed_rank (fixed_source 100 -> vm -> sort
#                            -> take 20), vs the same nginx
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

start_rankd() {  # start_rankd SHARDS -> sets rport, rpid
  rport=$(free_port)
  "$build/src/server/rankd" serve --host 127.0.0.1 --port "$rport" --shards "$1" \
    --plans "$root/plans" --redis "redis_default=redis://127.0.0.1:$(free_port)" \
    --log-level error ${RANKD_BENCH_FLAGS:-} &
  rpid=$!
  bench_pids+=($rpid)
  wait_http "http://127.0.0.1:$rport/healthz"
}
stop_rankd() { kill -TERM "$rpid"; wait "$rpid" 2>/dev/null || true; }

body='{"plan":"fixed_rank","user_id":1}'
nginx_json=$(run_wrk "http://127.0.0.1:$nport/")
nginx_rps=$(field "$nginx_json" rps)

start_rankd 2
healthz_json=$(run_wrk "http://127.0.0.1:$rport/healthz")
rank2_json=$(run_wrk "http://127.0.0.1:$rport/rank" "$body")
stop_rankd
start_rankd 1
rank1_json=$(run_wrk "http://127.0.0.1:$rport/rank" "$body")
stop_rankd

python3 - "$MACHINE" "$wrk_desc" "$nginx_json" "$healthz_json" "$rank2_json" "$rank1_json" <<'PY'
import json, sys
machine, wrk, nginx, healthz, rank2, rank1 = sys.argv[1], sys.argv[2], *map(json.loads, sys.argv[3:])
ctx = {"machine": machine, "wrk": wrk, "build": "release+lto"}
def emit(name, value, unit, baseline=None, **extra):
    d = {"name": name, "value": round(value, 3), "unit": unit}
    if baseline is not None:
        d["baseline"] = round(baseline, 3)
        d["ratio"] = round(value / baseline, 3)
    d.update(extra)
    d.update(ctx)
    print(json.dumps(d))
for r, what in ((healthz, "healthz"), (rank2, "rank 2 shards"), (rank1, "rank 1 shard")):
    if r["non2xx"] or r["socket_errors"]:
        print(json.dumps({"name": "errors", "value": r["non2xx"] + r["socket_errors"], "unit": "count", "run": what}))
emit("healthz_rps", healthz["rps"], "req/s", nginx["rps"], target_ratio_min=1.0, shards=2,
     p50_us=healthz["p50_us"], p99_us=healthz["p99_us"], baseline_server="nginx 2 workers return 200")
emit("rank_fixed_rps", rank2["rps"], "req/s", nginx["rps"], target_ratio_min=0.7, shards=2,
     p50_us=rank2["p50_us"], p99_us=rank2["p99_us"], plan="fixed_rank")
emit("rank_fixed_p99_over_p50", rank2["p99_us"] / max(rank2["p50_us"], 1), "ratio", target_max=5.0,
     p50_us=rank2["p50_us"], p99_us=rank2["p99_us"])
emit("shards_2_over_1", rank2["rps"], "req/s", rank1["rps"],
     note="2 cores shared with wrk: shows contention, not the ceiling")
PY
