#!/usr/bin/env bash
# ops/bench feed — two home-feed plans end to end over HTTP: rankd serve (2 shards) on
# the seeded demo data (`rankd seed`, 10,000 users, seed 1) in a fresh redis-server,
# under wrk with a viewer drawn per request from users 0..1999:
#   feed        plans/feed (follow 100 x media 5 + recs 100, ~690 commands)
#   home_light  plans/home_light (follow 40 x media 4 + recs 60, seen filter, ~250)
# Per plan: <plan>_rps, <plan>_p50_latency, <plan>_p99_latency, <plan>_cpu_us_per_req
# (rankd's user + system CPU, every thread, per request served), and
# <plan>_redis_commands_per_request / _batches_per_request (from /metrics deltas).
# Each figure is the median of ROUNDS rounds, with its rounds and spread.
#
# BASE_REV=<commit>: also builds that commit (release + LTO, in build-base-<sha>/, kept
# across runs) and alternates rounds between it and the current build on the same Redis
# and the same plan files, so that both see the same machine; each figure then carries
# "baseline" (the base build's median) and "ratio" (value / baseline).
#
# CLUSTER=1: also starts a private Redis Cluster (ops/cluster: 3 masters + 3 replicas on
# loopback, state in a temporary RANKD_CLUSTER_DIR, ports from RANKD_CLUSTER_PORT, 17000
# by default, so a user's cluster on 7000 is left alone; stopped at exit), seeds it with
# the same data, and alternates rounds between a rankd serving from the cluster and one
# serving from the single redis-server: each figure is then the cluster's, with the
# single server's as "baseline" and "ratio". It adds, per plan, the Redis side:
# <plan>_redis_cpu_us_per_req / _per_command (every redis-server's CPU over the run),
# <plan>_redis_nodes_touched_per_io_node (batches per request / IO nodes) and
# <plan>_redis_round_trips_per_io_node (1 + cluster redirects per IO node: a redirect
# or retry is the only thing that sends an IO node's commands a second time).
# Not together with BASE_REV.
#
# TLS=1: the same redis-server also listens for TLS (a test CA's certificate made with
# the openssl CLI) and rounds alternate between a rankd reading it over rediss:// (the
# measured variant) and one reading it over plain TCP (the baseline), both the current
# build, both offered TLS_RATE requests a second (300; open loop, bench/wrk_paced.lua):
# "ratio" is then TLS's cost; it adds <plan>_redis_cpu_us_per_req and _per_command for
# both. Not together with BASE_REV or CLUSTER.
# Env: ROUNDS (3), BASE_REV (none), CLUSTER (none), TLS (none), TLS_RATE (300),
# WRK_THREADS (1), WRK_CONNS (16), WRK_SECONDS (10), VIEWERS (2000), PLANS ("feed
# home_light": any plans of plans/ or tests/plans/, e.g. "feed rerank" as `ops/bench
# model` runs it; their models are copied with them).
set -euo pipefail
build=${RANKD_BUILD:?run through ops/bench}
root=${RANKD_ROOT:?run through ops/bench}
rounds=${ROUNDS:-3} threads=${WRK_THREADS:-1} conns=${WRK_CONNS:-16} secs=${WRK_SECONDS:-10}
viewers=${VIEWERS:-2000}
read -r -a plans <<< "${PLANS:-feed home_light}"
source "$root/bench/lib.sh"
tmp=$BENCH_TMP

modes=0
for m in "${CLUSTER:-}" "${BASE_REV:-}" "${TLS:-}"; do [ -z "$m" ] || modes=$((modes + 1)); done
if [ "$modes" -gt 1 ]; then
  echo "feed: CLUSTER, BASE_REV and TLS are exclusive (each takes the baseline slot)" >&2
  exit 2
fi
bench_builds_and_plans "${plans[@]}"

declare -A serve_args=([current]="" [base]="")
if [ -n "${TLS:-}" ]; then
  make_tls_certs "$tmp/tls"
  tls_port=$(free_port)
  start_redis --tls-port "$tls_port" --tls-cert-file "$tmp/tls/server.crt" \
    --tls-key-file "$tmp/tls/server.key" --tls-ca-cert-file "$tmp/tls/ca.crt" --tls-auth-clients no
