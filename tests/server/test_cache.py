"""The shard cache end to end (docs/cache.md): a real redis-server with the demo data set,
real rankd processes with --cache-mb, plans whose IO nodes take `cache: true`; both
--cache-tracking modes where they differ.

- Cached answers equal uncached ones: every plan with IO nodes, as a copy caching every
  IO node, over 50 viewers, twice (the second pass from the cache); and plans reading
  the same keys with different list heads and fields, interleaved.
- Writes are seen: writers change item likes and push new items onto media lists while
  readers run a cached plan; a request that starts 500 ms after a write was acknowledged
  reflects it (the time from ack to the first answer reflecting it is printed).
- A key invalidated while its read is in flight (made deterministic by a proxy holding
  Redis's reply, tests/support/resp_proxy.py) is used but not stored.
- Killing the invalidation connection drops every entry, as does killing the data
  connections with default tracking (with bcast they track nothing and lose nothing),
  and caching resumes, writes heard again.
- FLUSHALL drops every entry; answers follow the empty database, then the data written
  again.
- A key with a TTL leaves the cache when it expires in Redis, even though Redis (active
  expiry off) never says so; and no entry outlives --cache-ttl-ms.
- The byte budget holds under a working set many times its size, and the process's RSS
  stays within the budget (+25%) of an uncached rankd's under the same load.
- Bad cache flags stop start-up with an error naming the flag.

About a minute (two with ASan)."""
import copy
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SANITIZED, SOURCE_ROOT, Rankd, Redis, demo_data, metric_value,  # noqa: E402
                     plans_dir, proc_status_kib, run_tests, simple_plan, wait_until)
from resp_proxy import RespProxy  # noqa: E402

USERS = 2000
CACHED_OPS = ("viewer", "follow", "recommendation", "media", "features")
IO_OPS = CACHED_OPS + ("seen_filter",)
DEADLINE_MS = 10000  # generous: two cores shared with builds and other tests


EP = {"endpoint": "redis_default"}


def load_plan(path):
    with open(path) as f:
        return json.load(f)


def source_plans():
    """{name: plan} of plans/ and tests/plans/ with at least one IO node, no served
    state (whose every answer changes the next one: for_you) and no `ann` node (discover:
    its index is built after rankd starts, so its first answers are 503; the demo data
    here has no embeddings, and tests/server/test_discover.py covers it)."""
    out = {}
    for d in (os.path.join(SOURCE_ROOT, "plans"), os.path.join(SOURCE_ROOT, "tests", "plans")):
        for f in sorted(os.listdir(d)):
            if f.endswith(".plan.json"):
                plan = load_plan(os.path.join(d, f))
                if (any(n["op"] in IO_OPS for n in plan["nodes"]) and "served_state" not in plan
                        and not any(n["op"] == "ann" for n in plan["nodes"])):
                    out[f[:-len(".plan.json")]] = plan
    return out


def variant(plan, name, cache):
    """A copy named `name` without node timeouts and without `quality` (an optional node
    that times out under load, or fan-outs that a slow plan's quality scales down, would
    make two answers differ for reasons other than the cache), with `cache: true` on
    every IO node that takes it when `cache` (else on none)."""
    p = copy.deepcopy(plan)
    p["name"] = name
    p.pop("quality", None)
    for node in p["nodes"]:
        node.pop("timeout_ms", None)
        node["params"].pop("cache", None)
        if cache and node["op"] in CACHED_OPS:
            node["params"]["cache"] = True
    return p


def chain_plan(name, cache, fanout, per_author, fields):
    """viewer -> follow -> media -> features, with the given list heads and fields."""
    c = {"cache": True} if cache else {}
    return simple_plan(name, [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": dict(EP, **c)},
        {"node_id": "f", "op": "follow", "inputs": ["v"], "params": dict(EP, fanout=fanout, **c)},
        {"node_id": "m", "op": "media", "inputs": ["f"], "params": dict(EP, per_author=per_author, **c)},
        {"node_id": "h", "op": "features", "inputs": ["m"], "params": dict(EP, fields=fields, **c)},
    ], "h")


