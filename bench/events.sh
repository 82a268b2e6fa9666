#!/usr/bin/env bash
# ops/bench events — what POST /events and the counters it keeps cost (docs/events.md), on
# the demo schema (plans/schema.json: item_counts by item, user_counts by user, the served
# zset of impressions), rankd serve with 2 shards and a fresh redis-server:
#
# (a) ingestion: wrk (WRK_THREADS 1, WRK_CONNS 16) posting batches of EVENTS (100) events
#     (bench/wrk_events.lua: items Zipf s = 1.1 over ITEMS, 100,000; users uniform over
#     USERS, 10,000; impression:click 9:1), against a rankd aggregating with the default
#     --events-flush-ms (2), alternating rounds with one run with --events-flush-ms 0 (one
#     increment per event and family) as the baseline, Redis flushed before each:
#     events_ingest_events_per_s, events_ingest_redis_cpu_us_per_event (redis-server's
#     user + system CPU from /proc over the run / events accepted),
#     events_ingest_rankd_cpu_us_per_event, events_ingest_p99_latency. These runs write
#     what the issue's benchmark names, an item and a user counters family: the demo schema
#     with impression's marks taken out. The same pair of runs on the whole demo schema,
#     each impression also a mark in the viewer's served zset (a ZADD a user no aggregation
#     merges), in the same alternating rounds: events_ingest_marks_* (supporting figures).
# (b) reading: the demo data (`rankd seed`, SEED_USERS 10,000) plus counters for items
#     1..CANDIDATES (1,000) from a short ingestion run over them, then a feed-shaped plan
#     scoring CANDIDATES candidates (fixed_source, features, vm, sort, take 50) by ctr_1d and
#     clicks_1d of item_counts, alternating with the same plan reading two plain fields of
#     the item hash (likes, quality) as the baseline, both uncached on one rankd:
#     events_read_cpu_us_per_req (rankd), events_read_redis_cpu_us_per_req, events_read_rps.
# (c) reading through the counters family's bounded-staleness cache: in this bench's copy
#     of the schema item_counts has "cache_ms": 1000 (CACHE_MS), and the same plan with
#     `cache: true` on its features node (read_counters_cached) runs on a third rankd
#     started with --cache-mb 64, in the same alternating rounds as (b), against the
#     uncached read_hash baseline: events_read_cached_redis_cpu_us_per_req (the issue's
#     bound: at most 0.5x the baseline), events_read_cached_cpu_us_per_req (rankd),
#     events_read_cached_rps. Only nodes with `cache: true` use cache_ms: (b)'s plans read
#     Redis every time.
#
# Each figure is the median of ROUNDS rounds, with its rounds and spread. Any answer that
# is not 2xx (or a socket error) fails the bench after printing an *_errors line.
# Env: ROUNDS (3), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (10), EVENTS (100),
# ITEMS (100000), USERS (10000), SEED_USERS (10000), CANDIDATES (1000), CACHE_MS (1000).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-3} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-10}
events=${EVENTS:-100} items=${ITEMS:-100000} users=${USERS:-10000}
seed_users=${SEED_USERS:-10000} candidates=${CANDIDATES:-1000} cache_ms=${CACHE_MS:-1000}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
rankd="$build/src/cli/rankd"

start_redis
redis_pid=${bench_pids[-1]}
redis_cli() { redis-cli -p "$REDIS_PORT" "$@" >/dev/null; }

