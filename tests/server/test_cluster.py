"""rankd on a Redis Cluster end to end: a loopback cluster (ops/cluster: 3 masters, 3
replicas) and a single redis-server, both seeded by `rankd seed` with the same seed, and
one rankd per data plane.

- Every plan of plans/ and tests/plans/ answers the same on both, for many viewers.
- `redis-cli --cluster reshard` moves 1,000 slots while requests run: every answer is a
  200 equal to the single node's, and the redirects rankd followed are counted in
  /metrics (rankd_redis_cluster_redirects_total).
- The shard cache (--cache-mb 16, cached copies of feed and home_light; each tracking
  mode) through a reshard of 1,000 slots while a writer rewrites items and media lists
  in those slots: every answer a 200, and afterwards every cached answer equal to the
  uncached plan's.
- Pages of feed with their snapshots on the cluster: every chain equals the single
  node's whole ranking; the snapshots spread over the masters; one deleted ends its
  chain with 410 (plain build only).
- With read_from=replica, once the replicas reached their masters' replication offsets,
  answers equal the single node's and every replica's INFO commandstats counts the reads.
- A master SIGKILLed under load: only 503 or 504 until its replica is promoted, then 200s
  equal to the single node's again, within 30 s (the times are printed).
- A master whose slots were moved away and that was removed (`redis-cli --cluster
  del-node`): its per-node series (rankd_redis_cluster_node_*{node="host:port"}) leave
  /metrics and rankd holds no connection to it.

The cluster's nodes are daemons (redis-server --daemonize): `ops/cluster down` stops them
at exit, also when a test fails."""
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from cluster import Cluster  # noqa: E402
from harness import (RANKD, SANITIZED, SOURCE_ROOT, Rankd, Redis, metric_value,  # noqa: E402
                     plans_dir, run_tests, temp_dir, wait_until)