# Plans that read the same keys with different list heads and fields: a longer head than
# an entry holds must miss, a shorter one hit, and an item entry gains the fields a node
# lacked.
OVERLAPPING = [(5, 3, ["likes"]), (20, 10, ["likes", "quality"]), (3, 25, ["country", "likes"]),
               (40, 1, ["nsfw", "author", "age_s"])]


def likes_plan(name, cache, fanout=10, per_author=10):
    """viewer -> follow -> media -> features(likes): every item of the followed authors'
    list heads, with its likes."""
    return simple_plan(name, chain_plan(name, cache, fanout, per_author, ["likes"])["nodes"], "h",
                       columns=["id", "likes"])


def viewer_plan(name, cache):
    c = {"cache": True} if cache else {}
    return simple_plan(name, [{"node_id": "v", "op": "viewer", "inputs": [], "params": dict(EP, **c)}],
                       "v")


def rank(rankd, plan, user, explain=False):
    """(status, body) of one /rank request, the body without took_us."""
    req = {"plan": plan, "user_id": user, "deadline_ms": DEADLINE_MS}
    if explain:
        req["explain"] = True
    status, _, body = rankd.rank(req, timeout=30)
    if isinstance(body, dict):
        body.pop("took_us", None)
    return status, body


def items(rankd, plan, user):
    status, body = rank(rankd, plan, user)
    assert status == 200, (plan, user, status, body)
    return body["items"]


def cache_counts(rankd, plan, user):
    """(items, {node_id: (cache_hits, cache_misses)}) of an explained request."""
    status, body = rank(rankd, plan, user, explain=True)
    assert status == 200, (plan, user, status, body)
    return body["items"], {n["node_id"]: (n["cache_hits"], n["cache_misses"])
                           for n in body["nodes"] if "cache_hits" in n}


def gauge(rankd, name):
    """A cache metric summed over shards, once a tick covered everything before the call."""
    rankd.wait_for_tick()
    return metric_value(rankd.metrics(), name) or 0


def counter(rankd, name, **labels):
    return metric_value(rankd.metrics(), name, **labels) or 0


# ---- the shared environment ----------------------------------------------------------

_env = {}


def env():
    """One redis-server with USERS users; rankds on it: `one` and `one_b` (1 shard,
    default and bcast tracking), `two` and `bcast` (2 shards, default and bcast)."""
    if not _env:
        redis = Redis()
        demo_data(redis, USERS)
        extra = {}
        for name, plan in source_plans().items():
            extra[f"{name}_u"] = variant(plan, f"{name}_u", cache=False)
            extra[f"{name}_c"] = variant(plan, f"{name}_c", cache=True)
        extra.update(likes_u=likes_plan("likes_u", False), likes_c=likes_plan("likes_c", True),
                     viewer_u=viewer_plan("viewer_u", False), viewer_c=viewer_plan("viewer_c", True))
        for i, shape in enumerate(OVERLAPPING):
            extra[f"ov{i}_u"] = chain_plan(f"ov{i}_u", False, *shape)
            extra[f"ov{i}_c"] = chain_plan(f"ov{i}_c", True, *shape)
        plans = plans_dir(extra)
        _env.update(redis=redis, plans=plans, names=sorted(source_plans()))
        for key, shards, mode in (("one", 1, "default"), ("one_b", 1, "bcast"),
                                  ("two", 2, "default"), ("bcast", 2, "bcast")):
            _env[key] = Rankd(plans, redis=redis, shards=shards,
                              extra_args=["--cache-mb", "64", "--cache-tracking", mode])
    return _env


# ---- 1. cached answers equal uncached ones --------------------------------------------

def test_cached_answers_equal_uncached():
    e = env()
    rng = random.Random(1)
    viewers = [1, 2, USERS] + rng.sample(range(3, USERS), 47)
    checked = 0
    for rankd in (e["two"], e["bcast"]):
        before = counter(rankd, "rankd_cache_hits_total")
        for name in e["names"]:
            want = {v: items(e["one"], f"{name}_u", v) for v in viewers}
            for rnd in range(2):
                for v in viewers:
                    got = items(rankd, f"{name}_c", v)
                    assert got == want[v], (rankd.args, name, v, rnd, got, want[v])
                    checked += 1
        hits = counter(rankd, "rankd_cache_hits_total") - before
        assert hits > 0, hits
    misses = counter(e["two"], "rankd_cache_misses_total")
    print(f"     {checked} cached answers over {len(e['names'])} plans "
          f"({', '.join(e['names'])}) equal the uncached ones; on the 2-shard rankd "
          f"{counter(e['two'], 'rankd_cache_hits_total'):.0f} hits, {misses:.0f} misses",
          flush=True)


