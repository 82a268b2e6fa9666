#!/usr/bin/env bash
# ops/bench experiments — what experiments (docs/experiments.md) cost the server, on the
# demo's `feed` plan, each figure against the same build serving `feed` with no
# experiments.json in the same run. rankd serve (current build, 2 shards, the same flags,
# --cache-mb CACHE_MB: 0 by default, what `ops/bench feed` serves with) on one seeded
# redis-server (`rankd seed`, 10,000 users, seed 1); each plans folder holds
# plans/*.plan.json and *.model.json (never plans/experiments.json) plus its own
# experiments.json:
#   plain       none
#   experiment  experiment "bench" on feed: variants "a" and "b" (3333 buckets each, the
#               other 3334 control), both plan "feed" with no params: every request runs
#               the same plan with the same parameters whatever its bucket, so the
#               difference is the experiment machinery alone (bucketing, the variant's
#               dispatch, the answer's fields, the counters)
#   shadow      the same experiment plus "shadow": [{"plan": "feed", "percent":
#               SHADOW_PERCENT (100), "compare_top": 10}]
# Part 1, closed loop (as `ops/bench feed`): wrk -tWRK_THREADS -cWRK_CONNS, a viewer drawn
# per request from users 0..VIEWERS-1, "deadline_ms": 2000; rounds alternate plain /
# experiment (the order reverses every round, bench/lib.sh's run_rounds), each a 1 s
# warm-up then WRK_SECONDS measured. Figures (experiment = "value", plain = "baseline"):
#   experiments_cpu_us_per_req   rankd's user + system CPU (every thread, its own
#                                /proc/PID/task/*/stat) per request (target ratio <= 1.02)
#   experiments_p99_latency, experiments_p50_latency, experiments_rps
# Part 2, open loop: R = part 1's median plain rps; the experiment server is stopped and
# the shadow one started; plain and shadow are driven at RATE_SHARE x R (0.25) by
# bench/wrk_paced.lua (a fixed schedule of request slots through wrk's `delay`, so the
# offered rate does not follow the latency), rounds alternating, each a 1 s warm-up then
# PACED_SECONDS measured. Figures (shadow = "value", plain = "baseline"):
#   experiments_shadow_p99_latency   the primary answers' p99 (wrk's; shadows run after
#                                    the answer and are never returned) (target <= 1.1)
#   experiments_shadow_p50_latency, experiments_shadow_rps (achieved; with the offered rate)
#   experiments_shadow_cpu_us_per_req  rankd's CPU per primary request, its shadows' work
#                                    included (read once the shadows have finished)
#   experiments_shadow_completed_share ok / (ok + failed + shed + cancelled) of the
#                                    rankd_shadow_runs_total deltas over the measured runs,
#                                    with the counts by outcome, shadows per primary, the
#                                    mean shadow duration and top-10 overlap
# Each figure is the median of ROUNDS rounds, with the rounds and each round's ratio.
# Env: ROUNDS (5), WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (8), PACED_SECONDS (12),
# RATE_SHARE (0.25), RATE (req/s: overrides RATE_SHARE x R), SHADOW_PERCENT (100),
# VIEWERS (2000), CACHE_MB (0).
# Time: 2 x ROUNDS x (WRK_SECONDS + about 2 s) + 2 x ROUNDS x (PACED_SECONDS + about 2 s),
# about 4 minutes with the defaults.
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-5} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-8}
paced_secs=${PACED_SECONDS:-12} rate_share=${RATE_SHARE:-0.25} rate=${RATE:-}
shadow_percent=${SHADOW_PERCENT:-100} viewers=${VIEWERS:-2000} cache_mb=${CACHE_MB:-0}
source "$root/bench/lib.sh"
tmp=$BENCH_TMP
rankd="$build/src/cli/rankd"

start_redis
"$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2

