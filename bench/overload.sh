#!/usr/bin/env bash
# ops/bench overload — rankd past its capacity (issue #42's table): rankd serve (2 shards,
# no cache) on the seeded demo data (`rankd seed`, 10,000 users, seed 1) in a fresh
# redis-server, offered an open-loop load by bench/wrk_paced.lua (latency from each
# request's scheduled send, so queueing is not hidden; rate sent, drops and connections
# reported), every request `"deadline_ms": 250` for a viewer drawn from 0..VIEWERS-1.
# Per plan:
#   capacity C: the highest offered rate at which >= 99% of the offered requests are
#     answered 2xx within 250 ms of their scheduled send, found by an open-loop sweep from
#     0.9 x a closed-loop estimate (wrk -c16, 2 s): x1.2 up / x0.8 down until a pass and a
#     fail, then bisection to 5%, and the result run once more (it must pass twice), each
#     step 0.5 s warm-up + 3 s counted + 0.5 s tail, SWEEP_STEPS (10) at most; with
#     BASE_REV both sides' sweeps run in lockstep, a step of each in turn;
#   at 0.8 C, 1.5 C, 2 C, 4 C (MULTIPLES) of the current build's C, DURATION s each:
#     <plan>_goodput_<k>c (2xx within the deadline per second; baseline C, ratio to C),
#     <plan>_not_2xx_share_<k>c (of the offered: 503, 504, other, not answered),
#     <plan>_p50/p99_latency_<k>c (from the scheduled send), with the rate offered and
#     sent, slots dropped, connections and the most in flight, wrk's and rankd's CPU;
#     <plan>_refusal_p99_<k>c: the p99 of rankd_admission_refusal_seconds (summed over
#     shards, interpolated in the bucket) over the step, when rankd exports it.
# Connections: rate x 0.4 s, 64..MAX_CONNS (2000): a server answering within 1.6 deadlines
# never leaves wrk short of them; one that collapses (answers at ~300 ms) does past ~6,500
# req/s offered, reported as conns_exhausted and dropped slots.
# Targets (#42): goodput at 1.5/2/4 C >= 0.95 C; at 0.8 C <= 1% not 2xx; refusal p99
# <= 1 ms; QUALITY_PLAN at 2 C >= 1.3 C.
#
# BASE_REV=<commit>: also builds that commit (build-base-<sha>/, kept) and serves the same
# plans with it from the same Redis; both sides find their own C (the capacity line:
# value current, baseline base), then every step runs base and current back to back, the
# order swapped every step, at the same offered rates (multiples of the current build's
# C); lines <plan>_*_vs_base carry the base's figure as baseline.
# QUALITY_PLAN=<name>: a plan using the `quality` block, offered QUALITY_MULTIPLE (2) x C
# of the first plan, current build only; skipped (with a note) when the tree has no such
# plan or the current rankd does not load it: <name>_quality_goodput_2c (ratio to that C).
# REDIS_SLOW=1: per plan and side, a steady load at SLOW_LOAD (0.8) x C; after SLOW_BEFORE
# (4) s Redis is blocked by `DEBUG SLEEP 0.05` back to back (SLOW_GAP_MS apart, 0) for
# SLOW_S (5) s, then SLOW_AFTER (8) s more: <plan>_redis_slow_goodput_before/_during/_after
# (good answers per 250 ms bucket by arrival, as a rate), _recovery_ms (from the
# slow-down's end to two buckets in a row at >= 0.9 x before) and _max_rss_mb (rankd's
# VmRSS, sampled every 50 ms, from the slow-down's start to the run's end).
# Env: PLANS (feed; also home_light), DURATION (8), MULTIPLES ("0.8 1.5 2 4"), BASE_REV,
# QUALITY_PLAN, QUALITY_MULTIPLE (2), REDIS_SLOW, SLOW_*, WRK_THREADS (1), MAX_CONNS (2000),
# VIEWERS (2000), SERVE_FLAGS / BASE_SERVE_FLAGS (extra `rankd serve` flags of the current /
# base build), SWEEP_STEPS (10).
# Between runs the bench waits until rankd and Redis are idle (an overload step's backlog
# drained: under 4% of a core over 250 ms, 15 s at most).
set -euo pipefail
: "${RANKD_BUILD:?run through ops/bench}"
root=${RANKD_ROOT:?run through ops/bench}
read -r -a plans <<< "${PLANS:-feed}"
source "$root/bench/lib.sh"
tmp=$BENCH_TMP

