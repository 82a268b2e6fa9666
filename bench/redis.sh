#!/usr/bin/env bash
# ops/bench redis — our Redis client (one shard, batches through RedisPool::Batch)
# against redis-benchmark -P 16 -c 50 on the same redis-server, same command mix
# (LRANGE list 0 9 and HMGET hash likes quality category, half and half), same run.
# Sides alternate for ROUNDS rounds and the medians are compared, so that a busy machine
# hurts both alike. Prints redis_client_ops (ops/s) with the baseline's ops/s and the
# ratio (target >= 0.8), plus the client CPU per command of each side.
# Env: OPS (commands per side and round, default 400000), ROUNDS (3), BATCH (16),
#      CONC (50), CONNS (2).
set -euo pipefail
export OPS=${OPS:-400000} ROUNDS=${ROUNDS:-3} BATCH=${BATCH:-16} CONC=${CONC:-50} CONNS=${CONNS:-2}
source "$RANKD_ROOT/bench/lib.sh"
start_redis
port=$REDIS_PORT
redis-cli -p "$port" RPUSH media:42 $(seq 4201 4220) >/dev/null
redis-cli -p "$port" HSET item:4242 author 42 likes 1234 age_s 3600 category music country US \
  quality 0.75 nsfw 0 >/dev/null
export PORT=$port
python3 - <<'PY'
import json, os, re, resource, statistics, subprocess

port, ops, rounds = os.environ["PORT"], int(os.environ["OPS"]), int(os.environ["ROUNDS"])

def timed(cmd):
    """Runs cmd; returns (stdout, child CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def baseline():
    # One redis-benchmark invocation per command, equal counts: the mix's rate is the
    # total commands over the total time.
    secs, cpu = 0.0, 0.0
    for cmd in (["LRANGE", "media:42", "0", "9"], ["HMGET", "item:4242", "likes", "quality", "category"]):
        out, c = timed(["redis-benchmark", "-p", port, "-P", "16", "-c", "50", "-n", str(ops // 2), "-q"] + cmd)
        rps = float(re.findall(r"([0-9.]+) requests per second", out.replace("\r", "\n"))[-1])
        secs += (ops // 2) / rps
        cpu += c
    return (ops // 2) * 2 / secs, cpu / ops

def ours():
    out, cpu = timed([os.environ["RANKD_BUILD"] + "/bench/redis_bench", "--redis", f"redis://127.0.0.1:{port}",
                      "--ops", str(ops), "--batch", os.environ["BATCH"], "--concurrency", os.environ["CONC"],
                      "--connections", os.environ["CONNS"]])
    r = json.loads(out)
    if r["errors"]:
        raise SystemExit(f"redis_bench reported {r['errors']} errors")
    return r, cpu / r["commands"]

base, mine = [], []
for _ in range(rounds):
    base.append(baseline())
    mine.append(ours())
b = statistics.median(x[0] for x in base)
m = statistics.median(x[0]["value"] for x in mine)
last = mine[-1][0]
print(json.dumps({
    "name": "redis_client_ops", "value": round(m), "unit": "ops/s",
    "baseline": round(b), "ratio": round(m / b, 3),
    "client_cpu_us_per_op": round(1e6 * statistics.median(x[1] for x in mine), 3),
    "baseline_cpu_us_per_op": round(1e6 * statistics.median(x[1] for x in base), 3),
    "rounds": rounds, "ops_per_round": ops, "batch": last["batch"], "concurrency": last["concurrency"],
    "connections": last["connections"], "batches_per_write": round(last["batches"] / max(1, last["socket_writes"]), 1),
    "baseline_tool": "redis-benchmark -P 16 -c 50", "machine": os.environ["MACHINE"]}))
PY
