#!/usr/bin/env bash
# ops/bench feed — the feed plan end to end on seeded demo data, one shard:
# `rankd seed` (10,000 users, seed 1) into a fresh redis-server, then
# `rankd bench --plan feed` (one loop) against it. Reports requests/s, p50/p99 latency,
# Redis commands per request (the fan-out) and Redis batches per request (round trips),
# beside the plan's IO node count and IO depth computed from plans/feed.plan.json:
# every IO node costs one batch whatever its fan-out, so batches = IO nodes, and the
# round trips on the critical path = the IO depth.
# Env: N (requests, 2000), C (concurrency, 16), USERS (10000), USER_ID (1).
set -euo pipefail
n=${N:-2000}; c=${C:-16}; users=${USERS:-10000}; user_id=${USER_ID:-1}
rankd="$RANKD_BUILD/src/server/rankd"
source "$RANKD_ROOT/bench/lib.sh"
start_redis
port=$REDIS_PORT
"$rankd" seed --redis "redis://127.0.0.1:$port" --users "$users" --seed 1 >&2
out=$("$rankd" bench --plan feed --plans "$RANKD_ROOT/plans" -n "$n" -c "$c" --user-id "$user_id" \
  --redis "redis_default=redis://127.0.0.1:$port")
python3 - "$out" "$RANKD_ROOT/plans/feed.plan.json" <<'PY'
import functools, json, os, sys
r = json.loads(sys.argv[1])
plan = json.load(open(sys.argv[2]))
io_ops = {"viewer", "follow", "recommendation", "media", "features", "seen_filter"}
nodes = {n["node_id"]: n for n in plan["nodes"]}

@functools.cache
def depth(node_id):  # IO nodes on the longest path ending at node_id
    n = nodes[node_id]
    return (n["op"] in io_ops) + max((depth(i) for i in n["inputs"]), default=0)

io_nodes = sum(n["op"] in io_ops for n in plan["nodes"])
io_depth = max(depth(i) for i in nodes)
ctx = {"requests": r["requests"], "concurrency": r["concurrency"], "errors": r["errors"],
       "shards": 1, "machine": os.environ["MACHINE"]}
def line(name, value, unit, **extra):
    print(json.dumps({"name": name, "value": value, "unit": unit, **extra, **ctx}))
line("feed_rps", r["rps"], "requests/s")
line("feed_p50_latency", r["p50_us"] / 1000, "ms")
line("feed_p99_latency", r["p99_us"] / 1000, "ms")
line("feed_redis_commands_per_request", r["redis_commands_per_request"], "commands")
line("feed_redis_batches_per_request", r["redis_batches_per_request"], "batches",
     baseline=io_nodes, ratio=round(r["redis_batches_per_request"] / io_nodes, 3),
     io_nodes=io_nodes, io_depth=io_depth)
line("feed_redis_writes_per_request", r["redis_writes_per_request"], "writes")
if r["errors"]:
    sys.exit(f"feed: {r['errors']} request(s) failed")
PY