def test_overlapping_heads_and_fields():
    e = env()
    rng = random.Random(4)
    for _ in range(600):
        i, v = rng.randrange(len(OVERLAPPING)), rng.randrange(100, 160)
        assert items(e["one"], f"ov{i}_c", v) == items(e["one"], f"ov{i}_u", v), (OVERLAPPING[i], v)


# ---- 2. writes are seen -----------------------------------------------------------------

# Across runs: a likes version never repeats (each is above every likes the data set
# holds), nor does a pushed item's id.
_versions = itertools.count(10**12)
_new_items = itertools.count(900_000_000)


def check_writes_seen(rankd, label, viewers, seconds=4.0):
    e = env()
    redis = e["redis"]
    authors_of = {v: [int(a) for a in redis.execute("LRANGE", f"follow:{v}", 0, 9)] for v in viewers}
    authors = sorted({a for v in viewers for a in authors_of[v]})
    # Items of the first 5 of each list: at most 4 pushes per author keep them in the
    # plan's head of 10, so every answer of a follower holds them, as it holds each
    # pushed item once pushed.
    item_pool = sorted({int(i) for a in authors for i in redis.execute("LRANGE", f"media:{a}", 0, 4)})
    lock = threading.Lock()
    writes = []     # (ack time, "likes", item, version) | (ack time, "push", author, item)
    requests = []   # (start, end, viewer, {item: likes})
    stop = threading.Event()
    errors = []

    def guarded(fn):
        def run():
            try:
                fn()
            except Exception as ex:  # noqa: BLE001 - reported by the test
                errors.append(repr(ex))
                stop.set()
        return run

    def like_writer():
        rng = random.Random(2)
        while not stop.is_set():
            with lock:
                version = next(_versions)
                item = rng.choice(item_pool)
            assert redis.execute("HSET", f"item:{item}", "likes", version) == 0
            t = time.monotonic()
            with lock:
                writes.append((t, "likes", item, version))
            time.sleep(0.01)

    def pusher():
        rng = random.Random(3)
        pushes = {a: 0 for a in authors}
        while not stop.is_set():
            a = rng.choice([a for a in authors if pushes[a] < 4] or [None])
            if a is None:
                break
            pushes[a] += 1
            item = next(_new_items)
            out = redis.execute_many([("HSET", f"item:{item}", "author", a, "likes", 1),
                                      ("LPUSH", f"media:{a}", item)])
            assert not any(isinstance(r, Exception) for r in out), out
            t = time.monotonic()
            with lock:
                writes.append((t, "push", a, item))
                item_pool.append(item)
            time.sleep(0.05)

    def reader(k):
        rng = random.Random(10 + k)
        while not stop.is_set():
            v = rng.choice(viewers)
            t0 = time.monotonic()
            status, body = rank(rankd, "likes_c", v)
            t1 = time.monotonic()
            if status != 200:
                raise AssertionError(f"status {status}: {body}")
            with lock:
                requests.append((t0, t1, v, {r["id"]: r["likes"] for r in body["items"]}))

    threads = [threading.Thread(target=guarded(f), daemon=True)
               for f in [like_writer, pusher] + [lambda k=k: reader(k) for k in range(3)]]
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)

    follows = {v: set(authors_of[v]) for v in viewers}
    item_author = {}
    for a in authors:
        for i in redis.execute("LRANGE", f"media:{a}", 0, 9):
            item_author[int(i)] = a
    requests.sort()
    late = 0
    first = []   # per write: seconds from its ack to the first request reflecting it
    stale = []   # per write: seconds from its ack to the last request, started after the
    #              ack, that did not reflect it
    for w in writes:
        t_ack, kind, x, y = w
        if kind == "likes":
            item, version = x, y
            relevant = [r for r in requests if item_author[item] in follows[r[2]]]

            def reflects(r, item=item, version=version):
                return r[3].get(item) is not None and r[3][item] >= version
        else:
            author, item = x, y
            relevant = [r for r in requests if author in follows[r[2]]]

            def reflects(r, item=item):
                return item in r[3]
        after = [r for r in relevant if r[0] >= t_ack]
        for r in after:
            if r[0] >= t_ack + 0.5:
                late += 1
                assert reflects(r), (label, w, r[0] - t_ack, r[2], r[3].get(item))
        seen = [r[0] - t_ack for r in after if reflects(r)]
        if seen:
            first.append(seen[0])
        missed = [r[0] - t_ack for r in after if not reflects(r)]
        stale.append(max(missed) if missed else 0.0)
    n_likes = sum(1 for w in writes if w[1] == "likes")
    n_push = len(writes) - n_likes
    assert n_likes > 50 and n_push > 10 and late > 500, (n_likes, n_push, late)
    hits = counter(rankd, "rankd_cache_hits_total")
    assert hits > 0
    ms = sorted(1000 * s for s in first)
    print(f"     {label}: {len(requests)} requests, {n_likes} likes writes, {n_push} pushes; "
          f"{late} (request, write) pairs checked 500 ms on; ack -> first answer reflecting it: "
          f"p50 {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} writes; "
          f"stale answers started after an ack: {sum(1 for s in stale if s > 0)}, latest "
          f"{1000 * max(stale):.1f} ms after its ack", flush=True)


