#!/usr/bin/env bash
# ops/bench alloc — heap allocations per request of rankd serve (2 shards), steady state,
# counted on every thread by an LD_PRELOAD hook (bench/alloc_hook.c: malloc, calloc,
# realloc, the aligned ones; libstdc++'s operator new goes through malloc) into a
# MAP_SHARED file that this script reads from outside (a /metrics scrape would allocate).
# Plans, under wrk (viewer drawn per request from users 0..1999):
#   fixed_rank  tests/plans/fixed_rank (fixed_source 100 -> vm -> sort -> take 20, no Redis;
#               served with --enable-test-ops by the builds that take it)
#   feed        plans/feed, uncached, on the demo data of `rankd seed` (10,000 users,
#   home_light  plans/home_light    seed 1) in a fresh redis-server, as `ops/bench feed`
# Per plan: <plan>_allocs_per_request (allocation calls, realloc included),
# <plan>_bytes_allocated_per_request (bytes requested), and for plans that read Redis
# <plan>_redis_commands_per_request, so that a reader sees whether allocations scale
# with replies. Each is (counter after - counter before) / requests, over one measured
# wrk run of at least MIN_REQUESTS requests (it fails if wrk counts fewer) after a 2 s
# warm-up; the requests are rankd's own count (rankd_rank_requests_total), scraped
# outside the counted window.
#
# BASE_REV=<commit>: also builds that commit (as `ops/bench feed` does), runs it under
# the same hook on the same Redis and plan files, and gives its figure as "baseline"
# and value / baseline as "ratio" (a branch's starting commit shows what the branch changed).
# ALLOC_SITES=1: the hook also records the backtrace of one allocation in
# ALLOC_SITES_EVERY (16) on average; after the JSON lines, stderr gets the top 25 call
# stacks per plan (first 4 frames past the allocator, symbolised by
# bench/alloc_count.py). ALLOC_SITES=md: also the top 10 as Markdown tables.
# Env: PLANS ("fixed_rank feed home_light"), MIN_REQUESTS (10000), WRK_SECONDS (5, at
# least; longer when the warm-up's rate says MIN_REQUESTS needs it), WRK_THREADS (1),
# WRK_CONNS (16), VIEWERS (2000), CACHE_MB (0: rankd's --cache-mb; the shipped plans mark
# their media and features nodes "cache": true, so CACHE_MB=64 counts the cached path).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} min_secs=${WRK_SECONDS:-5}
min_requests=${MIN_REQUESTS:-10000} viewers=${VIEWERS:-2000} cache_mb=${CACHE_MB:-0}
sites=${ALLOC_SITES:-} sample_every=${ALLOC_SITES_EVERY:-16}
read -r -a plans <<< "${PLANS:-fixed_rank feed home_light}"
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
hook="$build/bench/alloc_hook.so"
counts="$root/bench/alloc_count.py"
[ -f "$hook" ] || { echo "alloc: no $hook (not built in sanitizer builds)" >&2; exit 2; }

# The hook must see every kind of allocation, C++ ones included, before it counts rankd's.
RANKD_ALLOC_COUNT_FILE="$tmp/check.bin" LD_PRELOAD="$hook" "$build/bench/alloc_hook_check"
python3 "$counts" check "$tmp/check.bin"

bench_builds_and_plans "${plans[@]}"

start_redis
"${bin[current]}" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2

declare -A port pid
for v in "${variants[@]}"; do
  port[$v]=$(free_port)
  env LD_PRELOAD="$hook" RANKD_ALLOC_COUNT_FILE="$tmp/count_$v.bin" \
    ${sites:+RANKD_ALLOC_SITES=$sample_every} \
    "${bin[$v]}" serve --host 127.0.0.1 --port "${port[$v]}" --shards 2 --plans "$tmp/plans" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error --cache-mb "$cache_mb" \
    $(test_ops_flag "${bin[$v]}") &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
  cp "/proc/${pid[$v]}/maps" "$tmp/maps_$v"
done