# The demo schema with item_counts' cache_ms, and the reading plans: counters (ctr_1d,
# clicks_1d; uncached, and cached) and hash (likes, quality), the same shape otherwise.
# plans_marks: the same with the demo's impression marks kept (the events_ingest_marks_*
# runs).
mkdir -p "$tmp/plans" "$tmp/plans_marks"
python3 - "$tmp/plans" "$candidates" "$root/plans/schema.json" "$cache_ms" <<'PY'
import json, sys
d, n, schema, cache_ms = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = json.load(open(schema))
s["families"]["item_counts"]["cache_ms"] = cache_ms
json.dump(s, open(f"{d}_marks/schema.json", "w"), indent=2)
assert "marks" in s["events"]["impression"], "the demo schema's impressions mark the served zset"
del s["events"]["impression"]["marks"]
json.dump(s, open(f"{d}/schema.json", "w"), indent=2)
def plan(name, family, a, b, cache=False):
    return {"schema_version": 1, "name": name,
            "description": f"{n} candidates scored by {family}'s {a} and {b}, "
                           + ("through the shard cache" if cache else "uncached"),
            "nodes": [
                {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": n}},
                {"node_id": "h", "op": "features", "inputs": ["src"],
                 "params": {"family": family, "fields": [a, b], "cache": cache}},
                {"node_id": "s", "op": "vm", "inputs": ["h"], "params": {"out_key": "score", "expr": "e"}},
                {"node_id": "o", "op": "sort", "inputs": ["s"], "params": {"key": "score", "order": "desc"}},
                {"node_id": "t", "op": "take", "inputs": ["o"], "params": {"count": 50}}],
            "expr_table": {"e": {"op": "+", "args": [
                {"op": "coalesce", "args": [{"key": a}, {"const": 0}]},
                {"op": "*", "args": [{"op": "coalesce", "args": [{"key": b}, {"const": 0}]}, {"const": 0.001}]}]}},
            "pred_table": {}, "output": {"node": "t", "columns": ["id", "score"]}}
for name, p in (("read_counters", plan("read_counters", "item_counts", "ctr_1d", "clicks_1d")),
                ("read_counters_cached",
                 plan("read_counters_cached", "item_counts", "ctr_1d", "clicks_1d", cache=True)),
                ("read_hash", plan("read_hash", "item", "quality", "likes"))):
    for folder in (d, f"{d}_marks"):  # readiness needs a plan
        json.dump(p, open(f"{folder}/{name}.plan.json", "w"), indent=2)
PY

# serve VARIANT PLANS FLUSH_MS [FLAG...] -> a new rankd (2 shards) on the plans folder PLANS
# with --events-flush-ms FLUSH_MS and the FLAGs, its port and pid kept under VARIANT.
# --deadline-ms 2000: /events answers within the server's deadline, and a closed loop that
# saturates Redis queues past the default's 200 ms (a 504 would fail the bench; the
# figures are throughput and CPU, not latency under a deadline).
declare -A port pid
serve() {
  local v=$1 plans=$2 flush=$3 p
  shift 3
  p=$(free_port)
  "$rankd" serve --host 127.0.0.1 --port "$p" --shards 2 --plans "$plans" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --events-flush-ms "$flush" \
    --deadline-ms 2000 --log-level error --enable-test-ops "$@" &
  pid[$v]=$!
  port[$v]=$p
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:$p/readyz"
}
serve aggregated "$tmp/plans" 2
serve unaggregated "$tmp/plans" 0
serve aggregated_marks "$tmp/plans_marks" 2
serve unaggregated_marks "$tmp/plans_marks" 0
serve cached "$tmp/plans" 2 --cache-mb 64

# wrk_run URL SECONDS SCRIPT [BODY]: wrk's JSON line (bench/wrk_*.lua).
wrk_run() {
  WRK_BODY=${4:-} WRK_EVENTS=$events WRK_ITEMS=${WRK_ITEMS_OVERRIDE:-$items} WRK_USERS=$users \
    WRK_ZIPF_S=${WRK_ZIPF_OVERRIDE:-1.1} \
    wrk -t"$threads" -c"$conns" -d"${2}s" --latency -s "$3" "$1" | grep '^{"rps"'
}

# measure_ingest VARIANT -> one JSON line: wrk's figures and the CPU of rankd and Redis over
# the measured run (after a 1 s warm-up), Redis flushed first.
measure_ingest() {
  local v=$1 url="http://127.0.0.1:${port[$1]}/events" t0 t1 k0 k1 line
  redis_cli FLUSHALL
  wrk_run "$url" 1 "$root/bench/wrk_events.lua" >/dev/null
  t0=$(cpu_ticks "${pid[$v]}"); k0=$(cpu_ticks "$redis_pid")
  line=$(wrk_run "$url" "$secs" "$root/bench/wrk_events.lua")
  t1=$(cpu_ticks "${pid[$v]}"); k1=$(cpu_ticks "$redis_pid")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
t0, t1, k0, k1, per = map(int, sys.argv[2:7])
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
ev = max(d["requests"] * per, 1)
d["events_per_s"] = d["rps"] * per
d["rankd_cpu_us_per_event"] = (t1 - t0) * tick_us / ev
d["redis_cpu_us_per_event"] = (k1 - k0) * tick_us / ev
print(json.dumps(d))' "$line" "$t0" "$t1" "$k0" "$k1" "$events"
}

# measure_read PLAN VARIANT -> one JSON line: wrk's figures, the CPU per request of the
# rankd VARIANT and of Redis.
measure_read() {
  local v=$2 url="http://127.0.0.1:${port[$2]}/rank" body t0 t1 k0 k1 line
  body="{\"plan\":\"$1\",\"user_id\":1,\"deadline_ms\":2000}"
  wrk_run "$url" 1 "$root/bench/wrk_report.lua" "$body" >/dev/null
  t0=$(cpu_ticks "${pid[$v]}"); k0=$(cpu_ticks "$redis_pid")
  line=$(wrk_run "$url" "$secs" "$root/bench/wrk_report.lua" "$body")
  t1=$(cpu_ticks "${pid[$v]}"); k1=$(cpu_ticks "$redis_pid")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
t0, t1, k0, k1 = map(int, sys.argv[2:6])
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
n = max(d["requests"], 1)
d["cpu_us_per_req"] = (t1 - t0) * tick_us / n
d["redis_cpu_us_per_req"] = (k1 - k0) * tick_us / n
print(json.dumps(d))' "$line" "$t0" "$t1" "$k0" "$k1"
}

# (a) Rounds alternate the two rankds, the order swapped every other round, so that a slow
# minute of the shared machine falls on both.
: > "$tmp/rounds.jsonl"
for round in $(seq "$rounds"); do
  order=(aggregated unaggregated aggregated_marks unaggregated_marks)
  [ $((round % 2)) -eq 1 ] || order=(unaggregated_marks aggregated_marks unaggregated aggregated)
  for v in "${order[@]}"; do
    echo "{\"part\": \"ingest\", \"variant\": \"$v\", \"r\": $(measure_ingest "$v")}" >> "$tmp/rounds.jsonl"
  done
done

# (b) The data the reading plans read: item hashes, and counters for every candidate
# (events over items 1..CANDIDATES, uniform, for a few seconds).
"$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users "$seed_users" --seed 1 --flush >&2
WRK_ITEMS_OVERRIDE=$candidates WRK_ZIPF_OVERRIDE=0 \
  wrk_run "http://127.0.0.1:${port[aggregated]}/events" 3 "$root/bench/wrk_events.lua" \
  >> "$tmp/prepare.jsonl"
# The plans of (b) and (c) and the rankd each runs on; the order reversed every other round.
declare -A reader=([read_counters]=aggregated [read_hash]=aggregated [read_counters_cached]=cached)
for round in $(seq "$rounds"); do
  order=(read_counters read_hash read_counters_cached)
  [ $((round % 2)) -eq 1 ] || order=(read_counters_cached read_hash read_counters)
  for p in "${order[@]}"; do
    echo "{\"part\": \"read\", \"variant\": \"$p\", \"r\": $(measure_read "$p" "${reader[$p]}")}" >> "$tmp/rounds.jsonl"
  done
done

python3 - "$tmp/rounds.jsonl" "$tmp/prepare.jsonl" "$threads" "$conns" "$secs" "$events" "$items" "$users" "$candidates" "$cache_ms" <<'PY'
import json, os, statistics, sys
rounds_file, prepare, threads, conns, secs, events, items, users, candidates, cache_ms = sys.argv[1:]
by = {}
for line in open(rounds_file):
    row = json.loads(line)
    by.setdefault((row["part"], row["variant"]), []).append(row["r"])
ctx = {"machine": os.environ["MACHINE"], "build": os.path.basename(os.environ["RANKD_BUILD"]), "shards": 2,
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency",
       "measure": f"median of {len(next(iter(by.values())))} rounds, alternating with the baseline"}
failed = False
for r in (json.loads(l) for l in open(prepare)):
    by.setdefault(("prepare", "aggregated"), []).append(r)
for (part, variant), rows in by.items():
    bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
    if bad:
        failed = True
        print(json.dumps({"name": f"events_{part}_errors", "value": bad, "unit": "count",
                          "variant": variant, "requests": sum(r["requests"] for r in rows)}))

def line(name, unit, key, cur, base, scale=1, **extra):
    vals = [r[key] * scale for r in cur]
    bvals = [r[key] * scale for r in base]
    v, b = statistics.median(vals), statistics.median(bvals)
    d = {"name": name, "value": round(v, 3), "unit": unit, "baseline": round(b, 3),
         "ratio": round(v / b, 3) if b else None, **extra,
         "rounds": [round(x, 2) for x in vals], "spread": [round(min(vals), 2), round(max(vals), 2)],
         "baseline_rounds": [round(x, 2) for x in bvals],
         "baseline_spread": [round(min(bvals), 2), round(max(bvals), 2)], **ctx}
    print(json.dumps(d))

for suffix, families in (("", "item_counts, user_counts (the issue's: an item and a user counters family)"),
                         ("_marks", "item_counts, user_counts, and each impression a mark in the served zset (the demo schema)")):
    ingest = {"events_per_request": int(events), "items": f"Zipf s=1.1 over {items}", "users": f"uniform over {users}",
              "mix": "impression:click 9:1", "families": families,
              "variant": "--events-flush-ms 2 (aggregated)",
              "baseline_command": "rankd serve --shards 2 --events-flush-ms 0 (one increment per event and family, one mark per event), the same redis-server, flushed before each run"}
    cur, base = by[("ingest", "aggregated" + suffix)], by[("ingest", "unaggregated" + suffix)]
    name = "events_ingest" + suffix
    line(f"{name}_events_per_s", "events/s", "events_per_s", cur, base, **ingest)
    line(f"{name}_redis_cpu_us_per_event", "us", "redis_cpu_us_per_event", cur, base,
         note="redis-server's user + system CPU over the run / events accepted; lower is better", **ingest)
    line(f"{name}_rankd_cpu_us_per_event", "us", "rankd_cpu_us_per_event", cur, base,
         note="rankd's user + system CPU (every thread) / events accepted", **ingest)
    line(f"{name}_p99_latency", "ms", "p99_us", cur, base, scale=1e-3, **ingest)
read = {"candidates": int(candidates), "variant": "read_counters: item_counts ctr_1d, clicks_1d",
        "baseline_command": "the read_hash plan (item's quality and likes, plain hash fields) on the same rankd",
        "cache": "none"}
cur, base = by[("read", "read_counters")], by[("read", "read_hash")]
line("events_read_cpu_us_per_req", "us", "cpu_us_per_req", cur, base,
     note="rankd's user + system CPU per request; lower is better", **read)
line("events_read_redis_cpu_us_per_req", "us", "redis_cpu_us_per_req", cur, base,
     note="redis-server's user + system CPU per request", **read)
line("events_read_rps", "req/s", "rps", cur, base, **read)
cached = {**read, "variant": "read_counters_cached: item_counts ctr_1d, clicks_1d, features with cache: true",
          "cache": f"item_counts cache_ms {cache_ms}, rankd serve --cache-mb 64 (a third rankd)"}
cur = by[("read", "read_counters_cached")]
line("events_read_cached_redis_cpu_us_per_req", "us", "redis_cpu_us_per_req", cur, base,
     note="redis-server's user + system CPU per request; the issue's bound: ratio <= 0.5", **cached)
line("events_read_cached_cpu_us_per_req", "us", "cpu_us_per_req", cur, base,
     note="rankd's user + system CPU per request; lower is better", **cached)
line("events_read_cached_rps", "req/s", "rps", cur, base, **cached)
if failed:
    sys.exit("events: requests failed (see the *_errors lines)")
PY