def test_writes_are_seen():
    check_writes_seen(env()["two"], "default tracking, 2 shards", [3, 4, 5, 6])


def test_writes_are_seen_bcast():
    check_writes_seen(env()["bcast"], "bcast tracking, 2 shards", [7, 8, 9, 10], seconds=3.0)


# ---- 3. invalidated in flight: used, not stored ---------------------------------------

def check_invalidated_while_in_flight(mode):
    e = env()
    redis = e["redis"]
    proxy = RespProxy(redis.port)
    rankd = Rankd(e["plans"], redis=proxy, shards=1,
                  extra_args=["--cache-mb", "16", "--cache-tracking", mode])
    try:
        wait_until(lambda: proxy.subscribers() == 1, what="the tracker to subscribe")

        # Tracking is ready once a read is stored: a second request then hits.
        def stores():
            return cache_counts(rankd, "viewer_c", 11)[1]["v"] == (1, 0)

        wait_until(stores, timeout=15, what="a stored read")

        def held_request(user, write=None, kill_tracker=False):
            """The first cached request for `user` with Redis's reply held until `write`
            (if any) was made and its invalidation counted (or the tracker's connection
            killed first, when kill_tracker: the write's invalidation is then lost);
            returns its items."""
            out = {}
            before = counter(rankd, "rankd_cache_invalidations_total")
            proxy.hold()
            try:
                t = threading.Thread(target=lambda: out.update(r=cache_counts(rankd, "viewer_c", user)),
                                     daemon=True)
                t.start()
                wait_until(lambda: proxy.answered("HGETALL", f"user:{user}"), timeout=10,
                           what="Redis to answer the HGETALL")
                assert t.is_alive()  # the reply is held: the request waits
                if kill_tracker:
                    assert redis.execute("CLIENT", "KILL", "TYPE", "pubsub") >= 1
                    wait_until(lambda: counter(rankd, "rankd_cache_invalidations_total") > before,
                               timeout=10, what="the tracker's loss to reach rankd")
                    assert redis.execute(*write) == 0
                elif write:
                    assert redis.execute(*write) == 0
                    wait_until(lambda: counter(rankd, "rankd_cache_invalidations_total") > before,
                               timeout=10, what="the invalidation to reach rankd")
                assert t.is_alive()
            finally:
                proxy.release()
            t.join(timeout=15)
            assert "r" in out, "the held request did not finish"
            got, counts = out["r"]
            assert counts["v"] == (0, 1), counts
            return got

        # Control: without a write, the held read is stored and the next request hits.
        old = redis.execute("HGET", "user:21", "country")
        got = held_request(21)
        assert got[0]["country"] == old, got
        got, counts = cache_counts(rankd, "viewer_c", 21)
        assert counts["v"] == (1, 0) and got[0]["country"] == old, (got, counts)

        # The key written while its reply is held: that answer shows the old value (Redis
        # read it before the write), and it was not stored: the next request reads again.
        old = redis.execute("HGET", "user:22", "country")
        try:
            got = held_request(22, write=("HSET", "user:22", "country", "ZZ"))
            assert got[0]["country"] == old, got
            got, counts = cache_counts(rankd, "viewer_c", 22)
            assert counts["v"] == (0, 1) and got[0]["country"] == "ZZ", (got, counts)
            got, counts = cache_counts(rankd, "viewer_c", 22)
            assert counts["v"] == (1, 0) and got[0]["country"] == "ZZ", (got, counts)
        finally:
            redis.execute("HSET", "user:22", "country", old)

        # The tracker lost while the read is in flight, and the key written then: no
        # invalidation can come (the connection it would go to is gone), so only the
        # flush at the loss keeps the reply out of the cache. Then, with the new tracker,
        # a stored read is invalidated again by a write.
        old = redis.execute("HGET", "user:23", "country")
        try:
            got = held_request(23, write=("HSET", "user:23", "country", "YY"), kill_tracker=True)
            assert got[0]["country"] == old, got
            wait_until(lambda: proxy.subscribers() == 1, what="the tracker to subscribe again")

            def fresh():
                got, counts = cache_counts(rankd, "viewer_c", 23)
                assert got[0]["country"] == "YY", (got, counts)
                return counts["v"] == (1, 0)

            wait_until(fresh, timeout=15, what="a stored read with the new tracker")
            before = counter(rankd, "rankd_cache_invalidations_total")
            assert redis.execute("HSET", "user:23", "country", "XX") == 0
            wait_until(lambda: counter(rankd, "rankd_cache_invalidations_total") > before,
                       timeout=10, what="an invalidation through the new tracker")
            got, counts = cache_counts(rankd, "viewer_c", 23)
            assert counts["v"] == (0, 1) and got[0]["country"] == "XX", (got, counts)
        finally:
            redis.execute("HSET", "user:23", "country", old)
    finally:
        proxy.release()
        rc = rankd.stop()
        proxy.close()
    assert rc == 0, rankd.stderr()[-3000:]