USERS = 1000
VIEWERS_PER_PLAN = 25
def seed(url):
    out = subprocess.run([RANKD, "seed", "--redis", url, "--users", str(USERS), "--flush"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def patient(plan):
    """`plan` (a dict) without its nodes' timeouts and its `quality` block. Every plan here
    runs this way: on a slow sanitizer build, or while slots move (a command may take a
    redirect's second round trip or wait out a MIGRATE), an optional node with a 30 ms
    budget degrades, and a plan with `quality` (feed_quality) scales its fan-outs down,
    as either would on a single node stalled that long, and the two answers would differ
    for a reason that says nothing about the cluster."""
    for node in plan["nodes"]:
        node.pop("timeout_ms", None)
    plan.pop("quality", None)
    return plan


def all_plans():
    """Every plan of plans/ and tests/plans/, patient: {name: plan dict}."""
    out = {}
    for d in (os.path.join(SOURCE_ROOT, "plans"), os.path.join(SOURCE_ROOT, "tests", "plans")):
        for f in sorted(os.listdir(d)):
            if f.endswith(".plan.json"):
                with open(os.path.join(d, f)) as fh:
                    out[f[:-len(".plan.json")]] = patient(json.load(fh))
    return out


def patient_plan(name):
    """plans/NAME.plan.json, patient."""
    with open(os.path.join(SOURCE_ROOT, "plans", f"{name}.plan.json")) as fh:
        return patient(json.load(fh))


# The plans run while slots move.
RESHARD_PLANS = ["feed", "home_light", "viewer_filter"]


_env = {}


def env():
    if not _env:
        cluster = Cluster()
        single = Redis()
        seed(single.url())
        seed(cluster.url())
        every = all_plans()
        names = sorted(every)
        plans = plans_dir(every)  # the patient copies replace plans/' own
        _env.update(cluster=cluster, single=single, names=names,
                    on_single=Rankd(plans, redis=single, shards=2).wait_ready(),
                    on_cluster=Rankd(plans, redis=cluster, shards=2).wait_ready())
    return _env


def answer(rankd, plan, user, deadline_ms=None, **fields):
    """`fields`: more of the request (params, page_size, cursor)."""
    req = {"plan": plan, "user_id": user, **fields}
    if deadline_ms:
        req["deadline_ms"] = deadline_ms
    status, _, body = rankd.rank(req, timeout=30)
    if isinstance(body, dict):
        body.pop("took_us", None)
    return status, body


def test_every_plan_answers_the_same_on_the_cluster():
    e = env()
    rng = random.Random(14)
    checked = 0
    for plan in e["names"]:
        if plan == "e2e_slow":
            print("     e2e_slow not compared: a Redis-free fixture whose answer (200 or 504) "
                  "depends on timing alone", flush=True)
            continue
        for user in [1, 2, USERS] + rng.sample(range(3, USERS), VIEWERS_PER_PLAN - 3):
            want = answer(e["on_single"], plan, user)
            got = answer(e["on_cluster"], plan, user)
            assert want[0] == 200, (plan, user, want)
            assert got == want, (plan, user, got, want)
            checked += 1
    # The cluster really was spread: every master holds a share of the keys.
    sizes = [int(e["cluster"].cli("dbsize", port=p).strip()) for _, p, _ in e["cluster"].masters()]
    assert len(sizes) == 3 and min(sizes) > 0, sizes
    print(f"     {checked} answers equal over {len(e['names'])} plans; keys per master {sizes}",
          flush=True)


class ReplicaReads:
    """The cluster's URL with read_from=replica, for Rankd(redis=...)."""

    def __init__(self, cluster):
        self.cluster = cluster

    def url(self):
        return self.cluster.url() + ("&" if "?" in self.cluster.url() else "?") + "read_from=replica"


def replicas(cluster):
    """[(replica port, its master's port)] from CLUSTER NODES."""
    text = cluster.cli("cluster", "nodes", port=live_port(cluster))
    port_of = {}
    for line in text.splitlines():
        parts = line.split()
        port_of[parts[0]] = int(parts[1].split("@")[0].rsplit(":", 1)[1])
    return [(port_of[parts[0]], port_of[parts[3]]) for parts in map(str.split, text.splitlines())
            if "slave" in parts[2] and "fail" not in parts[2]]


def info_field(cluster, port, section, field):
    for line in cluster.cli("info", section, port=port).splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def read_calls(cluster, port):
    """Calls of the commands rankd reads with, from INFO commandstats."""
    total = 0
    for line in cluster.cli("info", "commandstats", port=port).splitlines():
        name, _, rest = line.partition(":")
        if name in ("cmdstat_hgetall", "cmdstat_hmget", "cmdstat_lrange", "cmdstat_smismember"):
            total += int(rest.split(",")[0].split("=")[1])
    return total


def test_reads_from_replicas_answer_like_the_masters():
    e = env()
    cluster = e["cluster"]
    pairs = replicas(cluster)
    assert len(pairs) == 3, pairs

    def synced():
        return all(info_field(cluster, r, "replication", "master_repl_offset") ==
                   info_field(cluster, m, "replication", "master_repl_offset") for r, m in pairs)

    wait_until(synced, timeout=30, what="the replicas to reach their masters' offsets")
    before = {r: read_calls(cluster, r) for r, _ in pairs}
    reader = Rankd(plans_dir({"feed": patient_plan("feed")}), redis=ReplicaReads(cluster),
                   shards=2).wait_ready()
    try:
        # Replica connections are made with the first slot map: wait until reads use them.
        def on_replicas():
            assert answer(reader, "feed", 1) == answer(e["on_single"], "feed", 1)
            return all(read_calls(cluster, r) > before[r] for r, _ in pairs)

        wait_until(on_replicas, timeout=20, what="reads to reach every replica")
        for user in range(1, 41):
            # A generous deadline: sanitizer builds on a busy machine are slow, and a 504
            # would say nothing about what replicas answer.
            want = answer(e["on_single"], "feed", user, deadline_ms=10000)
            assert want[0] == 200, want
            got = answer(reader, "feed", user, deadline_ms=10000)
            assert got == want, (user, got, want)
        calls = {r: read_calls(cluster, r) - before[r] for r, _ in pairs}
        text = reader.metrics()
        for r, _ in pairs:
            assert (metric_value(text, "rankd_redis_cluster_node_commands_total",
                                 node=f"127.0.0.1:{r}") or 0) > 0, (r, text)
    finally:
        reader.stop()
    print(f"     40 feed answers with read_from=replica equal the single node's; reads per "
          f"replica {sorted(calls.values())}", flush=True)


def test_resharding_under_load_keeps_every_answer():
    e = env()
    cluster = e["cluster"]
    plans = RESHARD_PLANS
    want = {}
    for plan in plans:
        for user in range(1, 61):
            status, body = answer(e["on_single"], plan, user)
            assert status == 200, (plan, user, status, body)
            want[(plan, user)] = body
    before = e["on_cluster"].metrics()
    stop = threading.Event()
    results = {"ok": 0, "bad": []}
    lock = threading.Lock()

    def load(seed_):
        rng = random.Random(seed_)
        while not stop.is_set():
            key = (rng.choice(plans), rng.randrange(1, 61))
            try:
                # A generous deadline: the 2 cores here are shared with builds and tests.
                got = answer(e["on_cluster"], *key, deadline_ms=5000)
            except Exception as ex:  # a dropped connection is a failure too
                got = ("exception", repr(ex))
            with lock:
                if got == (200, want[key]):
                    results["ok"] += 1
                elif len(results["bad"]) < 5:
                    results["bad"].append((key, got))
                else:
                    results["bad"].append(None)

    threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    masters = sorted(cluster.masters(), key=lambda m: m[1])
    src, dst = masters[0], masters[1]
    t0 = time.monotonic()
    out = subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{cluster.ports[0]}",
                          "--cluster-from", src[0], "--cluster-to", dst[0],
                          "--cluster-slots", "1000", "--cluster-yes"],
                         capture_output=True, text=True, timeout=240)
    took = time.monotonic() - t0
    after_move = results["ok"]  # then requests after the move, on the new map
    wait_until(lambda: results["ok"] >= after_move + 20, timeout=30, what="20 answers after the move")
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    after_masters = {m[0]: m[2] for m in cluster.masters()}
    assert after_masters[src[0]] == src[2] - 1000, (src, after_masters)
    assert after_masters[dst[0]] == dst[2] + 1000, (dst, after_masters)
    assert not results["bad"], f"{len(results['bad'])} bad answers, e.g. {results['bad'][:5]}"
    after = e["on_cluster"].metrics()

    def delta(name, **labels):
        return (metric_value(after, name, **labels) or 0) - (metric_value(before, name, **labels) or 0)

    moved = delta("rankd_redis_cluster_redirects_total", kind="moved")
    asked = delta("rankd_redis_cluster_redirects_total", kind="ask")
    refreshes = delta("rankd_redis_cluster_slot_map_refreshes_total")
    assert results["ok"] > 50, results["ok"]
    assert moved + asked > 0, (moved, asked)
    print(f"     reshard of 1000 slots took {took:.1f}s; {results['ok']} answers, all 200 and "
          f"equal; redirects followed: {moved:.0f} MOVED, {asked:.0f} ASK; "
          f"{refreshes:.0f} slot map refreshes", flush=True)


