#!/usr/bin/env bash
# ops/bench cache — what the shard cache saves on the feed plans of `ops/bench feed`
# (feed, home_light) under a steady stream of writes: rankd serve (2 shards) with
# --cache-mb 64 against the same build with --cache-mb 0, on the seeded demo data
# (`rankd seed`, 10,000 users, seed 1) in one fresh redis-server, under wrk with a viewer
# drawn per request from users 0..1999 (as feed.sh), while bench/cache_writer.py writes
# 200 `HSET item:<i> likes` and 20 `LPUSH media:<u> <item>` per second (random existing
# items and authors) for the whole run.
#
# Both rankds load copies of the plans whose media and features nodes have
# "cache": true: the uncached one runs the same plans (cache: true does nothing without
# --cache-mb). Rounds alternate cached / uncached (which goes first swaps every round)
# on the same Redis, so that both see the same machine and the same writes. Per plan,
# each figure the median of ROUNDS rounds, cached as "value", uncached as "baseline":
#   <plan>_rps, <plan>_p50_latency, <plan>_p99_latency
#   <plan>_cpu_us_per_req         rankd's user + system CPU, every thread (target ratio <= 0.5)
#   <plan>_redis_cpu_us_per_req   Redis's used_cpu_sys + used_cpu_user (INFO cpu) over the
#                                 measured run / requests; writes and invalidation pushes
#                                 included (target ratio <= 0.25)
#   <plan>_redis_commands_per_request  (rankd_redis_commands_total deltas)
# each with "ratio" (value / baseline, the medians') and "round_ratios" (each round's
# cached / uncached) with their "median_round_ratio": on a noisy machine the two differ.
# and of the cached rankd alone, from its /metrics (summed over shards):
#   <plan>_hit_ratio              hits / (hits + misses) over the measured run
#   <plan>_invalidations_per_s    rankd_cache_invalidations_total delta / the run's seconds
#   <plan>_cache_bytes            rankd_cache_bytes at the end of the plan's last round
# The writer's measured rates (INFO commandstats) are in every line ("writes_per_s").
#
# Before the rounds, each rankd serves each plan for WARM_SECONDS (the cache fills; the
# uncached one sees the same); each measured run is preceded by 1 s of the same load.
# Env: ROUNDS (3), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (10), WARM_SECONDS (5),
# VIEWERS (2000), TRACKING (bcast, rankd's default | default: the cached rankd's
# --cache-tracking; run both to compare the modes),
# CACHE_MB (64), HSETS_PER_S (200), LPUSHES_PER_S (20), PLANS ("feed home_light"),
# FLOOR (0; 1: also home_light_floor, home_light's uncacheable part alone: its viewer,
# follow + recs, dedupe, seen filter, sort and take 30, without media, features or
# scoring, so no cache node. Its CPU is what a cached home_light request costs at least,
# and its *_floor_share line divides it by home_light's uncached CPU: the goal of 0.5
# can only be met when that share is well below it. docs/benchmarks.md has the figures),
# HOT (0; 1: also home_light_hot, cached home_light over HOT_VIEWERS (3) viewers instead
# of VIEWERS: every lookup, every Redis key and every branch of the request is hot in the
# CPU's caches and predictors, better than any real traffic gets. Its *_hot_share line
# divides its CPU by home_light's uncached: what the ratio would be if the cached path's
# memory and branch misses cost nothing).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-3} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-10}
warm=${WARM_SECONDS:-5} viewers=${VIEWERS:-2000} tracking=${TRACKING:-bcast}
cache_mb=${CACHE_MB:-64} hsets=${HSETS_PER_S:-200} lpushes=${LPUSHES_PER_S:-20}
read -r -a plans <<< "${PLANS:-feed home_light}"
floor=${FLOOR:-0} hot=${HOT:-0} hot_viewers=${HOT_VIEWERS:-3}
for extra in floor hot; do
  [ "${!extra}" = 1 ] || continue
  [[ " ${plans[*]} " == *" home_light "* ]] || { echo "cache: ${extra^^}=1 needs home_light in PLANS" >&2; exit 2; }
  plans+=("home_light_$extra")
done
case $tracking in default | bcast) ;; *) echo "cache: TRACKING is bcast or default" >&2; exit 2 ;; esac
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
rankd=$build/src/cli/rankd
users=10000 per_author=20  # rankd seed's --users and its default --media

