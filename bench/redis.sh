#!/usr/bin/env bash
# ops/bench redis — our Redis client (one shard, batches through RedisPool::Batch)
# against redis-benchmark on the same redis-server, same command mix (LRANGE list 0 9 and
# HMGET hash likes quality category, half and half), same number of connections and of
# commands in flight, same run. Two load shapes, one JSON line each:
#   redis_client_ops            CONC connections, each with one batch of BATCH commands in
#                               flight: redis-benchmark -c CONC -P BATCH
#   redis_client_ops_pipelined  CONC batches of BATCH commands over CONNS connections (how
#                               a shard talks to Redis: batches of many requests share a
#                               connection and a write): redis-benchmark -c CONNS -P
#                               CONC*BATCH/CONNS, the same commands in flight per connection
# Sides alternate for ROUNDS rounds, the order reversed every other round, and the
# medians are compared, so that a busy machine hurts both alike. Each line has our ops/s, the baseline's, the ratio (target >= 0.8),
# the client CPU per command of each side, and the baseline's exact commands.
# Then the reply readers (bench/resp_read_bench.cc): the replies a redis-server seeded by
# `rankd seed` (10,000 users, seed 1) sent `rankd serve` (1 shard, --cache-mb 0) for
# FEED_REQUESTS `feed` requests, recorded by bench/record_replies.py between the two,
# read through our RespReader and through hiredis 0.14's redisReader (custom object
# functions), alternating, READ_ROUNDS rounds of READ_PASSES passes:
#   resp_read_ns_per_reply      ns per reply (and allocations per reply) of each
#   resp_read_bounds            what each reader does with hostile headers
# Env: OPS (commands per side and round, default 400000), ROUNDS (3), BATCH (16),
#      CONC (50), CONNS (2), FEED_REQUESTS (20), READ_ROUNDS (9), READ_PASSES (20).
set -euo pipefail
export OPS=${OPS:-400000} ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-16} CONC=${CONC:-50} CONNS=${CONNS:-2}
feed_requests=${FEED_REQUESTS:-20} read_rounds=${READ_ROUNDS:-9} read_passes=${READ_PASSES:-20}
source "$RANKD_ROOT/bench/lib.sh"
reader_bench="$RANKD_BUILD/bench/resp_read_bench"
if [ ! -x "$reader_bench" ]; then
  echo "redis: $reader_bench is not built: libhiredis-dev (ops/lib/ensure-deps --bench) was" \
    "missing when $RANKD_BUILD was set up; run meson setup --reconfigure $RANKD_BUILD" >&2
  exit 1
fi
start_redis
port=$REDIS_PORT
redis-cli -p "$port" RPUSH media:42 $(seq 4201 4220) >/dev/null
redis-cli -p "$port" HSET item:4242 author 42 likes 1234 age_s 3600 category music country US \
  quality 0.75 nsfw 0 >/dev/null
export PORT=$port
python3 - <<'PY'
import json, os, re, resource, shlex, statistics, subprocess

port, ops, rounds = os.environ["PORT"], int(os.environ["OPS"]), int(os.environ["ROUNDS"])
batch, conc, conns = int(os.environ["BATCH"]), int(os.environ["CONC"]), int(os.environ["CONNS"])
MIX = (["LRANGE", "media:42", "0", "9"], ["HMGET", "item:4242", "likes", "quality", "category"])