def test_invalidated_while_in_flight_is_not_stored():
    check_invalidated_while_in_flight("default")


def test_invalidated_while_in_flight_is_not_stored_bcast():
    check_invalidated_while_in_flight("bcast")


# ---- 4. lost invalidation connection ----------------------------------------------------

def check_lost_connections(key):
    e = env()
    rankd, redis = e[key], e["redis"]
    for kill in ("pubsub", "normal"):
        want = items(rankd, "feed_u", 7)
        assert items(rankd, "feed_c", 7) == want
        entries = gauge(rankd, "rankd_cache_entries")
        assert entries > 0, entries
        # Every rankd's trackers (pubsub) or data connections (normal), not this one.
        lost = counter(rankd, "rankd_redis_errors_total", kind="disconnect")
        data_conns = gauge(rankd, "rankd_redis_connections") - rankd.shards  # less a tracker each
        killed = redis.execute("CLIENT", "KILL", "TYPE", kill)
        assert killed >= 1, killed
        if kill == "normal" and key == "one_b":
            # BCAST: the tracker alone tracks; data connections lose nothing when they go.
            wait_until(lambda: counter(rankd, "rankd_redis_errors_total", kind="disconnect") >=
                       lost + data_conns, timeout=10, what="rankd to count its data connections lost")
            assert gauge(rankd, "rankd_cache_entries") == entries
        else:
            wait_until(lambda: gauge(rankd, "rankd_cache_entries") == 0, timeout=10,
                       what=f"the entries to go after CLIENT KILL TYPE {kill}")

        def hits_again():
            got, counts = cache_counts(rankd, "feed_c", 7)
            assert got == want
            return counts["m"][0] > 0 and counts["h"][0] > 0

        wait_until(hits_again, timeout=15, what=f"hits again after CLIENT KILL TYPE {kill}")

        # Writes are still heard, through the new tracker (or the new connections).
        items(rankd, "likes_c", 7)
        got, counts = cache_counts(rankd, "likes_c", 7)
        assert counts["h"][1] == 0, counts
        item = got[0]["id"]
        invalidated = counter(rankd, "rankd_cache_invalidations_total")
        assert redis.execute("HSET", f"item:{item}", "likes", next(_versions)) == 0
        wait_until(lambda: counter(rankd, "rankd_cache_invalidations_total") > invalidated,
                   timeout=10, what=f"the invalidation of item:{item} after CLIENT KILL TYPE {kill}")
        assert items(rankd, "likes_c", 7) == items(rankd, "likes_u", 7)


