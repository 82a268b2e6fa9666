#!/usr/bin/env bash
# ops/bench pages_cursor — what a later page of `feed` costs the server against its first
# page, in the same run (docs/api.md, "Pages"). One rankd serve (current
# build, 2 shards) on one seeded redis-server (`rankd seed`, 10,000 users, seed 1):
#   first  {"plan":"feed","user_id":U,"page_size":PAGE_SIZE}: runs the plan, writes the
#          ranking's snapshot to Redis (SET ... PX, and EVAL of the quota script in
#          the same batch), answers PAGE_SIZE items + a cursor
#   later  {"plan":"feed","user_id":U,"cursor":C}: one Redis round trip (two GETRANGEs),
#          no plan run; C is the first page's cursor of one of VIEWERS viewers, fetched
#          before the rounds (a cursor can be asked again: the same page each time)
# Closed loop, wrk -tWRK_THREADS -cWRK_CONNS, a viewer drawn per request from users
# 0..VIEWERS-1 (later: from the viewers that got a cursor, bench/wrk_bodies.lua); rounds
# alternate first / later (the order reverses every round), each a 1 s warm-up then
# WRK_SECONDS measured. Figures (later = "value", first =
# "baseline", "ratio" = later / first):
#   pages_later_cpu_us_per_req   rankd's user + system CPU (every thread, its own
#                                /proc/PID/task/*/stat) per request (target ratio <= 0.2)
#   pages_later_p50_latency, pages_later_p99_latency, pages_later_rps
#   pages_later_redis_commands_per_request (SET + EVAL for a first page's snapshot, besides
#                                the plan's; 2 GETRANGEs for a later page)
# Each figure is the median of ROUNDS rounds, with the rounds and each round's ratio.
# Env: ROUNDS (5), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (8), VIEWERS (2000),
# PAGE_SIZE (20), CACHE_MB (0).
# Time: 2 x ROUNDS x (WRK_SECONDS + about 2 s), under 2 minutes with the defaults.
#
# Written to be joined with bench/pages.sh: sourced, it only defines pages_cursor_setup,
# pages_cursor_rounds and pages_cursor_report (and pc_* helpers), to be called in that
# order once bench/lib.sh is sourced (set -euo pipefail, RANKD_BUILD and RANKD_ROOT set);
# run alone (ops/bench pages_cursor), the last lines do that.

