#!/usr/bin/env bash
# ops/bench instructions — CPU instructions per /rank request, counted exactly by
# Valgrind's cachegrind (Ir), so that a change's CPU cost can be told apart on a shared
# or virtual machine where CPU time per request moves ±10 % between rounds (and where
# the hardware counters of `perf stat` are not offered).
# rankd serve (1 shard) under cachegrind on the seeded demo data (`rankd seed`, 10,000
# users, seed 1) in a fresh redis-server; one client sends REQUESTS requests in sequence
# (viewers spread over users 1..5000); the figure is (Ir after 2·REQUESTS − Ir after
# REQUESTS) / REQUESTS: start-up, plan loading and shutdown cancel out.
# Per plan: <plan>_instructions_per_req. A count under cachegrind is the program's own
# (every thread's user-space instructions; not the kernel's TCP work, not time spent
# waiting), repeatable to well under 1 % from run to run.
# BASE_REV=<commit>: also builds that commit (as `ops/bench feed` does) and counts it on
# the same Redis and plan files: "baseline" and "ratio" (value / baseline).
# BASELINE_FLAGS="<serve flags>": the baseline is the current build run with these flags
# added, e.g. `PLANS=fixed_rank BASELINE_FLAGS=--no-metrics REQUESTS=2000` for what
# metrics cost a request. Not together with BASE_REV.
# Env: PLANS ("feed home_light"; test fixtures such as fixed_rank too), REQUESTS (150),
# BASE_REV (none), BASELINE_FLAGS (none).
# Needs valgrind (on the machines of docs/benchmarks.md; `apt-get install valgrind`).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
requests=${REQUESTS:-150}
read -r -a plans <<< "${PLANS:-feed home_light}"
command -v valgrind >/dev/null || { echo "instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
source "$root/bench/lib.sh"
tmp=$BENCH_TMP

if [ -n "${BASE_REV:-}" ] && [ -n "${BASELINE_FLAGS:-}" ]; then
  echo "instructions: BASE_REV and BASELINE_FLAGS are exclusive (each takes the baseline slot)" >&2
  exit 2
fi
bench_builds_and_plans "${plans[@]}"
declare -A flags=([current]="" [base]="")
if [ -n "${BASELINE_FLAGS:-}" ]; then
  variants+=(base)
  bin[base]=${bin[current]}
  flags[base]=$BASELINE_FLAGS
fi
start_redis
"${bin[current]}" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2

# count VARIANT PLAN N: the Ir of a whole rankd run that served N requests of PLAN.
count() {
  local port pid out="$tmp/cg.$1.$2.$3"
  port=$(free_port)
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out" \
    "${bin[$1]}" serve --host 127.0.0.1 --port "$port" --shards 1 --plans "$tmp/plans" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error \
    $(test_ops_flag "${bin[$1]}") ${flags[$1]} 2>"$tmp/valgrind.log" &
  pid=$!
  python3 - "$port" "$2" "$3" <<'PY' >&2
import http.client, json, sys, time
port, plan, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
deadline = time.time() + 120  # start-up under valgrind takes seconds
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/readyz")
        if c.getresponse().status == 200:
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("instructions: rankd under valgrind did not get ready")
    time.sleep(0.2)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for i in range(n):
    body = {"plan": plan, "user_id": 1 + (i * 37) % 5000, "deadline_ms": 60000}
    c.request("POST", "/rank", json.dumps(body))
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"instructions: /rank answered {r.status} under valgrind")
PY
  kill -TERM "$pid"
  wait "$pid" || { echo "instructions: rankd exited non-zero (see $tmp/valgrind.log)" >&2; return 1; }
  awk '/^summary:/ {print $2}' "$out"
}

for plan in "${plans[@]}"; do
  declare -A per=()
  for v in "${variants[@]}"; do
    a=$(count "$v" "$plan" "$requests")
    b=$(count "$v" "$plan" $((2 * requests)))
    per[$v]=$(((b - a) / requests))
  done
  line="{\"name\": \"${plan}_instructions_per_req\", \"value\": ${per[current]}, \"unit\": \"instructions\""
  if [ -n "${per[base]:-}" ]; then
    line+=", \"baseline\": ${per[base]}, \"ratio\": $(python3 -c "print(round(${per[current]} / ${per[base]}, 4))")"
    if [ -n "${BASE_REV:-}" ]; then
      line+=", \"base_rev\": \"${BASE_SHA:0:12}\""
    else
      line+=", \"baseline_flags\": \"$BASELINE_FLAGS\""
    fi
  fi
  line+=", \"requests\": $requests, \"shards\": 1, \"tool\": \"valgrind --tool=cachegrind --cache-sim=no\", \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}"
  echo "$line"
  unset per
done