bench_builds_and_plans "${plans[@]}"
# The quality plan only for the current build (the base may not know the block).
mkdir -p "$tmp/plans-current"
cp "$tmp"/plans/* "$tmp/plans-current/"
quality_plan=""
if [ -n "${QUALITY_PLAN:-}" ]; then
  qfile=$(plan_file "$QUALITY_PLAN")
  if [ -f "$qfile" ]; then
    cp "$qfile" "$tmp/plans-current/"
    quality_plan=$QUALITY_PLAN
  else
    echo "overload: no plan $QUALITY_PLAN in plans/ or tests/plans/: its step is skipped" >&2
  fi
fi

slow_args=()
[ -n "${REDIS_SLOW:-}" ] && slow_args=(--enable-debug-command local)
start_redis "${slow_args[@]}"
redis_pid=${bench_pids[-1]}
"${bin[current]}" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2

declare -A port pid flags=([current]="${SERVE_FLAGS:-}" [base]="${BASE_SERVE_FLAGS:-}")
declare -A plan_dir=([current]="$tmp/plans-current" [base]="$tmp/plans")
for v in "${variants[@]}"; do
  port[$v]=$(free_port)
  # shellcheck disable=SC2046,SC2086  # the flags are words
  "${bin[$v]}" serve --host 127.0.0.1 --port "${port[$v]}" --shards 2 --plans "${plan_dir[$v]}" \
    --redis "redis_default=redis://127.0.0.1:$REDIS_PORT" --log-level error \
    $(test_ops_flag "${bin[$v]}") ${flags[$v]} &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
done
if [ -n "$quality_plan" ] &&
  ! curl -sf "http://127.0.0.1:${port[current]}/plans/$quality_plan" >/dev/null; then
  echo "overload: the current rankd did not load plan $quality_plan: its step is skipped" >&2
  quality_plan=""
fi

python3 - "$tmp/config.json" <<PY
import json, os, sys
variants = {v: {"port": int(p), "pid": int(q)} for v, p, q in
            zip("${variants[*]}".split(), "$(for v in "${variants[@]}"; do echo -n "${port[$v]} "; done)".split(),
                "$(for v in "${variants[@]}"; do echo -n "${pid[$v]} "; done)".split())}
cfg = {"root": "$root", "variants": variants, "plans": "${plans[*]}".split(),
       "quality_plan": "$quality_plan" or None,
       "quality_multiple": float(os.environ.get("QUALITY_MULTIPLE", "2")),
       "multiples": [float(k) for k in os.environ.get("MULTIPLES", "0.8 1.5 2 4").split()],
       "deadline_ms": 250, "duration": float(os.environ.get("DURATION", "8")), "warm": 1, "tail": 1,
       "sweep_warm": 0.5, "sweep_measure": 3, "sweep_tail": 0.5, "sweep_resolution": 0.05,
       "sweep_steps": int(os.environ.get("SWEEP_STEPS", "10")),
       "wrk_threads": int(os.environ.get("WRK_THREADS", "1")),
       "max_conns": int(os.environ.get("MAX_CONNS", "2000")),
       "viewers": int(os.environ.get("VIEWERS", "2000")),
       "redis_port": $REDIS_PORT, "redis_pid": $redis_pid, "redis_slow": bool(os.environ.get("REDIS_SLOW")),
       "slow_load": float(os.environ.get("SLOW_LOAD", "0.8")),
       "slow_before": float(os.environ.get("SLOW_BEFORE", "4")),
       "slow_s": float(os.environ.get("SLOW_S", "5")),
       "slow_after": float(os.environ.get("SLOW_AFTER", "8")),
       "slow_gap_ms": float(os.environ.get("SLOW_GAP_MS", "0")),
       "machine": os.environ["MACHINE"], "base_sha": "${BASE_SHA:-}" or None,
       "serve_flags": os.environ.get("SERVE_FLAGS") or None}
json.dump(cfg, open(sys.argv[1], "w"))
PY

base_cmd="${bin[base]:-} serve --host 127.0.0.1 --port ${port[base]:-} --shards 2 --plans $tmp/plans --redis redis_default=redis://127.0.0.1:$REDIS_PORT --log-level error ${BASE_SERVE_FLAGS:-} (BASE_REV ${BASE_SHA:-}), offered the same rates"
python3 "$root/bench/overload.py" "$tmp/config.json" | with_baseline_command "$base_cmd"