def timed(cmd):
    """Runs cmd; returns (stdout, child CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def baseline_cmds(connections, pipeline):
    # One redis-benchmark invocation per command, equal counts: the mix's rate is the
    # total commands over the total time.
    return [["redis-benchmark", "-p", port, "-c", str(connections), "-P", str(pipeline),
             "-n", str(ops // 2), "-q"] + cmd for cmd in MIX]

def baseline(cmds):
    secs, cpu = 0.0, 0.0
    for cmd in cmds:
        out, c = timed(cmd)
        rps = float(re.findall(r"([0-9.]+) requests per second", out.replace("\r", "\n"))[-1])
        secs += (ops // 2) / rps
        cpu += c
    return (ops // 2) * len(cmds) / secs, cpu / ops

def ours_cmd(connections):
    return [os.environ["RANKD_BUILD"] + "/bench/redis_bench", "--redis", f"redis://127.0.0.1:{port}",
            "--ops", str(ops), "--batch", str(batch), "--concurrency", str(conc),
            "--connections", str(connections)]

def ours(cmd):
    out, cpu = timed(cmd)
    r = json.loads(out)
    if r["errors"]:
        raise SystemExit(f"redis_bench reported {r['errors']} errors")
    return r, cpu / r["commands"]

# (name, our connections, the baseline's connections and pipeline depth): the same
# connections and the same commands in flight on each.
shapes = [("redis_client_ops", conc, conc, batch),
          ("redis_client_ops_pipelined", conns, conns, conc * batch // conns)]
for name, our_conns, base_conns, depth in shapes:
    base_cmds, mine_cmd = baseline_cmds(base_conns, depth), ours_cmd(our_conns)
    base, mine = [], []
    for r in range(rounds):
        # The order of the sides reverses every other round (ours first on odd rounds),
        # so that the machine's drift falls on both alike.
        if r % 2:
            mine.append(ours(mine_cmd))
            base.append(baseline(base_cmds))
        else:
            base.append(baseline(base_cmds))
            mine.append(ours(mine_cmd))
    b = statistics.median(x[0] for x in base)
    m = statistics.median(x[0]["value"] for x in mine)
    last = mine[-1][0]
    print(json.dumps({
        "name": name, "value": round(m), "unit": "ops/s", "baseline": round(b), "ratio": round(m / b, 3),
        "client_cpu_us_per_op": round(1e6 * statistics.median(x[1] for x in mine), 3),
        "baseline_cpu_us_per_op": round(1e6 * statistics.median(x[1] for x in base), 3),
        "rounds": rounds, "ops_per_round": ops, "batch": last["batch"], "concurrency": last["concurrency"],
        "connections": last["connections"], "in_flight": conc * batch,
        "batches_per_write": round(last["batches"] / max(1, last["socket_writes"]), 1),
        "command": shlex.join(mine_cmd),
        "baseline_command": " && ".join(shlex.join(c) for c in base_cmds),
        "machine": os.environ["MACHINE"]}), flush=True)
PY

# The reply readers, on replies recorded from a real `feed` request.
rankd="$RANKD_BUILD/src/cli/rankd"
"$rankd" seed --no-embeddings --redis "redis://127.0.0.1:$port" --users 10000 --seed 1 --flush >/dev/null
replies="$BENCH_TMP/feed_replies.resp"
proxy_port=$(free_port)
python3 "$RANKD_ROOT/bench/record_replies.py" "$proxy_port" "$port" "$replies" > "$BENCH_TMP/recorder.out" &
recorder=$!
bench_pids+=("$recorder")
for _ in $(seq 100); do grep -q ready "$BENCH_TMP/recorder.out" && break; sleep 0.05; done
mkdir -p "$BENCH_TMP/plans"
cp "$(plan_file feed)" "$BENCH_TMP/plans/"
http_port=$(free_port)
"$rankd" serve --host 127.0.0.1 --port "$http_port" --shards 1 --cache-mb 0 --plans "$BENCH_TMP/plans" \
  --redis "redis_default=redis://127.0.0.1:$proxy_port" --log-level error &
serve_pid=$!
bench_pids+=("$serve_pid")
wait_http "http://127.0.0.1:$http_port/readyz"
for u in $(seq 1 "$feed_requests"); do
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
    -d "{\"plan\": \"feed\", \"user_id\": $u, \"deadline_ms\": 5000}" "http://127.0.0.1:$http_port/rank"
done
kill -TERM "$serve_pid"
wait "$serve_pid"
kill -TERM "$recorder"
wait "$recorder" || true
[ -s "$replies" ] || { echo "redis: no replies recorded" >&2; exit 1; }
read_cmd=("$reader_bench" "$replies" --rounds "$read_rounds" --passes "$read_passes")
"${read_cmd[@]}" | python3 -c '
import json, sys
for line in sys.stdin:
    if not line.strip():
        continue
    if not line.startswith("{\"name\": \"resp_read_bounds\""):
        d = json.loads(line)
    else:  # the bounds object spans lines
        d = json.loads(line + sys.stdin.read())
    d.update({"command": sys.argv[1], "recorded": sys.argv[2], "machine": sys.argv[3]})
    print(json.dumps(d), flush=True)' "$(printf '%q ' "${read_cmd[@]}")" \
  "replies to $feed_requests feed requests (rankd serve --shards 1 --cache-mb 0, rankd seed --users 10000 --seed 1), bench/record_replies.py" \
  "$MACHINE"