else
  start_redis
fi
redis_pid=${bench_pids[-1]}
"${bin[current]}" seed --no-embeddings --redis "redis://127.0.0.1:$REDIS_PORT" --users 10000 --seed 1 >&2
declare -A redis_url=([current]="redis://127.0.0.1:$REDIS_PORT" [base]="redis://127.0.0.1:$REDIS_PORT")
declare -A redis_pids=([current]=$redis_pid [base]=$redis_pid)

# CLUSTER=1: the measured variant ("current") serves from the cluster, the baseline
# ("base") from the single server, both with the current build.
if [ -n "${CLUSTER:-}" ]; then
  export RANKD_CLUSTER_DIR="$tmp/cluster" RANKD_CLUSTER_PORT=${RANKD_CLUSTER_PORT:-17000}
  trap '"$root/ops/cluster" down >&2 || true; bench_cleanup' EXIT
  redis_url[current]=$(timeout 120 "$root/ops/cluster" up)
  redis_pids[current]=$(cat "$RANKD_CLUSTER_DIR"/*/pid | tr '\n' ' ')
  "${bin[current]}" seed --no-embeddings --redis "${redis_url[current]}" --users 10000 --seed 1 >&2
  variants+=(base)
  bin[base]=${bin[current]}
fi

# TLS=1: the measured variant ("current") reads over TLS, the baseline ("base") over
# plain TCP, from the same redis-server, both with the current build.
if [ -n "${TLS:-}" ]; then
  redis_url[current]="rediss://localhost:$tls_port"
  serve_args[current]="--redis-tls-ca $tmp/tls/ca.crt"
  variants+=(base)
  bin[base]=${bin[current]}
fi

declare -A port pid
for v in "${variants[@]}"; do
  port[$v]=$(free_port)
  # shellcheck disable=SC2086  # serve_args are words
  "${bin[$v]}" serve --host 127.0.0.1 --port "${port[$v]}" --shards 2 --plans "$tmp/plans" \
    --redis "redis_default=${redis_url[$v]}" ${serve_args[$v]} --log-level error \
    $(test_ops_flag "${bin[$v]}") &
  pid[$v]=$!
  bench_pids+=("${pid[$v]}")
  wait_http "http://127.0.0.1:${port[$v]}/readyz"
done

# redis_counts VARIANT -> "commands batches redirects redis_ticks": the first three from
# its rankd's /metrics, summed over endpoints; the last the CPU ticks of its Redis.
redis_counts() {
  local counts
  counts=$(curl -sf "http://127.0.0.1:${port[$1]}/metrics" | awk '
    /^rankd_redis_commands_total[{ ]/ {c += $NF}
    /^rankd_redis_batches_total[{ ]/ {b += $NF}
    /^rankd_redis_cluster_redirects_total[{ ]/ {r += $NF}
    END {printf "%d %d %d\n", c, b, r}')
  # shellcheck disable=SC2086  # a list of pids
  echo "$counts $(cpu_ticks ${redis_pids[$1]})"
}

# Closed loop, except with TLS=1: open loop at TLS_RATE req/s (bench/wrk_paced.lua), the
# same offered rate for both variants. A closed loop would compare unequal loads: Redis
# spends more per request over TLS, so the TLS rankd would see fewer requests per loop
# turn and pay more wake-ups per request for it, a cost of the load, not of TLS.
wrk_script=$root/bench/wrk_report.lua rate=""
if [ -n "${TLS:-}" ]; then
  wrk_script=$root/bench/wrk_paced.lua rate=${TLS_RATE:-300}
fi

# measure VARIANT PLAN -> one JSON line: wrk's figures plus cpu_us_per_req and the
# Redis commands and batches per request, all over the measured run only (the 1 s
# warm-up before it is not counted).
measure() {
  local v=$1 plan=$2 url="http://127.0.0.1:${port[$1]}/rank" body t0 t1 r0 r1 line
  # A 2 s deadline: this measures throughput and cost, and on shared cores a p99 past
  # the default 200 ms would turn into 504s that cost nothing.
  body="{\"plan\":\"$plan\",\"user_id\":\$USER,\"deadline_ms\":2000}"
  WRK_BODY=$body WRK_USERS=$viewers WRK_RATE=$rate WRK_PACE_THREADS=$threads \
    wrk -t"$threads" -c"$conns" -d1s -s "$wrk_script" "$url" >/dev/null
  r0=$(redis_counts "$v"); t0=$(cpu_ticks "${pid[$v]}")
  line=$(WRK_BODY=$body WRK_USERS=$viewers WRK_RATE=$rate WRK_PACE_THREADS=$threads \
    wrk -t"$threads" -c"$conns" -d"${secs}s" --latency -s "$wrk_script" "$url" | grep '^{"rps"')
  t1=$(cpu_ticks "${pid[$v]}"); r1=$(redis_counts "$v")
  python3 -c '
import json, os, sys
d = json.loads(sys.argv[1])
n = max(d["requests"], 1)
c0, b0, x0, k0 = map(int, sys.argv[4].split()); c1, b1, x1, k1 = map(int, sys.argv[5].split())
tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
d["cpu_us_per_req"] = (int(sys.argv[3]) - int(sys.argv[2])) * tick_us / n
d["redis_commands_per_request"] = (c1 - c0) / n
d["redis_batches_per_request"] = (b1 - b0) / n
d["redis_redirects_per_request"] = (x1 - x0) / n
d["redis_cpu_us_per_req"] = (k1 - k0) * tick_us / n
d["redis_cpu_us_per_command"] = (k1 - k0) * tick_us / max(c1 - c0, 1)
print(json.dumps(d))' "$line" "$t0" "$t1" "$r0" "$r1"
}

# Rounds alternate current / base (and the plans within each), so that a slow minute
# of the shared machine falls on both; which build goes first swaps every round.
run_rounds "${variants[@]}"

base_cmd="${bin[base]:-} serve --host 127.0.0.1 --port ${port[base]:-} --shards 2 --plans $tmp/plans --redis redis_default=redis://127.0.0.1:$REDIS_PORT --log-level error"
if [ -n "${CLUSTER:-}" ]; then
  base_cmd+=" (the same build on one redis-server), under the same wrk load"
elif [ -n "${TLS:-}" ]; then
  base_cmd+=" (the same build and redis-server over plain TCP), under the same wrk load"
else
  base_cmd+=" (BASE_REV ${BASE_SHA:-}), under the same wrk load"
fi
python3 - "$tmp/rounds.jsonl" "$root/plans" "${BASE_SHA:-}" "$threads" "$conns" "$secs" "$viewers" "${plans[*]}" "${CLUSTER:-}" "${TLS:-}" <<'PY' |
import functools, json, os, statistics, sys
rounds_file, plans_dir, base_sha, threads, conns, secs, viewers, plan_names, cluster, tls = sys.argv[1:]
by = {}
for line in open(rounds_file):
    row = json.loads(line)
    by.setdefault((row["variant"], row["plan"]), []).append(row["r"])
ctx = {"machine": os.environ["MACHINE"], "build": "release+lto", "shards": 2,
       "wrk": f"wrk -t{threads} -c{conns} -d{secs}s --latency", "viewers": int(viewers),
       "measure": f"median of {len(next(iter(by.values())))} rounds"
                  + (", alternating with the base build" if base_sha else "")
                  + (", alternating with one redis-server" if cluster else "")
                  + (", alternating TLS with plain TCP to the same redis-server" if tls else "")}
if base_sha:
    ctx["base_rev"] = base_sha[:12]
if cluster:
    ctx["redis"] = "cluster of 3 masters + 3 replicas (ops/cluster), baseline one redis-server"
if tls:
    ctx["redis"] = "one redis-server: rediss:// (TLS 1.3, EC P-256 certificate), baseline redis:// to it"
    ctx["wrk"] += f", open loop at {os.environ.get('TLS_RATE', '300')} req/s (bench/wrk_paced.lua)"
io_ops = {"viewer", "follow", "recommendation", "media", "features", "seen_filter"}

def io_shape(plan_name):  # IO nodes (one batch each) and IO depth (round trips in a row)
    plan = json.load(open(f"{plans_dir}/{plan_name}.plan.json"))
    nodes = {n["node_id"]: n for n in plan["nodes"]}
    @functools.cache
    def depth(i):
        n = nodes[i]
        return (n["op"] in io_ops) + max((depth(j) for j in n["inputs"]), default=0)
    return sum(n["op"] in io_ops for n in plan["nodes"]), max(depth(i) for i in nodes)

def summary(rows, key, scale):
    vals = [r[key] * scale for r in rows]
    return statistics.median(vals), [round(v, 2) for v in vals]

failed = False
for plan in plan_names.split():
    cur, base = by[("current", plan)], by.get(("base", plan))
    for variant, rows in (("current", cur), ("base", base or [])):
        bad = sum(r["non2xx"] + r["socket_errors"] for r in rows)
        if bad:
            # A few are noise of a shared machine; more would make the figures meaningless.
            total = sum(r["requests"] for r in rows)
            failed = failed or bad > 0.01 * total
            label = ({"current": "cluster", "base": "single"}[variant] if cluster else
                     {"current": "tls", "base": "plain"}[variant] if tls else variant)
            print(json.dumps({"name": f"{plan}_errors", "value": bad, "unit": "count", "variant": label,
                              "requests": total}))
    io_nodes, io_depth = io_shape(plan)
    for r in cur + (base or []):
        r["nodes_touched_per_io_node"] = r["redis_batches_per_request"] / io_nodes
        r["round_trips_per_io_node"] = 1 + r["redis_redirects_per_request"] / io_nodes
    tls_rows = () if not tls else (
        ("redis_cpu_us_per_req", "redis_cpu_us_per_req", "us", 1,
         {"note": "redis-server's user + system CPU per request (TLS vs plain TCP)"}),
        ("redis_cpu_us_per_command", "redis_cpu_us_per_command", "us", 1,
         {"note": "redis-server's user + system CPU per Redis command"}))
    cluster_rows = tls_rows if not cluster else (
        ("redis_cpu_us_per_req", "redis_cpu_us_per_req", "us", 1,
         {"note": "every redis-server's user + system CPU per request (replicas included)"}),
        ("redis_cpu_us_per_command", "redis_cpu_us_per_command", "us", 1,
         {"note": "every redis-server's user + system CPU per Redis command"}),
        ("nodes_touched_per_io_node", "redis_nodes_touched_per_io_node", "nodes", 1,
         {"note": "batches per request / IO nodes: the nodes one IO node's batch is split over",
          "io_nodes": io_nodes}),
        ("round_trips_per_io_node", "redis_round_trips_per_io_node", "round trips", 1,
         {"note": "1 + cluster redirects per IO node (rankd_redis_cluster_redirects_total): an IO "
                  "node's shares leave together, only a redirect or retry adds a round"}))
    for key, name, unit, scale, extra in (
            ("rps", "rps", "req/s", 1, {}),
            ("p50_us", "p50_latency", "ms", 1e-3, {}),
            ("p99_us", "p99_latency", "ms", 1e-3, {}),
            ("cpu_us_per_req", "cpu_us_per_req", "us", 1,
             {"note": "rankd's user + system CPU (every thread, kernel TCP work included) per request; lower is better"}),
            ("redis_commands_per_request", "redis_commands_per_request", "commands", 1, {}),
            ("redis_batches_per_request", "redis_batches_per_request", "batches", 1,
             {"io_nodes": io_nodes, "io_depth": io_depth}),
            *cluster_rows):
        value, vals = summary(cur, key, scale)
        d = {"name": f"{plan}_{name}", "value": round(value, 3), "unit": unit}
        if base:
            bvalue, bvals = summary(base, key, scale)
            d["baseline"] = round(bvalue, 3)
            d["ratio"] = round(value / bvalue, 3) if bvalue else None
            d.update(extra, rounds=vals, spread=[min(vals), max(vals)],
                     baseline_rounds=bvals, baseline_spread=[min(bvals), max(bvals)])
        else:
            d.update(extra, rounds=vals, spread=[min(vals), max(vals)])
        d.update(plan=plan, **ctx)
        print(json.dumps(d))
if failed:
    sys.exit("feed: over 1% of the requests failed (see the *_errors lines)")
PY
  with_baseline_command "$base_cmd"