# One plans folder per server: the tree's plans and models (not its experiments.json),
# and the server's own experiments.json.
for v in plain experiment shadow; do
  mkdir -p "$tmp/plans_$v"
  cp "$root"/plans/*.plan.json "$tmp/plans_$v/"
  cp "$root"/plans/*.model.json "$tmp/plans_$v/" 2>/dev/null || true
  [ "$v" = plain ] && continue
  python3 - "$tmp/plans_$v/experiments.json" "$v" "$shadow_percent" <<'PY'
import json, sys
dst, v, percent = sys.argv[1:]
e = {"name": "bench", "plan": "feed", "salt": "bench-1",
     "variants": [{"name": "a", "plan": "feed", "params": {}, "weight": 3333},
                  {"name": "b", "plan": "feed", "params": {}, "weight": 3333}]}
if v == "shadow":
    e["shadow"] = [{"plan": "feed", "percent": float(percent), "compare_top": 10}]
json.dump({"experiments": [e]}, open(dst, "w"), indent=2)
PY
done

common=(--host 127.0.0.1 --shards 2 --redis "redis_default=redis://127.0.0.1:$REDIS_PORT"
        --log-level error --cache-mb "$cache_mb")
declare -A port pid
start_server() {  # start_server VARIANT: its rankd, up, with the experiments it should have
  local v=$1 want
  port[$v]=$(free_port)
  "$rankd" serve --port "${port[$v]}" --plans "$tmp/plans_$v" "${common[@]}" &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
  want=$([ "$v" = plain ] && echo 0 || echo 1)
  if [ "$(curl -sf "http://127.0.0.1:${port[$v]}/experiments" |
          python3 -c 'import json, sys; print(len(json.load(sys.stdin)["experiments"]))')" != "$want" ]; then
    echo "experiments: the $v server did not load its experiments.json as expected" >&2
    exit 1
  fi
}
stop_server() {  # stop_server VARIANT
  kill "${pid[$1]}" 2>/dev/null || true
  wait "${pid[$1]}" 2>/dev/null || true
}

# server_counts VARIANT -> "ok control a b shadow_ok failed shed cancelled dur_sum dur_count
# overlap_sum overlap_count", summed over shards, from its /metrics.
server_counts() {
  curl -sf --max-time 5 "http://127.0.0.1:${port[$1]}/metrics" | awk '
    function has(s) { return index($0, s) > 0 }
    /^rankd_rank_requests_total[{ ]/ && has("outcome=\"ok\"") {ok += $NF}
    /^rankd_experiment_requests_total[{ ]/ {
      if (has("variant=\"control\"")) c += $NF; else if (has("variant=\"a\"")) a += $NF; else if (has("variant=\"b\"")) b += $NF }
    /^rankd_shadow_runs_total[{ ]/ {
      if (has("outcome=\"ok\"")) s_ok += $NF; else if (has("outcome=\"failed\"")) s_f += $NF
      else if (has("outcome=\"shed\"")) s_s += $NF; else if (has("outcome=\"cancelled\"")) s_c += $NF }
    /^rankd_shadow_duration_seconds_sum[{ ]/ {ds += $NF}
    /^rankd_shadow_duration_seconds_count[{ ]/ {dc += $NF}
    /^rankd_shadow_overlap_at_k_sum[{ ]/ {os += $NF}
    /^rankd_shadow_overlap_at_k_count[{ ]/ {oc += $NF}
    END {printf "%d %d %d %d %d %d %d %d %.6f %d %.6f %d\n", ok, c, a, b, s_ok, s_f, s_s, s_c, ds, dc, os, oc}'
}
# settle VARIANT -> its counts once they stop moving: the shadows of the requests answered
# so far have finished (5 s at most).
settle() {
  local prev="" cur
  for _ in $(seq 20); do
    cur=$(server_counts "$1")
    [ "$cur" = "$prev" ] && break
    prev=$cur
    sleep 0.25
  done
  echo "$cur"
}

# wrk_run VARIANT SECONDS -> wrk's JSON line; closed loop, or paced at $offered req/s in
# part 2 ($mode = paced).
wrk_run() {
  local url="http://127.0.0.1:${port[$1]}/rank"
  # A 2 s deadline, as `ops/bench feed`: throughput and cost, not 504s on shared cores.
  # shellcheck disable=SC2016  # $USER is wrk_report.lua's placeholder, not the shell's
  local body='{"plan":"feed","user_id":$USER,"deadline_ms":2000}'
  if [ "$mode" = paced ]; then
    WRK_BODY=$body WRK_USERS=$viewers WRK_RATE=$offered WRK_PACE_THREADS=$threads \
      wrk -t"$threads" -c"$conns" -d"$2s" --latency -s "$root/bench/wrk_paced.lua" "$url"
  else
    WRK_BODY=$body WRK_USERS=$viewers \
      wrk -t"$threads" -c"$conns" -d"$2s" --latency -s "$root/bench/wrk_report.lua" "$url"
  fi | grep '^{"rps"'
}

# measure VARIANT PLAN -> one JSON line: wrk's figures, rankd's CPU per request and the
# experiment's counts over the measured run (CPU and counts read once its shadows are done).
measure() {
  local v=$1 secs_now t0 t1 m0 m1 line
  secs_now=$([ "$mode" = paced ] && echo "$paced_secs" || echo "$secs")
  wrk_run "$v" 1 >/dev/null
  m0=$(settle "$v"); t0=$(cpu_ticks "${pid[$v]}")
  line=$(wrk_run "$v" "$secs_now")
  m1=$(settle "$v"); t1=$(cpu_ticks "${pid[$v]}")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
a = [float(x) for x in sys.argv[4].split()]; b = [float(x) for x in sys.argv[5].split()]
ok, control, va, vb, s_ok, s_failed, s_shed, s_cancelled, dsum, dcount, osum, ocount = (y - x for x, y in zip(a, b))
n = max(d["requests"], 1)
d["cpu_us_per_req"] = (int(sys.argv[3]) - int(sys.argv[2])) * 1e6 / os.sysconf("SC_CLK_TCK") / n
d["ok"] = int(ok)
d["variants"] = {"control": int(control), "a": int(va), "b": int(vb)}
d["shadow"] = {"ok": int(s_ok), "failed": int(s_failed), "shed": int(s_shed), "cancelled": int(s_cancelled)}
d["shadow_duration_sum_s"], d["shadow_duration_count"] = dsum, int(dcount)
d["shadow_overlap_sum"], d["shadow_overlap_count"] = osum, int(ocount)
print(json.dumps(d))' "$line" "$t0" "$t1" "$m0" "$m1"
}

plans=(feed)

# Part 1: plain / experiment, closed loop.
start_server plain
start_server experiment
mode=closed
run_rounds plain experiment
mv "$tmp/rounds.jsonl" "$tmp/rounds_closed.jsonl"

# Part 2: plain / shadow, open loop at RATE_SHARE of plain's closed-loop throughput.
stop_server experiment
start_server shadow
plain_rps=$(python3 -c '
import json, statistics, sys
print(statistics.median(json.loads(l)["r"]["rps"] for l in open(sys.argv[1]) if json.loads(l)["variant"] == "plain"))' \
  "$tmp/rounds_closed.jsonl")
offered=${rate:-$(python3 -c 'import sys; print(round(float(sys.argv[1]) * float(sys.argv[2]), 1))' "$plain_rps" "$rate_share")}
mode=paced
run_rounds plain shadow
mv "$tmp/rounds.jsonl" "$tmp/rounds_paced.jsonl"

python3 - "$tmp/rounds_closed.jsonl" "$tmp/rounds_paced.jsonl" "$threads" "$conns" "$secs" \
  "$paced_secs" "$viewers" "$cache_mb" "$plain_rps" "$offered" "$rate_share" "${rate:-}" \
  "$tmp/plans_shadow/experiments.json" <<'PY' |
import json, os, statistics, sys
(closed_file, paced_file, threads, conns, secs, paced_secs, viewers, cache_mb, plain_rps,
 offered, rate_share, rate, exp_file) = sys.argv[1:]
def load(path):
    by = {}
    for line in open(path):
        row = json.loads(line)
        by.setdefault(row["variant"], []).append(row["r"])
    return by
closed, paced = load(closed_file), load(paced_file)
experiment = json.load(open(exp_file))["experiments"][0]
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "cache_mb": int(cache_mb), "plan": "feed", "viewers": int(viewers)}
closed_ctx = dict(ctx, wrk=f"wrk -t{threads} -c{conns} -d{secs}s --latency (closed loop)",
                  experiment={k: v for k, v in experiment.items() if k != "shadow"},
                  measure=f"median of {len(closed['plain'])} rounds, alternating plain / experiment")
offered_note = (f"RATE={rate}" if rate else f"{rate_share} x plain's closed-loop median {float(plain_rps):.1f} req/s")
paced_ctx = dict(ctx, wrk=f"wrk -t{threads} -c{conns} -d{paced_secs}s --latency -s bench/wrk_paced.lua (open loop)",
                 offered_rps=float(offered), offered=offered_note, experiment=experiment,
                 measure=f"median of {len(paced['plain'])} rounds, alternating plain / shadow")
paced_base = ("the same build serving the same plans without experiments.json (2 shards, "
              f"--cache-mb {cache_mb}), under the same paced wrk load")
failed = False
for part, by in (("closed", closed), ("paced", paced)):
    for v, rows in by.items():
        bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
        if bad:
            total = sum(r["requests"] for r in rows)
            failed = failed or bad > 0.01 * total
            print(json.dumps({"name": f"experiments_{v}_errors", "value": bad, "unit": "count",
                              "loop": part, "requests": total}))

def figure(name, cur_rows, base_rows, key, unit, scale, extra, c):
    cur = [r[key] * scale for r in cur_rows]
    base = [r[key] * scale for r in base_rows]
    value, baseline = statistics.median(cur), statistics.median(base)
    out = {"name": name, "value": round(value, 3), "unit": unit, "baseline": round(baseline, 3),
           "ratio": round(value / baseline, 3) if baseline else None,
           "rounds": [round(x, 2) for x in cur], "baseline_rounds": [round(x, 2) for x in base],
           "round_ratios": [round(x / y, 3) if y else None for x, y in zip(cur, base)]}
    out.update(extra)
    out.update(c)
    print(json.dumps(out))

exp_rows = closed["experiment"]
split = {k: sum(r["variants"][k] for r in exp_rows) for k in ("control", "a", "b")}
figure("experiments_cpu_us_per_req", exp_rows, closed["plain"], "cpu_us_per_req", "us", 1,
       {"target": "ratio <= 1.02",
        "note": "rankd's user + system CPU (every thread) per request; both variants run feed with no params, so only the experiment machinery differs",
        "variant_requests": split,
        "variant_shares": {k: round(n / max(sum(split.values()), 1), 4) for k, n in split.items()}},
       closed_ctx)
figure("experiments_p99_latency", exp_rows, closed["plain"], "p99_us", "ms", 1e-3, {}, closed_ctx)
figure("experiments_p50_latency", exp_rows, closed["plain"], "p50_us", "ms", 1e-3, {}, closed_ctx)
figure("experiments_rps", exp_rows, closed["plain"], "rps", "req/s", 1, {}, closed_ctx)

sh_rows, pl_rows = paced["shadow"], paced["plain"]
pc = dict(paced_ctx, baseline_command=paced_base)
figure("experiments_shadow_p99_latency", sh_rows, pl_rows, "p99_us", "ms", 1e-3,
       {"target": "ratio <= 1.1", "note": "the primary answers' latency (wrk's); shadows run after the answer"}, pc)
figure("experiments_shadow_p50_latency", sh_rows, pl_rows, "p50_us", "ms", 1e-3, {}, pc)
figure("experiments_shadow_rps", sh_rows, pl_rows, "rps", "req/s", 1,
       {"note": "achieved; offered_rps is the schedule's rate"}, pc)
figure("experiments_shadow_cpu_us_per_req", sh_rows, pl_rows, "cpu_us_per_req", "us", 1,
       {"note": "rankd's CPU per primary request, its shadow runs included (read once they have finished)"}, pc)
outcomes = {k: sum(r["shadow"][k] for r in sh_rows) for k in ("ok", "failed", "shed", "cancelled")}
runs = sum(outcomes.values())
primaries = sum(r["ok"] for r in sh_rows)
dsum = sum(r["shadow_duration_sum_s"] for r in sh_rows); dcount = sum(r["shadow_duration_count"] for r in sh_rows)
osum = sum(r["shadow_overlap_sum"] for r in sh_rows); ocount = sum(r["shadow_overlap_count"] for r in sh_rows)
print(json.dumps({"name": "experiments_shadow_completed_share",
                  "value": round(outcomes["ok"] / runs, 4) if runs else None, "unit": "share",
                  "by_outcome": outcomes,
                  "rounds": [round(r["shadow"]["ok"] / max(sum(r["shadow"].values()), 1), 4) for r in sh_rows],
                  "shadow_runs_per_primary": round(runs / primaries, 4) if primaries else None,
                  "primaries_ok": primaries,
                  "shadow_mean_duration_ms": round(1e3 * dsum / dcount, 3) if dcount else None,
                  "shadow_mean_overlap_at_10": round(osum / ocount, 4) if ocount else None,
                  "note": "ok / (ok + failed + shed + cancelled), rankd_shadow_runs_total deltas over the measured runs",
                  **paced_ctx}))
if failed:
    sys.exit("experiments: over 1% of the requests failed (see the *_errors lines)")
PY
  with_baseline_command "the same build serving the same plans without experiments.json (2 shards, --cache-mb $cache_mb), under the same wrk load"