def test_lost_connections_flush_then_caching_resumes():
    check_lost_connections("one")


def test_lost_connections_flush_then_caching_resumes_bcast():
    check_lost_connections("one_b")


# ---- 6. keys with a TTL ------------------------------------------------------------------

TTL_MS = 600  # long enough to read the keys twice before they expire, on a busy machine


def check_key_with_ttl(key, user, item_user):
    e = env()
    rankd, redis = e[key], e["redis"]
    # Redis then expires keys only when they are read: no invalidation comes for a key
    # nobody reads, so only the cache's own expiry can drop the entry.
    assert redis.execute("DEBUG", "SET-ACTIVE-EXPIRE", "0") == "OK"
    try:
        item = items(rankd, "likes_u", item_user)[0]["id"]
        items(rankd, "likes_c", user)
        items(rankd, "likes_c", item_user)
        expired_before = counter(rankd, "rankd_cache_expirations_total")
        invalidated = counter(rankd, "rankd_cache_invalidations_total")
        assert redis.execute("PEXPIRE", f"user:{user}", TTL_MS) == 1
        assert redis.execute("PEXPIRE", f"item:{item}", TTL_MS) == 1
        t0 = time.monotonic()
        wait_until(lambda: counter(rankd, "rankd_cache_invalidations_total") >= invalidated + 2,
                   timeout=TTL_MS / 3000, what="the PEXPIREs' invalidations")
        # Read again (the PEXPIRE invalidated them) with their PTTL, then served from the
        # cache while the keys live.
        items(rankd, "likes_c", user)
        items(rankd, "likes_c", item_user)
        got, counts = cache_counts(rankd, "likes_c", user)
        assert counts["v"] == (1, 0) and got, counts
        got, counts = cache_counts(rankd, "likes_c", item_user)
        assert item in [r["id"] for r in got] and counts["h"][1] == 0, counts
        assert time.monotonic() - t0 < TTL_MS / 1000 - 0.1, "too slow to see hits before the TTL"
        # Served from the cache until the entries expire at the keys' TTL; then read again,
        # from a Redis where the keys are gone. (rankd's cache runs on real time: serve
        # takes no clock; tests/cache and tests/redis move a fake one.)
        wait_until(lambda: items(rankd, "likes_c", user) == [], timeout=10,
                   what=f"user:{user}'s entry to expire with its key")
        got_user = items(rankd, "likes_c", user)
        got_item = items(rankd, "likes_c", item_user)
        assert got_user == items(rankd, "likes_u", user)
        row = next(r for r in got_item if r["id"] == item)
        assert row["likes"] is None, row
        assert got_item == items(rankd, "likes_u", item_user)
        assert counter(rankd, "rankd_cache_expirations_total") >= expired_before + 2
    finally:
        redis.execute("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_key_with_ttl_expires_from_the_cache():
    check_key_with_ttl("one", 31, 32)


def test_key_with_ttl_expires_from_the_cache_bcast():
    check_key_with_ttl("one_b", 34, 35)


def test_ttl_cap():
    e = env()
    rankd = Rankd(e["plans"], redis=e["redis"], shards=1,
                  extra_args=["--cache-mb", "16", "--cache-ttl-ms", "300"])
    try:
        items(rankd, "viewer_c", 33)
        t0 = time.monotonic()
        _, counts = cache_counts(rankd, "viewer_c", 33)
        assert counts["v"] == (1, 0) or time.monotonic() - t0 > 0.25, counts
        wait_until(lambda: cache_counts(rankd, "viewer_c", 33)[1]["v"] == (0, 1), timeout=10,
                   what="the entry to expire at the 300 ms cap")
        assert counter(rankd, "rankd_cache_expirations_total") >= 1
    finally:
        assert rankd.stop() == 0


# ---- 5. FLUSHALL --------------------------------------------------------------------------

def test_flushall_drops_everything():
    e = env()
    rankd, redis = e["one"], e["redis"]
    viewers = list(range(40, 60))
    cached = (rankd, e["one_b"], e["bcast"])
    for r in cached:
        for v in viewers:
            assert items(r, "feed_c", v) == items(rankd, "feed_u", v)
        assert gauge(r, "rankd_cache_entries") > 0
    assert redis.execute("FLUSHALL") == "OK"
    for r in cached:
        wait_until(lambda r=r: gauge(r, "rankd_cache_entries") == 0, timeout=10,
                   what="the entries to go after FLUSHALL")
    for v in viewers[:5]:
        got = items(rankd, "feed_c", v)
        assert got == [] and got == items(rankd, "feed_u", v), got
    # Cache what the empty database says (missing user hashes, empty lists) for every
    # viewer, then write the data again into the empty database, without a flush: only
    # the invalidations of the keys written can make the cache forget those answers.
    for r in cached:
        for v in viewers:
            assert items(r, "feed_c", v) == []
        assert gauge(r, "rankd_cache_entries") > 0
    demo_data(redis, USERS, flush=False)
    for v in viewers:
        want = items(rankd, "feed_u", v)
        assert want, v
        for r in cached + (e["two"],):
            for _ in range(2):
                assert items(r, "feed_c", v) == want, (r.args, v)


# ---- 7. the byte budget -----------------------------------------------------------------

BUDGET_MB = 2  # the working set (~27 MiB of two-cache-line entries, 5,000 viewers) stays 10x larger


def distinct_keys(redis, plan, viewers):
    """How many keys the plan reads for these viewers: user, follow and recs per viewer,
    a media list per followed author, an item hash per distinct item."""
    params = {n["op"]: n["params"] for n in plan["nodes"]}
    fanout, recs, per_author = (params["follow"]["fanout"], params["recommendation"]["fanout"],
                                params["media"]["per_author"])
    lists = redis.execute_many([("LRANGE", f"{kind}:{v}", 0, n - 1) for v in viewers
                                for kind, n in (("follow", fanout), ("recs", recs))])
    authors = {a for lst in lists[0::2] for a in lst}
    media = redis.execute_many([("LRANGE", f"media:{a}", 0, per_author - 1) for a in authors])
    item_ids = {i for lst in lists[1::2] + media for i in lst}
    return 3 * len(viewers) + len(authors) + len(item_ids)


def test_budget_holds_and_rss_follows_it():
    redis = Redis()
    demo_data(redis, 10000, timeout=90)
    feed = load_plan(os.path.join(SOURCE_ROOT, "plans", "feed.plan.json"))
    plans = plans_dir({"feed_c": variant(feed, "feed_c", cache=True)})
    budget = BUDGET_MB << 20
    rng = random.Random(7)
    # Sanitizer builds run 3x slower: less load there, no working-set bound, and no
    # uncached run (its RSS is only compared with the cached one's outside sanitizers).
    viewers = rng.sample(range(1, 10001), 800 if SANITIZED else 5000)
    results = {}
    for mb in (BUDGET_MB,) if SANITIZED else (0, BUDGET_MB):
        rankd = Rankd(plans, redis=redis, shards=1, extra_args=["--cache-mb", str(mb)])
        samples = []
        stop = threading.Event()

        def sampler(rankd=rankd, samples=samples, stop=stop):
            while not stop.wait(0.05):
                samples.append(metric_value(rankd.metrics(), "rankd_cache_bytes") or 0)

        def load(part, rankd=rankd):
            for v in part:
                status, body = rank(rankd, "feed_c", v)
                assert status == 200, (status, body)

        threads = [threading.Thread(target=load, args=(viewers[k::3],), daemon=True) for k in range(3)]
        s = threading.Thread(target=sampler, daemon=True)
        s.start()
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        took = time.monotonic() - t0
        assert not any(t.is_alive() for t in threads)
        rankd.wait_for_tick()
        stop.set()
        s.join(timeout=10)
        text = rankd.metrics()
        results[mb] = dict(
            took=took, samples=samples,
            rss=proc_status_kib(rankd.proc.pid, "VmRSS") * 1024,
            hwm=proc_status_kib(rankd.proc.pid, "VmHWM") * 1024,
            bytes=metric_value(text, "rankd_cache_bytes") or 0,
            entries=metric_value(text, "rankd_cache_entries") or 0,
            misses=metric_value(text, "rankd_cache_misses_total") or 0,
            hits=metric_value(text, "rankd_cache_hits_total") or 0,
            evictions=metric_value(text, "rankd_cache_evictions_total") or 0)
        assert rankd.stop() == 0
    c, u = results[BUDGET_MB], results.get(0)
    assert len(c["samples"]) > 10, c["samples"]
    assert max(c["samples"]) <= budget, max(c["samples"])
    assert c["evictions"] > 0 and c["entries"] > 0, c
    per_entry = c["bytes"] / c["entries"]
    working_set = distinct_keys(redis, feed, viewers) * per_entry
    if not SANITIZED:
        assert working_set >= 10 * budget, (working_set, c)
    if not SANITIZED:  # ASan's shadow memory and quarantine alone exceed the bound
        assert c["rss"] <= u["rss"] + 1.25 * budget, (c["rss"], u["rss"])
    redis.stop()
    mib = 1 << 20
    uncached = (f"; RSS {c['rss'] / mib:.1f} MiB cached vs {u['rss'] / mib:.1f} MiB uncached "
                f"(HWM {c['hwm'] / mib:.1f} vs {u['hwm'] / mib:.1f}), uncached took {u['took']:.1f}s"
                if u else "")
    print(f"     {len(viewers)} feed requests cached in {c['took']:.1f}s; cache bytes max "
          f"{max(c['samples']) / mib:.2f} MiB of {BUDGET_MB} ({len(c['samples'])} samples), "
          f"{c['entries']:.0f} entries of ~{per_entry:.0f} B, {c['evictions']:.0f} evictions, "
          f"{c['hits']:.0f} hits, {c['misses']:.0f} misses (working set ~{working_set / mib:.0f} "
          f"MiB){uncached}", flush=True)


# ---- 8. bad flags --------------------------------------------------------------------------

def test_bad_cache_flags_stop_startup():
    plans = plans_dir()
    for flag, value in (("--cache-mb", "-1"), ("--cache-tracking", "nope"), ("--cache-ttl-ms", "x")):
        out = subprocess.run([RANKD, "serve", "--host", "127.0.0.1", "--port", "0", "--plans", plans,
                              "--enable-test-ops", flag, value], capture_output=True, text=True,
                             timeout=20)
        assert out.returncode != 0, (flag, value, out)
        assert flag in out.stderr, (flag, value, out.stderr)


if __name__ == "__main__":
    run_tests([
        ("bad_cache_flags_stop_startup", test_bad_cache_flags_stop_startup),
        ("cached_answers_equal_uncached", test_cached_answers_equal_uncached),
        ("overlapping_heads_and_fields", test_overlapping_heads_and_fields),
        ("writes_are_seen", test_writes_are_seen),
        ("writes_are_seen_bcast", test_writes_are_seen_bcast),
        ("invalidated_while_in_flight_is_not_stored", test_invalidated_while_in_flight_is_not_stored),
        ("invalidated_while_in_flight_is_not_stored_bcast",
         test_invalidated_while_in_flight_is_not_stored_bcast),
        ("lost_connections_flush_then_caching_resumes", test_lost_connections_flush_then_caching_resumes),
        ("lost_connections_flush_then_caching_resumes_bcast",
         test_lost_connections_flush_then_caching_resumes_bcast),
        ("key_with_ttl_expires_from_the_cache", test_key_with_ttl_expires_from_the_cache),
        ("key_with_ttl_expires_from_the_cache_bcast", test_key_with_ttl_expires_from_the_cache_bcast),
        ("ttl_cap", test_ttl_cap),
        ("flushall_drops_everything", test_flushall_drops_everything),
        ("budget_holds_and_rss_follows_it", test_budget_holds_and_rss_follows_it),
    ])
