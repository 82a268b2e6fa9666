#!/usr/bin/env bash
# ops/bench cache_staleness — how long after Redis acknowledges a write a cached answer
# still shows the old value (bench/cache_staleness.py): rankd serve (2 shards,
# --cache-mb 64, the release build) on a fresh redis-server with ITEMS item hashes, a plan
# that reads them all through the cache (fixed_source -> features cache: true), and
# PROBES writes, each followed by requests until an answer shows it. With LOAD=1 (the
# default), wrk drives the same plan at the same time (WRK_CONNS connections), so the
# figure includes a busy shard's queueing.
# Figures: cache_staleness_p50 / _p99 / _max (ms), cache_probe_rtt_p50 (the floor: one
# cached request's round trip), cache_staleness_polls_mean.
# Env: PROBES (300), ITEMS (200), TRACKING (bcast | default), LOAD (1), WRK_CONNS (8).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
probes=${PROBES:-300} items=${ITEMS:-200} tracking=${TRACKING:-bcast} load=${LOAD:-1}
conns=${WRK_CONNS:-8}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP

start_redis
{
  for i in $(seq 1 "$items"); do echo "HSET item:$i likes 0 quality 0.5"; done
} | redis-cli -p "$REDIS_PORT" >/dev/null

mkdir -p "$tmp/plans"
cat > "$tmp/plans/stale_probe.plan.json" <<JSON
{"schema_version": 1, "name": "stale_probe",
 "nodes": [
  {"node_id": "src", "op": "fixed_source", "params": {"count": $items}},
  {"node_id": "h", "op": "features", "inputs": ["src"],
   "params": {"endpoint": "redis_default", "cache": true, "fields": ["likes"]}}],
 "output": {"node": "h", "columns": ["id", "likes"]}}
JSON

port=$(free_port)
"$build/src/cli/rankd" serve --host 127.0.0.1 --port "$port" --shards 2 --plans "$tmp/plans" \
  --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --cache-mb 64 \
  --cache-tracking "$tracking" --log-level error --enable-test-ops &
bench_pids+=($!)
wait_http "http://127.0.0.1:$port/readyz"

if [ "$load" = 1 ]; then
  WRK_BODY='{"plan":"stale_probe","user_id":1}' wrk -t1 -c"$conns" -d600s \
    -s "$root/bench/wrk_report.lua" "http://127.0.0.1:$port/rank" >/dev/null 2>&1 &
  bench_pids+=($!)
  sleep 1
fi

/usr/bin/python3 "$root/bench/cache_staleness.py" --rankd "127.0.0.1:$port" \
  --redis "127.0.0.1:$REDIS_PORT" --plan stale_probe --items "$items" --probes "$probes" \
  --machine "$MACHINE, release+lto, 2 shards, tracking $tracking, load $load"