# The plans of the cache test: cached copies (`cache: true` on every IO node that takes
# it) and uncached ones, both patient (no node timeouts: see `patient`).
CACHE_PLANS = ["feed", "home_light"]
CACHEABLE_OPS = {"viewer", "follow", "recommendation", "media", "features"}


def cache_plan(name, cached):
    plan = patient_plan(name)
    plan["name"] = f"{name}_{'cached' if cached else 'uncached'}"
    for node in plan["nodes"]:
        node["params"].pop("cache", None)
        if cached and node["op"] in CACHEABLE_OPS:
            node["params"]["cache"] = True
    return plan


def key_slot(key):
    """Redis Cluster's slot of a key without a hash tag: CRC16 (XMODEM) mod 16384."""
    crc = 0
    for byte in key.encode():
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


def master_slots(cluster, node_id):
    """The slots of one master, ascending, from CLUSTER NODES."""
    for line in cluster.cli("cluster", "nodes", port=live_port(cluster)).splitlines():
        parts = line.split()
        if parts[0] == node_id:
            out = []
            for r in parts[8:]:
                if not r.startswith("["):
                    a, _, b = r.partition("-")
                    out.extend(range(int(a), int(b or a) + 1))
            return sorted(out)
    raise AssertionError(f"no node {node_id}")