# server_counts VARIANT -> "redis_commands rank_requests" from its /metrics (this scrape
# allocates: it is taken outside the counted window).
server_counts() {
  curl -sf "http://127.0.0.1:${port[$1]}/metrics" | awk '
    /^rankd_redis_commands_total[{ ]/ {c += $NF}
    /^rankd_rank_requests_total[{ ]/ {r += $NF}
    END {printf "%d %d\n", c, r}'
}

# measure VARIANT PLAN -> one JSON line of per-request figures over the measured run;
# leaves copies of the counter file before and after it in $tmp/<variant>_<plan>.{0,1}.
measure() {
  local v=$1 plan=$2 url="http://127.0.0.1:${port[$1]}/rank" body warm secs m0 m1 line
  body="{\"plan\":\"$plan\",\"user_id\":\$USER,\"deadline_ms\":2000}"
  warm=$(WRK_BODY=$body WRK_USERS=$viewers wrk -t"$threads" -c"$conns" -d2s \
    -s "$root/bench/wrk_report.lua" "$url" | grep '^{"rps"')
  # Long enough for MIN_REQUESTS at the warm-up's rate, with a margin.
  secs=$(python3 -c 'import json, math, sys
rps = max(json.loads(sys.argv[1])["rps"], 1.0)
print(max(int(sys.argv[2]), min(600, math.ceil(1.5 * int(sys.argv[3]) / rps))))' \
    "$warm" "$min_secs" "$min_requests")
  sleep 0.5  # the warm-up's last requests finish
  m0=$(server_counts "$v")
  cp "$tmp/count_$v.bin" "$tmp/${v}_$plan.0"
  line=$(WRK_BODY=$body WRK_USERS=$viewers wrk -t"$threads" -c"$conns" -d"${secs}s" \
    -s "$root/bench/wrk_report.lua" "$url" | grep '^{"rps"')
  sleep 0.5  # requests wrk left in flight finish (rankd counts them)
  cp "$tmp/count_$v.bin" "$tmp/${v}_$plan.1"
  m1=$(server_counts "$v")
  python3 - "$line" "$m0" "$m1" "$(python3 "$counts" totals "$tmp/${v}_$plan.0")" \
    "$(python3 "$counts" totals "$tmp/${v}_$plan.1")" "$min_requests" <<'PY'
import json, sys
w = json.loads(sys.argv[1])
(c0, r0), (c1, r1) = (map(int, m.split()) for m in sys.argv[2:4])
a0, a1 = json.loads(sys.argv[4]), json.loads(sys.argv[5])
if w["requests"] < int(sys.argv[6]):
    sys.exit(f"alloc: wrk counted {w['requests']} requests, fewer than {sys.argv[6]}")
n = r1 - r0 if r1 > r0 else w["requests"]
d = {k: (a1[k] - a0[k]) / n for k in ("allocations", "malloc", "calloc", "realloc", "aligned",
                                      "frees", "bytes")}
d.update(redis_commands=(c1 - c0) / n, requests=n, wrk_requests=w["requests"],
         errors=w["non2xx"] + w["socket_errors"], rps=w["rps"], threads=a1["threads"])
print(json.dumps(d))
PY
}

: > "$tmp/runs.jsonl"
for plan in "${plans[@]}"; do
  for v in "${variants[@]}"; do
    r=$(measure "$v" "$plan")  # not inside echo's arguments: a failure must stop the run
    echo "{\"variant\": \"$v\", \"plan\": \"$plan\", \"r\": $r}" >> "$tmp/runs.jsonl"
  done
done

base_cmd="LD_PRELOAD=bench/alloc_hook.so ${bin[base]:-} serve --shards 2 --plans $tmp/plans --redis redis_default=redis://127.0.0.1:$REDIS_PORT (BASE_REV ${BASE_SHA:-}), under the same wrk load"
python3 - "$tmp/runs.jsonl" "${BASE_SHA:-}" "$threads" "$conns" "$viewers" <<'PY' |
import json, os, sys
runs_file, base_sha, threads, conns, viewers = sys.argv[1:]
by = {}
for line in open(runs_file):
    row = json.loads(line)
    by[(row["variant"], row["plan"])] = row["r"]
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "wrk": f"wrk -t{threads} -c{conns}", "viewers": int(viewers),
       "measure": "steady state: allocation calls on every rankd thread during one wrk run "
                  "(after a 2 s warm-up) / rankd's /rank requests in it"}
if base_sha:
    ctx["base_rev"] = base_sha[:12]
failed = False
for (variant, plan), cur in by.items():
    if variant != "current":
        continue
    base = by.get(("base", plan))
    for v, r in (("current", cur), ("base", base)):
        if r and r["errors"]:
            failed = failed or r["errors"] > 0.01 * r["wrk_requests"]
            print(json.dumps({"name": f"{plan}_errors", "value": r["errors"], "unit": "count",
                              "variant": v, "requests": r["wrk_requests"]}))
    rows = [("allocations", "allocs_per_request", "allocations",
             {k: round(cur[k], 2) for k in ("malloc", "calloc", "realloc", "aligned", "frees")}),
            ("bytes", "bytes_allocated_per_request", "bytes", {})]
    if cur["redis_commands"] > 0:
        rows.append(("redis_commands", "redis_commands_per_request", "commands", {}))
    for key, name, unit, extra in rows:
        d = {"name": f"{plan}_{name}", "value": round(cur[key], 2), "unit": unit}
        if base:
            d["baseline"] = round(base[key], 2)
            d["ratio"] = round(cur[key] / base[key], 3) if base[key] else None
        d.update(extra, requests=cur["requests"], plan=plan, **ctx)
        print(json.dumps(d))
if failed:
    sys.exit("alloc: over 1% of the requests failed (see the *_errors lines)")
PY
  with_baseline_command "$base_cmd"

# ALLOC_SITES: the sampled call stacks of each plan's measured run.
if [ -n "$sites" ]; then
  for plan in "${plans[@]}"; do
    for v in "${variants[@]}"; do
      per_req=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row["variant"] == sys.argv[2] and row["plan"] == sys.argv[3]:
        print(row["r"]["allocations"])' "$tmp/runs.jsonl" "$v" "$plan")
      title=$plan
      [ "$v" = base ] && title="$plan (BASE_REV)"
      fmts=("--top 25")
      [ "$sites" = md ] && fmts+=("--markdown --top 10")
      for fmt in "${fmts[@]}"; do
        # shellcheck disable=SC2086  # the format's flags are separate words
        python3 "$counts" sites --before "$tmp/${v}_$plan.0" --after "$tmp/${v}_$plan.1" \
          --maps "$tmp/maps_$v" --allocs "$per_req" --title "$title" $fmt >&2
        echo >&2
      done
    done
  done
fi
