#!/usr/bin/env bash
# ops/bench schema — what a declared schema's string ids, JSON documents and scored zsets
# cost against the same plan over i64 ids and hashes: examples/marketplace/'s `market`
# plan, once over its native schema (plans/: str account and listing ids, listings as
# JSON documents, zsets of str members) and once over its twin (i64/: the same families
# with i64 ids, listings as hashes), each holding the same accounts, listings, lists and
# values from one seed (examples/marketplace/generate --seed 1, db 0 and db 1 of one fresh
# redis-server). Two rankd serve (2 shards, --cache-mb 0, the current build) under wrk with
# an account drawn per request from 0..VIEWERS-1, rounds alternating between them (which
# goes first swaps every round). Figures, the native (string/JSON) one as "value" and the
# i64/hash one as "baseline", medians of ROUNDS rounds, with "ratio" and each round's
# ratio ("round_ratios"):
#   schema_cpu_us_per_req          rankd's user + system CPU, every thread (target <= 1.3)
#   schema_allocs_per_request      heap allocation calls, every thread (bench/alloc_hook.c,
#                                  as `ops/bench alloc`; absent when the hook is not built)
#   schema_rps, schema_p50_latency, schema_p99_latency
#   schema_redis_commands_per_request
# Env: ROUNDS (5), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (8), VIEWERS (2000).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-5} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-8}
viewers=${VIEWERS:-2000}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
rankd="$build/src/cli/rankd"
hook="$build/bench/alloc_hook.so"
counts="$root/bench/alloc_count.py"
example="$root/examples/marketplace"

start_redis
# generate writes through its own small client (examples/marketplace/mklib.py): any python3.
"$example/generate" --redis "redis://127.0.0.1:$REDIS_PORT/0" --seed 1 --encoding native >&2
"$example/generate" --redis "redis://127.0.0.1:$REDIS_PORT/1" --seed 1 --encoding i64 >&2

declare -A plans=([json]="$example/plans" [hash]="$example/i64")
declare -A db=([json]=0 [hash]=1)
declare -A body=([json]='{"plan":"market","user_id":"acct-$USER","deadline_ms":2000}'
                 [hash]='{"plan":"market","user_id":$USER,"deadline_ms":2000}')
declare -A user_format=([json]='%06d' [hash]='%d')
declare -A port pid
for v in json hash; do
  port[$v]=$(free_port)
  preload=()
  [ -f "$hook" ] && preload=(env LD_PRELOAD="$hook" RANKD_ALLOC_COUNT_FILE="$tmp/count_$v.bin")
  "${preload[@]}" "$rankd" serve --host 127.0.0.1 --port "${port[$v]}" --shards 2 \
    --plans "${plans[$v]}" --redis "redis_default=redis://127.0.0.1:$REDIS_PORT/${db[$v]}" \
    --log-level error --cache-mb 0 &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
done

# server_counts VARIANT -> "redis_commands rank_requests" (outside the counted windows).
server_counts() {
  curl -sf "http://127.0.0.1:${port[$1]}/metrics" | awk '
    /^rankd_redis_commands_total[{ ]/ {c += $NF}
    /^rankd_rank_requests_total[{ ]/ {r += $NF}
    END {printf "%d %d\n", c, r}'
}
allocs() {  # allocs VARIANT -> allocation calls so far (0 without the hook)
  if [ -f "$tmp/count_$1.bin" ]; then
    python3 "$counts" totals "$tmp/count_$1.bin" | python3 -c 'import json,sys; print(json.load(sys.stdin)["allocations"])'
  else
    echo 0
  fi
}

measure() {  # measure VARIANT -> one JSON line over the measured run
  local v=$1 url="http://127.0.0.1:${port[$1]}/rank" t0 t1 m0 m1 a0 a1 line
  WRK_BODY=${body[$v]} WRK_USERS=$viewers WRK_USER_FORMAT=${user_format[$v]} \
    wrk -t"$threads" -c"$conns" -d1s -s "$root/bench/wrk_report.lua" "$url" >/dev/null
  sleep 0.3
  m0=$(server_counts "$v"); a0=$(allocs "$v"); t0=$(cpu_ticks "${pid[$v]}")
  line=$(WRK_BODY=${body[$v]} WRK_USERS=$viewers WRK_USER_FORMAT=${user_format[$v]} \
    wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$root/bench/wrk_report.lua" "$url" |
    grep '^{"rps"')
  t1=$(cpu_ticks "${pid[$v]}")
  sleep 0.3
  a1=$(allocs "$v"); m1=$(server_counts "$v")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
(c0, r0), (c1, r1) = (map(int, m.split()) for m in sys.argv[4:6])
n = max(r1 - r0, 1)
d["cpu_us_per_req"] = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / os.sysconf("SC_CLK_TCK") / max(d["requests"], 1)
d["allocs_per_request"] = (int(sys.argv[7]) - int(sys.argv[6])) / n
d["redis_commands_per_request"] = (c1 - c0) / n
print(json.dumps(d))' "$line" "$t0" "$t1" "$m0" "$m1" "$a0" "$a1"
}

: > "$tmp/rounds.jsonl"
for round in $(seq "$rounds"); do
  order=(json hash)
  [ $((round % 2)) -eq 0 ] && order=(hash json)
  for v in "${order[@]}"; do
    echo "{\"round\": $round, \"variant\": \"$v\", \"r\": $(measure "$v")}" >> "$tmp/rounds.jsonl"
  done
done

python3 - "$tmp/rounds.jsonl" "$threads" "$conns" "$secs" "$viewers" "$([ -f "$hook" ] && echo 1)" <<'PY'
import json, os, statistics, sys
rounds_file, threads, conns, secs, viewers, hooked = sys.argv[1:]
by = {"json": [], "hash": []}
for line in open(rounds_file):
    row = json.loads(line)
    by[row["variant"]].append(row["r"])
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "measure": f"median of {len(by['json'])} rounds, alternating",
       "value_is": "examples/marketplace/plans (str ids, json listings, zsets)",
       "baseline_is": "examples/marketplace/i64 (i64 ids, hash listings), same data"}
bad = sum(r["non2xx"] + r["socket_errors"] for rs in by.values() for r in rs)
if bad:
    sys.exit(f"schema: {bad} requests failed")
figures = [("cpu_us_per_req", "us", 1), ("rps", "req/s", 1), ("p50_us", "ms", 1e-3),
           ("p99_us", "ms", 1e-3), ("redis_commands_per_request", "count", 1)]
if hooked:
    figures.insert(1, ("allocs_per_request", "count", 1))
names = {"p50_us": "p50_latency", "p99_us": "p99_latency"}
for key, unit, scale in figures:
    cur = [r[key] * scale for r in by["json"]]
    base = [r[key] * scale for r in by["hash"]]
    value, baseline = statistics.median(cur), statistics.median(base)
    ratios = [c / b if b else None for c, b in zip(cur, base)]
    out = {"name": f"schema_{names.get(key, key)}", "value": round(value, 3), "unit": unit,
           "baseline": round(baseline, 3), "ratio": round(value / baseline, 3) if baseline else None,
           "rounds": [round(x, 2) for x in cur], "baseline_rounds": [round(x, 2) for x in base],
           "round_ratios": [round(x, 3) if x else None for x in ratios]}
    if key == "cpu_us_per_req":
        out["target"] = "ratio <= 1.3"
    out.update(ctx)
    print(json.dumps(out))
PY