def cluster_writes(cluster, commands):
    """Sends the commands (lists of words) through `redis-cli -c`, which follows MOVED and
    ASK, one after the other; returns once each was acknowledged with an integer."""
    text = "".join(" ".join(map(str, c)) + "\n" for c in commands)
    out = subprocess.run(["redis-cli", "-c", "-h", "127.0.0.1", "-p", str(live_port(cluster))],
                         input=text, capture_output=True, text=True, timeout=60)
    acks = [line for line in out.stdout.splitlines() if line.strip().lstrip("-").isdigit()]
    assert out.returncode == 0 and len(acks) == len(commands), (out.stdout[-2000:], out.stderr[-2000:])


def cluster_sets(cluster, commands):
    """Like cluster_writes, for commands Redis acknowledges with OK or an integer (SET,
    ZADD, SADD); values are single-quoted for redis-cli (they hold no single quote)."""
    text = "".join(" ".join(f"'{w}'" for w in c) + "\n" for c in commands)
    out = subprocess.run(["redis-cli", "-c", "-h", "127.0.0.1", "-p", str(live_port(cluster))],
                         input=text, capture_output=True, text=True, timeout=60)
    acks = [line for line in out.stdout.splitlines()
            if line.strip() == "OK" or line.strip().lstrip("-").isdigit()]
    assert out.returncode == 0 and len(acks) == len(commands), (out.stdout[-2000:], out.stderr[-2000:])