# The cached copies: "cache": true on every media and features node.
mkdir -p "$tmp/plans"
cp "$root"/plans/*.model.json "$tmp/plans/" 2>/dev/null || true
for p in "${plans[@]}"; do
  [[ $p == *_hot ]] && continue  # home_light itself, over fewer viewers
  python3 - "$root/plans/${p%_floor}.plan.json" "$tmp/plans/$p.plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
if sys.argv[2].endswith("_floor.plan.json"):  # home_light without media, features, scoring
    nodes = {n["node_id"]: n for n in plan["nodes"]}
    assert set(nodes) == {"v", "f", "m", "r", "c", "d", "seen", "h", "s", "ok", "o", "t"}, nodes
    plan["name"] += "_floor"
    nodes["c"]["inputs"] = ["f", "r"]
    nodes["o"]["inputs"] = ["seen"]
    nodes["o"]["params"]["key"] = "id"
    plan["nodes"] = [nodes[k] for k in ("v", "f", "r", "c", "d", "seen", "o", "t")]
    plan["expr_table"], plan["pred_table"] = {}, {}
    plan["output"]["columns"] = ["id"]
    json.dump(plan, open(sys.argv[2], "w"), indent=2)
    sys.exit(0)
cached = 0
for node in plan["nodes"]:
    if node["op"] in ("media", "features"):
        node.setdefault("params", {})["cache"] = True
        cached += 1
if not cached:
    sys.exit(f"cache: {sys.argv[1]} has no media or features node to cache")
json.dump(plan, open(sys.argv[2], "w"), indent=2)
PY
done

start_redis
redis_cli=(redis-cli -h 127.0.0.1 -p "$REDIS_PORT")
"$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users "$users" --seed 1 >&2

variants=(cached uncached)
declare -A flags=([cached]="--cache-mb $cache_mb --cache-tracking $tracking" [uncached]="--cache-mb 0")
declare -A port pid
for v in "${variants[@]}"; do
  port[$v]=$(free_port)
  # shellcheck disable=SC2086  # the variant's flags are words
  "$rankd" serve --host 127.0.0.1 --port "${port[$v]}" --shards 2 --plans "$tmp/plans" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error ${flags[$v]} &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
done

# The writer, from before the warm-up to the end.
python3 "$root/bench/cache_writer.py" "$REDIS_PORT" "$users" $((users * per_author)) \
  "$hsets" "$lpushes" &
writer_pid=$!
bench_pids+=("$writer_pid")

# redis_cpu_us: Redis's own used_cpu_sys + used_cpu_user, in µs.
redis_cpu_us() {
  "${redis_cli[@]}" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" {s += $2} END {printf "%.0f\n", s * 1e6}'
}
# writes: HSET and LPUSH calls so far (INFO commandstats).
writes() {
  "${redis_cli[@]}" info commandstats | tr -d '\r' | awk -F'[:=,]' '
    $1 == "cmdstat_hset" {h = $3} $1 == "cmdstat_lpush" {l = $3} END {printf "%d %d\n", h, l}'
}
# rankd_counts VARIANT -> "commands hits misses invalidations bytes" from its /metrics,
# summed over shards and endpoints (0 for the series an uncached rankd lacks).
rankd_counts() {
  curl -sf "http://127.0.0.1:${port[$1]}/metrics" | awk '
    function m(name) { return index($0, name "{") == 1 || index($0, name " ") == 1 }
    m("rankd_redis_commands_total") {c += $NF}
    m("rankd_cache_hits_total") {h += $NF}
    m("rankd_cache_misses_total") {x += $NF}
    m("rankd_cache_invalidations_total") {i += $NF}
    m("rankd_cache_bytes") {b += $NF}
    END {printf "%d %d %d %d %d\n", c, h, x, i, b}'
}

wrk_run() {  # wrk_run VARIANT PLAN SECONDS [wrk flags]: the load, wrk's output on stdout
  local v=$1 plan=$2 s=$3 users=$viewers
  shift 3
  if [[ $plan == *_hot ]]; then plan=${plan%_hot} users=$hot_viewers; fi
  # A 2 s deadline, as feed.sh: this measures throughput and cost.
  WRK_BODY="{\"plan\":\"$plan\",\"user_id\":\$USER,\"deadline_ms\":2000}" WRK_USERS=$users \
    wrk -t"$threads" -c"$conns" -d"${s}s" "$@" -s "$root/bench/wrk_report.lua" \
    "http://127.0.0.1:${port[$v]}/rank"
}

# measure VARIANT PLAN -> one JSON line: wrk's figures plus the CPU, Redis and cache
# deltas over the measured run only.
measure() {
  local v=$1 plan=$2 c0 c1 t0 t1 k0 k1 w0 w1 s0 s1 line
  wrk_run "$v" "$plan" 1 >/dev/null
  c0=$(rankd_counts "$v"); t0=$(cpu_ticks "${pid[$v]}"); k0=$(redis_cpu_us); w0=$(writes)
  s0=$(date +%s.%N)
  line=$(wrk_run "$v" "$plan" "$secs" --latency | grep '^{"rps"')
  s1=$(date +%s.%N)
  c1=$(rankd_counts "$v"); t1=$(cpu_ticks "${pid[$v]}"); k1=$(redis_cpu_us); w1=$(writes)
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
n = max(d["requests"], 1)
t0, t1, k0, k1, s0, s1 = map(float, sys.argv[2:8])
c0, h0, x0, i0, _ = map(int, sys.argv[8].split()); c1, h1, x1, i1, b1 = map(int, sys.argv[9].split())
w0 = list(map(int, sys.argv[10].split())); w1 = list(map(int, sys.argv[11].split()))
secs = s1 - s0
d["cpu_us_per_req"] = (t1 - t0) * 1e6 / os.sysconf("SC_CLK_TCK") / n
d["redis_cpu_us_per_req"] = (k1 - k0) / n
d["redis_commands_per_request"] = (c1 - c0) / n
d["hit_ratio"] = (h1 - h0) / max(h1 - h0 + x1 - x0, 1)
d["invalidations_per_s"] = (i1 - i0) / secs
d["cache_bytes"] = b1
d["hsets_per_s"] = (w1[0] - w0[0]) / secs
d["lpushes_per_s"] = (w1[1] - w0[1]) / secs
print(json.dumps(d))' "$line" "$t0" "$t1" "$k0" "$k1" "$s0" "$s1" "$c0" "$c1" "$w0" "$w1"
}

for plan in "${plans[@]}"; do
  for v in "${variants[@]}"; do wrk_run "$v" "$plan" "$warm" >/dev/null; done
done
run_rounds cached uncached
kill "$writer_pid" 2>/dev/null || true

base_cmd="$rankd serve --host 127.0.0.1 --port ${port[uncached]} --shards 2 --plans $tmp/plans --redis redis_default=redis://127.0.0.1:$REDIS_PORT --log-level error --cache-mb 0 (the same build, plans and Redis), under the same wrk load and writes"
python3 - "$tmp/rounds.jsonl" "$threads" "$conns" "$secs" "$viewers" "${plans[*]}" "$tracking" \
  "$cache_mb" "$hsets" "$lpushes" "$warm" "$hot_viewers" <<'PY' |
import json, os, statistics, sys
(rounds_file, threads, conns, secs, viewers, plan_names, tracking, cache_mb, hsets, lpushes, warm,
 hot_viewers) = sys.argv[1:]
by = {}
for line in open(rounds_file):
    row = json.loads(line)
    by.setdefault((row["variant"], row["plan"]), []).append(row["r"])
all_rows = [r for rows in by.values() for r in rows]
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "cache_mb": int(cache_mb), "tracking": tracking,
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "writer": f"{hsets} HSET item likes + {lpushes} LPUSH media per s",
       "writes_per_s": {"hset": round(statistics.median(r["hsets_per_s"] for r in all_rows), 1),
                        "lpush": round(statistics.median(r["lpushes_per_s"] for r in all_rows), 1)},
       "measure": f"median of {len(next(iter(by.values())))} rounds, alternating with "
                  f"--cache-mb 0, after {warm} s of warm-up per plan"}

def summary(rows, key, scale):
    vals = [r[key] * scale for r in rows]
    return statistics.median(vals), [round(v, 3) for v in vals]

failed = False
for plan in plan_names.split():
    cur, base = by[("cached", plan)], by[("uncached", plan)]
    for variant, rows in (("cached", cur), ("uncached", base)):
        bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
        if bad:
            total = sum(r["requests"] for r in rows)
            failed = failed or bad > 0.01 * total
            print(json.dumps({"name": f"{plan}_errors", "value": bad, "unit": "count",
                              "variant": variant, "requests": total}))
    for key, name, unit, scale, extra in (
            ("rps", "rps", "req/s", 1, {}),
            ("redis_cpu_us_per_req", "redis_cpu_us_per_req", "us", 1,
             {"note": "Redis's used_cpu_sys + used_cpu_user (INFO cpu) per request, the "
                      "writer's commands and the invalidation pushes included", "target": "ratio <= 0.25"}),
            ("cpu_us_per_req", "cpu_us_per_req", "us", 1,
             {"note": "rankd's user + system CPU (every thread) per request", "target": "ratio <= 0.5"}),
            ("p50_us", "p50_latency", "ms", 1e-3, {}),
            ("p99_us", "p99_latency", "ms", 1e-3, {}),
            ("redis_commands_per_request", "redis_commands_per_request", "commands", 1, {})):
        value, vals = summary(cur, key, scale)
        bvalue, bvals = summary(base, key, scale)
        d = {"name": f"{plan}_{name}", "value": round(value, 3), "unit": unit,
             "baseline": round(bvalue, 3), "ratio": round(value / bvalue, 3) if bvalue else None}
        d.update(extra, rounds=vals, spread=[min(vals), max(vals)],
                 baseline_rounds=bvals, baseline_spread=[min(bvals), max(bvals)], plan=plan, **ctx)
        # Round i's cached and uncached runs are neighbours in time: their ratio sees the
        # same machine state, which the ratio of the two medians (the "ratio") may not.
        if all(bvals):
            per_round = [round(a / b, 3) for a, b in zip(vals, bvals)]
            d.update(round_ratios=per_round, median_round_ratio=round(statistics.median(per_round), 3))
        print(json.dumps(d))
    for key, name, unit, extra in (
            ("hit_ratio", "hit_ratio", "ratio",
             {"note": "rankd_cache_hits_total / (hits + misses), deltas over the measured run"}),
            ("invalidations_per_s", "invalidations_per_s", "1/s",
             {"note": "rankd_cache_invalidations_total delta (every shard) / the run's seconds"})):
        value, vals = summary(cur, key, 1)
        d = {"name": f"{plan}_{name}", "value": round(value, 3), "unit": unit}
        d.update(extra, rounds=vals, spread=[min(vals), max(vals)], plan=plan, **ctx)
        print(json.dumps(d))
    vals = [r["cache_bytes"] for r in cur]
    print(json.dumps({"name": f"{plan}_cache_bytes", "value": vals[-1], "unit": "bytes",
                      "note": "rankd_cache_bytes (every shard) at the end of the plan's last round",
                      "rounds": vals, "plan": plan, **ctx}))
if ("cached", "home_light_floor") in by:
    floor, _ = summary(by[("cached", "home_light_floor")], "cpu_us_per_req", 1)
    whole, _ = summary(by[("uncached", "home_light")], "cpu_us_per_req", 1)
    print(json.dumps({"name": "home_light_floor_share", "value": round(floor / whole, 3),
                      "unit": "ratio", "floor_us": round(floor, 1), "uncached_us": round(whole, 1),
                      "note": "home_light_floor's CPU per request (cached rankd) / home_light's "
                              "uncached: what the cache can never take off", **ctx}))
if ("cached", "home_light_hot") in by:
    hot, _ = summary(by[("cached", "home_light_hot")], "cpu_us_per_req", 1)
    whole, _ = summary(by[("uncached", "home_light")], "cpu_us_per_req", 1)
    print(json.dumps({"name": "home_light_hot_share", "value": round(hot / whole, 3),
                      "unit": "ratio", "hot_us": round(hot, 1), "uncached_us": round(whole, 1),
                      "hot_viewers": int(hot_viewers),
                      "note": "cached home_light over a handful of viewers (every lookup, key and "
                              "branch hot) / home_light's uncached over all viewers: the ratio "
                              "if the cached path's cache and branch misses cost nothing", **ctx}))
if failed:
    sys.exit("cache: over 1% of the requests failed (see the *_errors lines)")
PY
  with_baseline_command "$base_cmd"