# pages_cursor_setup: the Redis, its data, the server (pc_port, pc_pid) and the later
# pages' bodies ($BENCH_TMP/later_bodies.jsonl).
pages_cursor_setup() {
  pc_rounds=${ROUNDS:-5} pc_threads=${WRK_THREADS:-1} pc_conns=${WRK_CONNS:-16}
  pc_secs=${WRK_SECONDS:-8} pc_viewers=${VIEWERS:-2000} pc_page_size=${PAGE_SIZE:-20}
  pc_cache_mb=${CACHE_MB:-0}
  local rankd="$RANKD_BUILD/src/cli/rankd" root=$RANKD_ROOT
  start_redis
  "$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2
  # The tree's plans and models, not its experiments.json: every viewer runs feed itself.
  mkdir -p "$BENCH_TMP/pc_plans"
  cp "$root"/plans/*.plan.json "$BENCH_TMP/pc_plans/"
  cp "$root"/plans/*.model.json "$BENCH_TMP/pc_plans/" 2>/dev/null || true
  pc_port=$(free_port)
  # No snapshot byte rate to speak of: every first page writes its snapshot, as measured.
  # No quota of chains either: the first-page rounds start new chains for the viewers whose
  # cursors the later rounds replay, and past --page-max-snapshots (4) per plan and user
  # the oldest chain ends: those later pages would answer 410 cursor_expired.
  "$rankd" serve --host 127.0.0.1 --port "$pc_port" --shards 2 --plans "$BENCH_TMP/pc_plans" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error \
    --cache-mb "$pc_cache_mb" --page-write-bytes-per-s 1099511627776 --page-max-snapshots 1000 &
  pc_pid=$!
  bench_pids+=("$pc_pid")
  wait_http "http://127.0.0.1:$pc_port/readyz"
  # Each viewer's first page once: its cursor is the body of its later page.
  python3 - "$pc_port" "$pc_viewers" "$pc_page_size" "$BENCH_TMP/later_bodies.jsonl" <<'PY'
import http.client, json, sys
port, viewers, page_size, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
n = 0
with open(out, "w") as f:
    for user in range(viewers):
        c.request("POST", "/rank", json.dumps({"plan": "feed", "user_id": user,
                                               "page_size": page_size, "deadline_ms": 2000}))
        r = c.getresponse()
        body = json.loads(r.read())
        if r.status == 200 and "cursor" in body:
            f.write(json.dumps({"plan": "feed", "user_id": user, "cursor": body["cursor"],
                                "deadline_ms": 2000}) + "\n")
            n += 1
if n < viewers // 2:
    sys.exit(f"pages_cursor: only {n} of {viewers} viewers got a cursor")
print(f"pages_cursor: {n} of {viewers} viewers have a second page", file=sys.stderr)
PY
}

# pc_counts -> "commands ok_later": rankd's Redis commands and its later pages answered
# ok, from /metrics.
pc_counts() {
  curl -sf --max-time 5 "http://127.0.0.1:$pc_port/metrics" | awk '
    /^rankd_redis_commands_total[{ ]/ {c += $NF}
    /^rankd_page_requests_total[{ ]/ && index($0, "outcome=\"ok\"") {ok += $NF}
    END {printf "%d %d\n", c, ok}'
}

# pc_wrk VARIANT SECONDS -> wrk's JSON line.
pc_wrk() {
  local url="http://127.0.0.1:$pc_port/rank" root=$RANKD_ROOT
  if [ "$1" = later ]; then
    WRK_BODIES_FILE=$BENCH_TMP/later_bodies.jsonl \
      wrk -t"$pc_threads" -c"$pc_conns" -d"$2s" --latency -s "$root/bench/wrk_bodies.lua" "$url"
  else
    # shellcheck disable=SC2016  # $USER is wrk_report.lua's placeholder, not the shell's
    WRK_BODY='{"plan":"feed","user_id":$USER,"page_size":'"$pc_page_size"',"deadline_ms":2000}' \
      WRK_USERS=$pc_viewers \
      wrk -t"$pc_threads" -c"$pc_conns" -d"$2s" --latency -s "$root/bench/wrk_report.lua" "$url"
  fi | grep '^{"rps"'
}

# pc_measure VARIANT -> one JSON line: wrk's figures, rankd's CPU and Redis commands per
# request over the measured run.
pc_measure() {
  local v=$1 t0 t1 m0 m1 line
  pc_wrk "$v" 1 >/dev/null
  m0=$(pc_counts); t0=$(cpu_ticks "$pc_pid")
  line=$(pc_wrk "$v" "$pc_secs")
  t1=$(cpu_ticks "$pc_pid"); m1=$(pc_counts)
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
c0, ok0 = map(int, sys.argv[4].split()); c1, ok1 = map(int, sys.argv[5].split())
n = max(d["requests"], 1)
d["cpu_us_per_req"] = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / os.sysconf("SC_CLK_TCK") / n
d["redis_commands_per_request"] = (c1 - c0) / n
d["later_ok"] = ok1 - ok0
print(json.dumps(d))' "$line" "$t0" "$t1" "$m0" "$m1"
}

# pages_cursor_rounds: pc_rounds rounds of first and later, the order reversed every other
# round so that the shared machine's drift falls on both alike; one JSON line per measure
# in $BENCH_TMP/pc_rounds.jsonl.
pages_cursor_rounds() {
  local round v order
  : >"$BENCH_TMP/pc_rounds.jsonl"
  for round in $(seq "$pc_rounds"); do
    order=(first later)
    [ $((round % 2)) -eq 0 ] && order=(later first)
    for v in "${order[@]}"; do
      echo "{\"round\": $round, \"variant\": \"$v\", \"r\": $(pc_measure "$v")}" >>"$BENCH_TMP/pc_rounds.jsonl"
    done
  done
}

pages_cursor_report() {
  python3 - "$BENCH_TMP/pc_rounds.jsonl" "$pc_threads" "$pc_conns" "$pc_secs" "$pc_viewers" \
    "$pc_page_size" "$pc_cache_mb" <<'PY' |
import json, os, statistics, sys
path, threads, conns, secs, viewers, page_size, cache_mb = sys.argv[1:]
by = {}
for line in open(path):
    row = json.loads(line)
    by.setdefault(row["variant"], []).append(row["r"])
first, later = by["first"], by["later"]
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "page_size": int(page_size), "cache_mb": int(cache_mb),
       "measure": f"median of {len(later)} rounds, first and later pages alternating on one rankd"}
failed = False
for variant, rows in (("first", first), ("later", later)):
    bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
    total = sum(r["requests"] for r in rows)
    if bad:
        failed = failed or bad > 0.01 * total
        print(json.dumps({"name": f"pages_{variant}_errors", "value": bad, "unit": "count",
                          "requests": total}))
if sum(r["later_ok"] for r in later) < 0.99 * sum(r["requests"] for r in later):
    failed = True
    print(json.dumps({"name": "pages_later_not_ok", "value": sum(r["requests"] - r["later_ok"] for r in later),
                      "unit": "count", "note": "later pages not counted ok in rankd_page_requests_total"}))
for key, name, unit, scale, extra in (
        ("cpu_us_per_req", "cpu_us_per_req", "us", 1,
         {"target_ratio": 0.2,
          "note": "rankd's user + system CPU (every thread, kernel TCP work included) per request: "
                  "a later page (cursor) against a first page (page_size); lower is better"}),
        ("p50_us", "p50_latency", "ms", 1e-3, {}),
        ("p99_us", "p99_latency", "ms", 1e-3, {}),
        ("rps", "rps", "req/s", 1, {}),
        ("redis_commands_per_request", "redis_commands_per_request", "commands", 1, {})):
    vals = [r[key] * scale for r in later]
    bvals = [r[key] * scale for r in first]
    value, base = statistics.median(vals), statistics.median(bvals)
    d = {"name": f"pages_later_{name}", "value": round(value, 3), "unit": unit,
         "baseline": round(base, 3), "ratio": round(value / base, 3) if base else None}
    d.update(extra, rounds=[round(v, 2) for v in vals], baseline_rounds=[round(v, 2) for v in bvals],
             round_ratios=[round(v / b, 3) if b else None for v, b in zip(vals, bvals)])
    d.update(ctx)
    print(json.dumps(d))
if failed:
    sys.exit("pages_cursor: over 1% of the requests failed (see the *_errors lines)")
PY
    with_baseline_command "the same rankd serving first pages ({\"plan\":\"feed\",\"page_size\":$pc_page_size}) in the same run"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  : "${RANKD_BUILD:?run through ops/bench}" "${RANKD_ROOT:?run through ops/bench}"
  source "$RANKD_ROOT/bench/lib.sh"
  pages_cursor_setup
  pages_cursor_rounds
  pages_cursor_report
fi