def test_templated_keys_and_string_ids_on_the_cluster():
    """A declared schema (json, zset and set families, str ids, a key template with text
    after {id}) over keys spread across the cluster's slots answers as on one
    redis-server, with the cache on, and a write through the cluster is seen."""
    e = env()
    cluster = e["cluster"]
    schema = {"schema_version": 1, "families": {
        "who": {"type": "json", "key": "c:who:{id}:v1", "id": "str", "fields": {"lang": "str"}},
        "doc": {"type": "json", "key": "c:doc:{id}:v1", "id": "str", "fields": {"n": "i64", "tag": "str"}},
        "pick": {"type": "zset", "key": "c:pick:{id}", "id": "str", "members": "str"},
        "seen": {"type": "set", "key": "c:seen:{id}", "id": "str", "members": "str"}}}
    plan = {"schema_version": 1, "name": "picks", "nodes": [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"family": "who", "cache": True}},
        {"node_id": "r", "op": "recommendation", "inputs": ["v"],
         "params": {"family": "pick", "fanout": 20, "score_as": "s", "cache": True}},
        {"node_id": "h", "op": "features", "inputs": ["r"],
         "params": {"family": "doc", "fields": ["n", "tag"], "cache": True}},
        {"node_id": "f", "op": "seen_filter", "inputs": ["h"], "params": {"family": "seen"}}],
        "output": {"node": "f"}}
    commands = []
    for u in range(20):
        commands.append(["SET", f"c:who:u{u}:v1", json.dumps({"lang": "de"}).replace(" ", "")])
        picks = [f"d{(u * 7 + k) % 60}" for k in range(15)]
        commands.append(["ZADD", f"c:pick:u{u}"] + [w for k, d in enumerate(picks) for w in (str(k), d)])
        commands.append(["SADD", f"c:seen:u{u}", picks[3], picks[9]])
    for d in range(60):
        commands.append(["SET", f"c:doc:d{d}:v1", json.dumps({"n": d, "tag": f"t{d % 5}"}).replace(" ", "")])
    cluster_sets(cluster, commands)
    single = Redis()
    single.execute_many(commands)
    d = temp_dir("cluster-schema-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(schema, f)
    with open(os.path.join(d, "picks.plan.json"), "w") as f:
        json.dump(plan, f)
    on_cluster = Rankd(d, redis=cluster, shards=2, extra_args=["--cache-mb", "8"]).wait_ready()
    on_single = Rankd(d, redis=single).wait_ready()
    for rnd in range(2):  # misses, then hits
        for u in range(20):
            a, b = answer(on_cluster, "picks", f"u{u}"), answer(on_single, "picks", f"u{u}")
            assert a[0] == 200 and a == b, (rnd, u, a, b)
            assert len(a[1]["items"]) == 13, a
    cluster_sets(cluster, [["SET", "c:doc:d7:v1", json.dumps({"n": 700, "tag": "x"}).replace(" ", "")]])
    wait_until(lambda: any(i["n"] == 700 for i in answer(on_cluster, "picks", "u1")[1]["items"]),
               timeout=5, what="the write through the cluster seen")
    on_cluster.stop()
    on_single.stop()


def test_pages_on_the_cluster():
    """Pages (docs/api.md, "Pages") with the snapshots on the cluster: each is one key,
    routed by its slot, so they spread over the masters; every chain equals the single
    node's whole ranking, and a snapshot deleted on its master ends its chain (410)."""
    if SANITIZED:
        print("     skipped under sanitizers: a Redis Cluster case runs in the plain build only")
        return
    e = env()
    cluster, on_cluster, on_single = e["cluster"], e["on_cluster"], e["on_single"]
    cursors = {}
    for user in range(1, 13):
        want = answer(on_single, "feed", user, params={"limit": 100})
        first = answer(on_cluster, "feed", user, params={"limit": 100}, page_size=20)
        assert want[0] == 200 and first[0] == 200, (want, first)
        items, page = list(first[1]["items"]), first[1]
        cursors[user] = page.get("cursor")
        while "cursor" in page:
            status, page = answer(on_cluster, "feed", user, cursor=page["cursor"])
            assert status == 200, page
            items += page["items"]
        assert items == want[1]["items"], user
    held = {}
    for _, port, _ in cluster.masters():
        held[port] = [k for k in cluster.cli("keys", "rankd:page:*", port=port).split() if k]
    assert sum(len(k) for k in held.values()) >= len([c for c in cursors.values() if c]), held
    assert sum(1 for k in held.values() if k) >= 2, f"snapshots on one master only: {held}"
    # rankd's snapshots are its only keys here: delete them all, and a chain ends in 410.
    for port, keys in held.items():
        for k in keys:
            cluster.cli("del", k, port=port)
    user = next(u for u, c in cursors.items() if c)
    status, body = answer(on_cluster, "feed", user, cursor=cursors[user])
    assert status == 410 and body["error"]["code"] == "cursor_expired", (status, body)


def test_served_log_stream_on_the_cluster():
    """A served-log sink writing to a stream on the cluster (docs/served-log.md): every
    record lands in the stream's slot, and `rankd replay` reads it back through the
    cluster and reproduces every model score."""
    e = env()
    cluster = e["cluster"]
    plan = patient_plan("rerank")
    plan["name"] = "logged"
    plan["log"] = {"sample": 1.0, "sink": "s", "candidates": {"node": "top_k", "top": 5}}
    plans = plans_dir({"logged": plan})
    stream = f"served:{random.randrange(1 << 30)}"
    rankd = Rankd(plans, redis=cluster, shards=2, extra_args=[
        "--redis", f"logs={cluster.url()}",
        "--served-log", f"s=redis-stream://logs?stream={stream}&maxlen=10000"]).wait_ready()
    for u in range(1, 41):
        status, _, body = rankd.rank({"plan": "logged", "user_id": u}, timeout=30)
        assert status == 200 and "served_id" in body, body
    wait_until(lambda: metric_value(rankd.metrics(), "rankd_served_log_records_total",
                                    sink="s", outcome="written") == 40,
               timeout=20, what="40 records written to the cluster's stream")
    assert int(cluster.cli("-c", "XLEN", stream).strip()) == 40
    out = subprocess.run([RANKD, "replay", "--log", f"redis-stream://logs?stream={stream}",
                          "--redis", f"logs={cluster.url()}", "--plans", plans, "--enable-test-ops"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout.splitlines()[0])
    assert stats["model"] == "rerank" and stats["checked"] > 40 * 5 and stats["differ"] == 0
    assert rankd.stop() == 0


def check_cache_through_reshard_and_writes(tracking):
    """A rankd with --cache-mb 16 (--cache-tracking `tracking`) serves cached and uncached copies of feed and home_light.
    Warmed, then under load, 1,000 slots move while a writer rewrites the `likes` of the
    answers' items in those slots and pushes onto media lists there (through redis-cli -c,
    version after version). Every answer is a 200; 1 s after the reshard ended and the last
    write was acknowledged, every cached answer equals the uncached plan's, for each
    viewer, also once the cache holds the keys again, and the writes show in them."""
    e = env()
    cluster = e["cluster"]
    plans = {}
    for name in CACHE_PLANS:
        for cached in (True, False):
            plan = cache_plan(name, cached)
            plans[plan["name"]] = plan
    rankd = Rankd(plans_dir(plans), redis=cluster, shards=2,
                  extra_args=["--cache-mb", "16", "--cache-tracking", tracking]).wait_ready()
    try:
        # Sanitizer builds run 2-5x slower: half the viewers there.
        viewers = range(1, 41 if SANITIZED else 81)
        before = {}
        items = set()
        for name in CACHE_PLANS:
            for user in viewers:
                for _ in range(2):  # the second answer is served from the cache
                    status, body = answer(rankd, f"{name}_cached", user, deadline_ms=5000)
                    assert status == 200, (name, user, status, body)
                before[(name, user)] = body
                items.update(it["id"] for it in body["items"])
        warm = rankd.metrics()
        assert (metric_value(warm, "rankd_cache_hits_total") or 0) > 0, warm

        # The slots to move: redis-cli moves the source's lowest slots first.
        src = max(cluster.masters(), key=lambda m: m[2])
        dst = min((m for m in cluster.masters() if m[0] != src[0]), key=lambda m: m[2])
        moving = set(master_slots(cluster, src[0])[:1000])
        written = sorted(i for i in items if key_slot(f"item:{i}") in moving)
        authors = sorted({it["author"] for body in before.values() for it in body["items"]
                          if key_slot(f"media:{it['author']}") in moving})
        assert len(written) >= 20, (len(written), len(items))

        def write_version(v):
            cmds = [("HSET", f"item:{i}", "likes", v * 100000 + i % 1000) for i in written]
            cmds += [("LPUSH", f"media:{a}", written[(v + a) % len(written)]) for a in authors]
            cluster_writes(cluster, cmds)

        stop = threading.Event()
        results = {"ok": 0, "bad": []}
        lock = threading.Lock()

        def load(seed_):
            rng = random.Random(seed_)
            while not stop.is_set():
                plan = f"{rng.choice(CACHE_PLANS)}_{rng.choice(['cached', 'uncached'])}"
                try:
                    got = answer(rankd, plan, rng.choice(viewers), deadline_ms=5000)
                except Exception as ex:
                    got = ("exception", repr(ex))
                with lock:
                    if got[0] == 200:
                        results["ok"] += 1
                    elif len(results["bad"]) < 5:
                        results["bad"].append((plan, got))

        threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        # Its output goes to a file: it prints two lines per slot, more than a pipe holds.
        with tempfile.TemporaryFile("w+") as log:
            reshard = subprocess.Popen(
                ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{cluster.ports[0]}",
                 "--cluster-from", src[0], "--cluster-to", dst[0], "--cluster-slots", "1000",
                 "--cluster-yes"], stdout=log, stderr=subprocess.STDOUT)
            version = 0
            while reshard.poll() is None and time.monotonic() - t0 < 120:
                version += 1
                write_version(version)
                time.sleep(0.1)
            reshard.wait(timeout=120)
            took = time.monotonic() - t0
            log.seek(0)
            assert reshard.returncode == 0, log.read()[-2000:]
        version += 1
        write_version(version)  # after the last slot moved
        after_move = results["ok"]
        wait_until(lambda: results["ok"] >= after_move + 20, timeout=30, what="20 answers after the move")
        stop.set()
        for t in threads:
            t.join(timeout=60)
        assert not results["bad"], results["bad"]
        assert results["ok"] > 20, results["ok"]
        now_on = set(master_slots(cluster, dst[0]))
        assert all(key_slot(f"item:{i}") in now_on for i in written), "the items did not move"

        start = rankd.metrics()
        changed = 0
        for round_ in range(2):  # the second round mostly from the cache again
            for name in CACHE_PLANS:
                for user in viewers:
                    want = answer(rankd, f"{name}_uncached", user, deadline_ms=5000)
                    got = answer(rankd, f"{name}_cached", user, deadline_ms=5000)
                    assert want[0] == 200, (name, user, want)
                    want[1]["plan"] = got[1]["plan"]
                    assert got == want, (round_, name, user, got, want)
                    changed += round_ == 0 and got[1] != before[(name, user)]
        end = rankd.metrics()
        hits = (metric_value(end, "rankd_cache_hits_total") -
                metric_value(start, "rankd_cache_hits_total"))
        misses = (metric_value(end, "rankd_cache_misses_total") -
                  metric_value(start, "rankd_cache_misses_total"))
        invalidations = metric_value(end, "rankd_cache_invalidations_total")
        assert hits > misses, (hits, misses)
        assert changed > len(viewers) // 4, changed  # the writes reached the answers
    finally:
        rankd.stop()
    print(f"     {tracking}: reshard of 1000 slots took {took:.1f}s with {version} versions of {len(written)} "
          f"items' likes and {len(authors)} media lists written; {results['ok']} answers under "
          f"load, all 200; then {2 * len(CACHE_PLANS) * len(viewers)} cached answers equal the "
          f"uncached ones ({changed} changed by the writes; {hits:.0f} hits, {misses:.0f} misses; "
          f"{invalidations:.0f} invalidations in all)", flush=True)


def test_cache_stays_consistent_through_reshard_and_writes_bcast():
    check_cache_through_reshard_and_writes("bcast")


def test_cache_stays_consistent_through_reshard_and_writes_default():
    check_cache_through_reshard_and_writes("default")


def live_port(cluster):
    return next(p for p in cluster.ports if cluster.cli("ping", port=p).strip() == "PONG")


def test_removed_node_leaves_metrics_and_connections():
    e = env()
    cluster, rankd = e["cluster"], e["on_cluster"]
    # Nodes the previous test killed are forgotten first: redis-cli --cluster wants every
    # node it knows to answer.
    text = cluster.cli("cluster", "nodes", port=live_port(cluster))
    dead = [line.split()[0] for line in text.splitlines() if "fail" in line.split()[2]]
    for port in cluster.ports:
        for node_id in dead:
            cluster.cli("cluster", "forget", node_id, port=port)
    # The highest-port master goes: cluster.masters() asks the lowest ports first, so the
    # removed node (which may keep running, alone) is never the one asked.
    masters = sorted(cluster.masters(), key=lambda m: m[1])
    gone, keep = masters[-1], masters[0]
    node = f"127.0.0.1:{gone[1]}"
    for user in range(1, 31):
        got = answer(rankd, "feed", user)
        assert got[0] == 200, (user, got)
    text = rankd.metrics()
    assert (metric_value(text, "rankd_redis_cluster_node_commands_total", node=node) or 0) > 0, text
    for name in ("rankd_redis_cluster_node_errors_total", "rankd_redis_cluster_node_redirects_total",
                 "rankd_redis_cluster_node_slot_map_refreshes_total"):
        assert metric_value(text, name) is not None, name
    out = subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{keep[1]}",
                          "--cluster-from", gone[0], "--cluster-to", keep[0],
                          "--cluster-slots", str(gone[2]), "--cluster-yes"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    out = subprocess.run(["redis-cli", "--cluster", "del-node", f"127.0.0.1:{keep[1]}", gone[0]],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]

    def series_gone():
        for user in range(1, 11):  # MOVED replies make rankd fetch the new map
            answer(rankd, "feed", user)
        return f'node="{node}"' not in rankd.metrics()

    wait_until(series_gone, timeout=30, what=f"the series of {node} to leave /metrics")
    running = cluster.cli("ping", port=gone[1]).strip() == "PONG"
    if running:
        # Still running: no client but redis-cli's own CLIENT LIST.
        def unconnected():
            return len(cluster.cli("client", "list", port=gone[1]).strip().splitlines()) == 1

        wait_until(unconnected, timeout=10, what=f"rankd to close its connections to {node}")
    else:
        # Shut down by del-node: rankd stops trying to connect to it.
        def connect_failures():
            return metric_value(rankd.metrics(), "rankd_redis_errors_total", kind="connect_failed")

        # An absence, so watched over a time: longer than the longest reconnect backoff (2 s,
        # src/redis/options.h), within which a client still trying would have tried again.
        before = connect_failures()
        time.sleep(3)
        assert connect_failures() == before, (before, connect_failures())
    for user in range(1, 31):
        got = answer(rankd, "feed", user)
        assert got[0] == 200, (user, got)
    how = "it runs on, with no rankd client" if running else "it was shut down; no reconnects"
    print(f"     master {node} emptied and removed: its series left /metrics; {how}", flush=True)


def test_master_killed_under_load():
    """SIGKILL a master under load: answers are 200, 503 or 504 (never anything else, never
    a hang) until its replica is promoted; then 200s again, equal to the single node's,
    within 30 s of the kill."""
    e = env()
    cluster = e["cluster"]
    plan = "viewer_filter"
    want = {}
    for user in range(1, 41):
        status, body = answer(e["on_single"], plan, user)
        assert status == 200, (user, status, body)
        want[user] = body
    stop = threading.Event()
    log = []  # (time, status, equal)
    lock = threading.Lock()

    def load(seed_):
        rng = random.Random(seed_)
        while not stop.is_set():
            user = rng.randrange(1, 41)
            t0 = time.monotonic()
            try:
                status, body = answer(e["on_cluster"], plan, user)
            except Exception as ex:
                status, body = repr(ex), None
            with lock:
                log.append((t0, time.monotonic() - t0, status, body == want[user]))

    victim = sorted(cluster.masters(), key=lambda m: m[1])[0]
    with open(os.path.join(cluster.dir, str(victim[1]), "pid")) as fh:
        pid = int(fh.read().strip())
    threads = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()

    def answered():
        with lock:
            return len(log)
    wait_until(lambda: answered() >= 10, timeout=30, what="10 answers before the kill")
    killed_at = time.monotonic()
    os.kill(pid, 9)
    promoted_at = None
    while time.monotonic() - killed_at < 30:
        if len(cluster.masters()) >= 3 and all(m[1] != victim[1] for m in cluster.masters()):
            promoted_at = time.monotonic()
            break
        time.sleep(0.1)
    assert promoted_at is not None, "no replica was promoted within 30 s"
    # Requests after promotion: 200s again within 30 s of the kill.
    recovered_at = None
    while time.monotonic() - killed_at < 30:
        with lock:
            late = [r for r in log if r[0] > promoted_at]
        if len(late) >= 20 and all(r[2] == 200 for r in late[-20:]):
            recovered_at = min(r[0] for r in late[-20:])
            break
        time.sleep(0.1)
    recovered_n = answered()
    wait_until(lambda: answered() >= recovered_n + 10, timeout=30, what="10 answers after the recovery")
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert recovered_at is not None, "no run of 20 answers of 200 within 30 s of the kill"
    statuses = {}
    for _, took, status, _ in log:
        statuses[status] = statuses.get(status, 0) + 1
    assert set(statuses) <= {200, 503, 504}, statuses
    assert max(r[1] for r in log) < 5, "an answer took longer than 5 s"
    wrong = [r for r in log if r[2] == 200 and not r[3]]
    assert not wrong, f"{len(wrong)} 200 answers differ from the single node's"
    failed = [r for r in log if r[2] != 200]
    window = (f"non-200 answers from {min(r[0] for r in failed) - killed_at:.1f}s to "
              f"{max(r[0] + r[1] for r in failed) - killed_at:.1f}s after the kill"
              if failed else "no failed answer")
    print(f"     master :{victim[1]} SIGKILLed; its replica promoted {promoted_at - killed_at:.1f}s "
          f"after; {window}; answers by status {statuses}", flush=True)


if __name__ == "__main__":
    run_tests([
        ("every plan answers the same on the cluster", test_every_plan_answers_the_same_on_the_cluster),
        ("reads from replicas answer like the masters", test_reads_from_replicas_answer_like_the_masters),
        ("templated keys and string ids on the cluster", test_templated_keys_and_string_ids_on_the_cluster),
        ("pages with their snapshots on the cluster", test_pages_on_the_cluster),
        ("resharding under load keeps every answer", test_resharding_under_load_keeps_every_answer),
        ("a served-log stream on the cluster", test_served_log_stream_on_the_cluster),
        ("the cache (bcast tracking) stays consistent through a reshard and writes",
         test_cache_stays_consistent_through_reshard_and_writes_bcast),
        ("the cache (default tracking) stays consistent through a reshard and writes",
         test_cache_stays_consistent_through_reshard_and_writes_default),
        # It leaves the cluster with a dead node.
        ("a master killed under load: 503/504 until its replica is promoted", test_master_killed_under_load),
        # Last: it takes a master out of the cluster (forgetting the dead one first).
        ("a removed node leaves /metrics and rankd's connections",
         test_removed_node_leaves_metrics_and_connections),
    ])
