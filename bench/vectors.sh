#!/usr/bin/env bash
# ops/bench vectors — dot(viewer, vec column) ns per row at D = 64 over 1,000 rows through
# the expression VM, against a plain loop over the same kernel (data/vector_math.h), in
# one process (bench/vectors_bench.cc); then `ann` µs per query at ANN_ITEMS (100,000) × 64,
# k 100, the default ef, through rankd's index code against the same faiss index searched
# directly, one thread, recall and build times beside them (bench/ann_bench.cc; smaller
# runs: ANN_ITEMS=2000 ANN_QUERIES=20). Then the discover plan end to end: rankd serve (2
# shards) on the seeded demo data (`rankd seed --users DISCOVER_USERS --seed 1
# --embedded-media 20`: 20 items a user, every one with an embedding, 5,000 users =
# 100,000 items) in a fresh redis-server: the item index's build time
# (rankd_index_build_seconds, the build before /readyz) and items, then wrk (WRK_CONNS
# 16, 1 s warm-up, WRK_SECONDS 6) with a viewer drawn per request from users 0..VIEWERS-1
# (2000; as bench/feed.sh, user 0 has no data): discover_rps and discover_cpu_us_per_req (rankd's user + system CPU, every thread, per request;
# bench/lib.sh cpu_ticks).
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/vectors_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/vectors_bench (the baseline, a loop calling the same kernel, runs in the same process; see bench/vectors_bench.cc)"
"$RANKD_BUILD/bench/ann_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/ann_bench (the baseline, faiss IndexHNSWFlat::search on an index built from the same vectors, runs in the same process; see bench/ann_bench.cc)"

# ---- discover end to end -------------------------------------------------------------
users=${DISCOVER_USERS:-5000} secs=${WRK_SECONDS:-6} conns=${WRK_CONNS:-16} viewers=${VIEWERS:-2000}
start_redis
"$RANKD_BUILD/src/cli/rankd" seed --redis "redis://127.0.0.1:$REDIS_PORT" --users "$users" --seed 1 \
  --embedded-media 20 >&2
port=$(free_port)
"$RANKD_BUILD/src/cli/rankd" serve --host 127.0.0.1 --port "$port" --shards 2 --plans "$RANKD_ROOT/plans" \
  --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error &
rankd_pid=$!
bench_pids+=("$rankd_pid")
# /readyz waits for the index's first build: longer than wait_http's 10 s at 100,000 items.
for _ in $(seq 1200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.5; done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { echo "vectors: rankd not ready" >&2; exit 1; }
index=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '
  /^rankd_index_build_seconds\{index="items"\}/ {s = $NF}
  /^rankd_index_items\{index="items"\}/ {n = $NF}
  END {print s, n}')
body='{"plan":"discover","user_id":$USER,"deadline_ms":2000}'
url="http://127.0.0.1:$port/rank"
WRK_BODY=$body WRK_USERS=$viewers wrk -t1 -c"$conns" -d1s -s "$RANKD_ROOT/bench/wrk_report.lua" "$url" >/dev/null
t0=$(cpu_ticks "$rankd_pid")
line=$(WRK_BODY=$body WRK_USERS=$viewers wrk -t1 -c"$conns" -d"${secs}s" --latency \
  -s "$RANKD_ROOT/bench/wrk_report.lua" "$url" | grep '^{"rps"')
t1=$(cpu_ticks "$rankd_pid")
python3 - "$line" "$t0" "$t1" "$index" "$users" "$conns" "$secs" "$viewers" <<'PY'
import json, os, sys
line, t0, t1, index, users, conns, secs, viewers = sys.argv[1:]
d = json.loads(line)
n = max(d["requests"], 1)
build_s, items = index.split()
ctx = {"plan": "discover", "shards": 2, "machine": os.environ["MACHINE"], "build": "release+lto",
       "wrk": f"wrk -t1 -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "errors": d["non2xx"] + d["socket_errors"]}
print(json.dumps({"name": "discover_index_build_seconds", "value": round(float(build_s), 3), "unit": "s",
                  "items": int(float(items)), "dim": 32, "metric": "ip",
                  "note": "rankd_index_build_seconds of the build before /readyz (SCAN, HMGET, faiss add; nice 19)",
                  "seed_users": int(users), "machine": ctx["machine"], "build": ctx["build"]}))
print(json.dumps({"name": "discover_rps", "value": round(d["rps"], 1), "unit": "req/s", **ctx}))
print(json.dumps({"name": "discover_cpu_us_per_req",
                  "value": round((int(t1) - int(t0)) * 1e6 / os.sysconf("SC_CLK_TCK") / n, 1), "unit": "us",
                  "note": "rankd's user + system CPU (every thread) per request; lower is better", **ctx}))
PY
