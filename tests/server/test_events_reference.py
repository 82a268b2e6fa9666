"""Counters against a reference the test computes itself (issue #45, docs/events.md): 50,000
random events (a fixed seed; items Zipf over 1,500, eight users, the count-only `view` and
`click` and the valued `dwell`, timestamps over the last hour in 10 s buckets, 5 minutes
ahead included) posted in batches of 1,000 through a real rankd, then every `sum` and
`rate` field of three counters families read by a plan for 1,000 ids and compared with
the reference: sums of counts exactly, values to 1e-9 relative. On one redis-server, and on
a Redis Cluster in the plain build only (as every cluster: docs/testing.md).

The families differ in keep_s: `item_long` keeps an hour, `item_short` ten minutes. The API
takes events from now − the longest keep_s (an hour), so most events are too old for
`item_short`: it must not count them (rankd_events_too_old_total counts each), while
`item_long` does. An event older than the longest keep_s is a 400 and changes nothing.

What the reference models (src/events/counter_layout.h): an event older than the
request's now − keep_s is not written to a family; a key is a ring of keep_s / bucket_s +
1 slots, the bucket of index i (start / bucket_s) in slot i mod ring, and a slot keeps the
newest bucket written to it, so a future-dated event on a key drops the bucket a ring
older than its own. The writers' "now" moves while the test posts, so no event is
generated in the buckets where that could decide (around T0 − keep_s); /rank has no
request time of its own, so a read whose start and answer fall in different buckets is
read again, and the window is the one of that bucket."""
import bisect
import json
import math
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from cluster import Cluster  # noqa: E402
from counter_layout import CounterKey  # noqa: E402
from harness import SANITIZED, Rankd, Redis, metric_value, run_tests, temp_dir, write_plan  # noqa: E402

SEED = 4545
EVENTS = 50000
BATCH = 1000
ITEMS = 1500     # Zipf over 1..ITEMS: ids past READ are written but not read
READ = 1000      # fixed_source: ids 1..READ
USERS = 8
BUCKET_S = 10
KEEP_LONG, KEEP_SHORT = 3600, 600
AHEAD_S = 300    # how far ahead an event may be (kEventMaxFutureMs)
POST_BUDGET_S = 120  # the posting must end within this: the margins below assume it

FAMILIES = {
    "item_long": {"by": "item", "keep_s": KEEP_LONG, "count": ["view", "click", "dwell"], "fields": {
        "views_1h": {"sum": "view", "window_s": 3600},
        "clicks_1h": {"sum": "click", "window_s": 3600},
        "dwell_1h": {"sum": "dwell", "window_s": 3600},
        "views_5m": {"sum": "view", "window_s": 300},
        "clicks_20m": {"sum": "click", "window_s": 1200},
        "ctr_1h": {"rate": ["click", "view"], "window_s": 3600, "prior": [1, 20]},
        "ctr_5m": {"rate": ["click", "view"], "window_s": 300},  # no prior: null without views
        "dwell_per_view_20m": {"rate": ["dwell", "view"], "window_s": 1200, "prior": [0.5, 2]},
    }},
    "item_short": {"by": "item", "keep_s": KEEP_SHORT, "count": ["view", "click"], "fields": {
        "s_views_10m": {"sum": "view", "window_s": 600},
        "s_clicks_10m": {"sum": "click", "window_s": 600},
        "s_ctr_10m": {"rate": ["click", "view"], "window_s": 600, "prior": [1, 1]},
    }},
    "user_counts": {"by": "user", "keep_s": KEEP_LONG, "count": ["click", "dwell"], "fields": {
        "u_clicks_1h": {"sum": "click", "window_s": 3600},
        "u_clicks_5m": {"sum": "click", "window_s": 300},
        "u_dwell_1h": {"sum": "dwell", "window_s": 3600},
    }},
}


def key_of(family, id_):
    return f"{family}:{id_}"


def plans():
    d = temp_dir("rankd-events-reference-")
    schema = {"schema_version": 1,
              "events": {"view": {"user": "i64", "item": "i64"},
                         "click": {"user": "i64", "item": "i64"},
                         "dwell": {"user": "i64", "item": "i64", "value": True}},
              "families": {name: {"type": "counters", "key": key_of(name, "{id}"), "by": f["by"],
                                  "count": f["count"], "bucket_s": BUCKET_S, "keep_s": f["keep_s"],
                                  "fields": f["fields"]}
                           for name, f in FAMILIES.items()}}
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(schema, f)
    nodes = [{"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": READ}}]
    columns = ["id"]
    for name, f in FAMILIES.items():
        nodes.append({"node_id": name, "op": "features", "inputs": [nodes[-1]["node_id"]],
                      "params": {"family": name, "fields": list(f["fields"])}})
        columns += list(f["fields"])
    write_plan(d, "counters", {"schema_version": 1, "name": "counters", "nodes": nodes,
                               "output": {"node": nodes[-1]["node_id"], "columns": columns}})
    return d


def bucket(s):
    return s - s % BUCKET_S


def generate(t0_s):
    """(batches of events, the events as (type, user, item, value, bucket)). Timestamps
    from the longest keep_s ago (less what the posting may take: the API's bound moves
    with it) to AHEAD_S ahead, none in the buckets where a writer's clock decides."""
    rng = random.Random(SEED)
    weights = [1 / (i ** 1.1) for i in range(1, ITEMS + 1)]
    cum = [0.0]
    for w in weights:
        cum.append(cum[-1] + w)
    lo_ms = (t0_s - KEEP_LONG + POST_BUDGET_S + 2 * BUCKET_S) * 1000
    hi_ms = (t0_s + AHEAD_S - 2 * BUCKET_S) * 1000
    # Around now − keep_s of each family: a key's cutoff there depends on when it is written.
    bands = [((t0_s - k - 2 * BUCKET_S) * 1000, (t0_s + POST_BUDGET_S - k + 2 * BUCKET_S) * 1000)
             for k in (KEEP_SHORT, KEEP_LONG)]
    batches, events = [], []
    for _ in range(EVENTS // BATCH):
        batch = []
        for _ in range(BATCH):
            ts = rng.randrange(lo_ms, hi_ms)
            while any(a <= ts <= b for a, b in bands):
                ts = rng.randrange(lo_ms, hi_ms)
            item = bisect.bisect_left(cum, rng.random() * cum[-1])
            item = min(max(item, 1), ITEMS)
            user = rng.randrange(1, USERS + 1)
            kind = rng.choices(["view", "click", "dwell"], weights=[8, 2, 1])[0]
            ev = {"type": kind, "user_id": user, "item_id": item, "ts_ms": ts}
            value = 1
            if kind == "dwell":
                value = ev["value"] = round(rng.uniform(0.1, 120.0), 3)
            batch.append(ev)
            events.append((kind, user, item, value, bucket(ts // 1000)))
        batches.append(batch)
    return batches, events


class Reference:
    """What each counters key holds: {(family, id): {(type, bucket start): sum}}, counted
    as the key's ring keeps them, and the counts each family skipped before the write."""

    def __init__(self, events, t0_s):
        by_key = {}
        for kind, user, item, value, b in events:
            for name, f in FAMILIES.items():
                if kind in f["count"]:
                    id_ = item if f["by"] == "item" else user
                    by_key.setdefault((name, id_), []).append((kind, value, b))
        self.keys = {}
        self.too_old = 0  # left out before the write: older than now − keep_s
        for (name, id_), evs in by_key.items():
            keep = FAMILIES[name]["keep_s"]
            ring = keep // BUCKET_S + 1
            written = []
            for kind, value, b in evs:
                if b < bucket(t0_s) - keep:
                    self.too_old += 1
                else:
                    written.append((kind, value, b))
            # A slot holds the newest bucket written to it: bucket index mod ring.
            newest = {}
            for _, _, b in written:
                slot = (b // BUCKET_S) % ring
                newest[slot] = max(newest.get(slot, b), b)
            sums = {}
            for kind, value, b in written:
                if newest[(b // BUCKET_S) % ring] == b:
                    sums[(kind, b)] = sums.get((kind, b), 0) + value
            self.keys[(name, id_)] = sums

    def window(self, name, id_, kind, window_s, now_bucket):
        sums = self.keys.get((name, id_), {})
        return sum(v for (k, b), v in sums.items()
                   if k == kind and now_bucket - window_s < b <= now_bucket)

    def row(self, id_, now_bucket):
        """The plan's row for `id_` read with `now` in the bucket `now_bucket`."""
        out = {}
        for name, f in FAMILIES.items():
            for field, spec in f["fields"].items():
                w = spec["window_s"]
                if "sum" in spec:
                    out[field] = self.window(name, id_, spec["sum"], w, now_bucket)
                    continue
                a, b = spec.get("prior", [0, 0])
                num = self.window(name, id_, spec["rate"][0], w, now_bucket)
                den = self.window(name, id_, spec["rate"][1], w, now_bucket) + a + b
                out[field] = None if den == 0 else (num + a) / den
        return out


def post_all(r, batches):
    """Posts the batches from two clients; every answer must be 200."""
    failures = []
    lock = threading.Lock()
    todo = list(batches)

    def client():
        while True:
            with lock:
                if not todo or failures:
                    return
                batch = todo.pop()
            status, _, body = r.request("POST", "/events", {"events": batch}, timeout=60)
            if status != 200 or json.loads(body) != {"accepted": len(batch)}:
                with lock:
                    failures.append((status, body[:300]))
    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


def read(r):
    """The plan's rows by id and the bucket of the read's `now`: a read that started and
    ended in different buckets is read again (its window is not known)."""
    for _ in range(5):
        before = time.time()
        status, _, body = r.rank({"plan": "counters", "user_id": 1}, timeout=60)
        after = time.time()
        assert status == 200, (status, body)
        if bucket(int(before)) == bucket(int(after)):
            return {it["id"]: it for it in body["items"]}, bucket(int(before))
    raise AssertionError("five reads in a row crossed a bucket boundary")


def close(got, want):
    """Values (sums of dwell, rates) to 1e-9 relative; null only where the reference has
    null."""
    if want is None or got is None:
        return got is want
    return abs(got - want) <= 1e-9 * abs(want)


# Sums of count-only types: exact.
EXACT = {field for f in FAMILIES.values() for field, spec in f["fields"].items()
         if spec.get("sum") in ("view", "click")}


def check_reads(r, ref):
    rows, now_bucket = read(r)
    assert sorted(rows) == list(range(1, READ + 1)), sorted(rows)[:10]
    bad = []
    compared = 0
    for id_ in range(1, READ + 1):
        for field, want in ref.row(id_, now_bucket).items():
            got = rows[id_][field]
            compared += 1
            if not (got == want if field in EXACT else close(got, want)):
                bad.append((id_, field, got, want))
    assert not bad, f"{len(bad)} of {compared} fields differ from the reference, e.g. {bad[:10]}"
    # The reference is not trivial: most items were viewed, some rates are null.
    assert sum(1 for id_ in rows if rows[id_]["views_1h"]) > READ // 2
    assert any(rows[id_]["ctr_5m"] is None for id_ in rows)
    assert all(rows[u]["u_clicks_1h"] for u in range(1, USERS + 1))


def check_layout(redis, ref):
    """On one redis-server: each key of the two item families holds exactly the
    reference's buckets, in its ring (at most keep_s / bucket_s + 1 slots, each where its
    bucket's index says: tests/support/counter_layout.py), with a TTL of at most keep_s; a
    key with nothing counted does not exist."""
    names = ["item_long", "item_short"]
    ids = range(1, ITEMS + 1)
    replies = redis.execute_many([c for n in names for i in ids
                                  for c in (("HGETALL", key_of(n, i)), ("PTTL", key_of(n, i)))])
    it = iter(replies)
    for name in names:
        f = FAMILIES[name]
        ring = f["keep_s"] // BUCKET_S + 1
        for id_ in ids:
            flat, pttl = next(it), next(it)
            want = {kb: v for kb, v in ref.keys.get((name, id_), {}).items() if v}
            if not want:
                assert not flat and pttl == -2, (name, id_, flat, pttl)
                continue
            assert 0 < pttl <= f["keep_s"] * 1000, (name, id_, pttl)
            key = CounterKey(flat, f["count"], BUCKET_S, f["keep_s"])
            got = key.buckets
            assert set(got) == set(want), (name, id_, sorted(set(got) ^ set(want))[:5])
            for kb, v in want.items():
                assert close(got[kb], v), (name, id_, kb, got[kb], v)
            assert key.slots <= ring and key.blocks <= math.ceil(ring / 8), (name, id_, key.slots)


def run(target, layout):
    """Posts the events through a rankd on `target` and checks the reads (and, on one
    redis-server, the keys themselves); returns rankd's /metrics at the end."""
    # A batch is a few thousand script calls: on a busy machine they may take longer than
    # the default deadline, which says nothing about the counts.
    r = Rankd(plans(), redis=target, shards=2, extra_args=["--deadline-ms", "30000"]).wait_ready()
    t0_s = int(time.time())
    batches, events = generate(t0_s)
    ref = Reference(events, t0_s)
    start = time.monotonic()
    post_all(r, batches)
    took = time.monotonic() - start
    assert took < POST_BUDGET_S - 5, f"posting took {took:.0f} s: the reference's margins assume less"
    print(f"  {EVENTS} events posted in {took:.1f} s")
    assert ref.too_old > 10000, ref.too_old  # the short family's skipped counts matter
    too_old = metric_value(r.metrics(), "rankd_events_too_old_total")
    assert too_old == ref.too_old, (too_old, ref.too_old)
    # Older than the longest keep_s: 400, nothing of the request applied.
    now_ms = int(time.time() * 1000)
    status, _, body = r.request("POST", "/events", {"events": [
        {"type": "click", "user_id": 1, "item_id": 1, "ts_ms": now_ms},
        {"type": "click", "user_id": 1, "item_id": 1, "ts_ms": now_ms - (KEEP_LONG + 60) * 1000}]})
    assert status == 400 and json.loads(body)["error"]["message"].startswith("events[1].ts_ms"), body
    check_reads(r, ref)
    if layout:
        check_layout(target, ref)
    text = r.metrics()
    r.stop()
    return text


def test_reference_on_one_redis():
    redis = Redis()
    run(redis, layout=True)
    redis.stop()


def test_reference_on_a_cluster():
    if SANITIZED:
        print("  skipped: a Redis Cluster runs in the plain build only (docs/testing.md)")
        return
    cluster = Cluster()
    metrics = run(cluster, layout=False)
    # Every write went to its slot's master at once: no redirect, and keys on every master.
    assert not metric_value(metrics, "rankd_redis_cluster_redirects_total"), "redirects"
    held = [int(cluster.cli("dbsize", port=port).strip()) for _, port, _ in cluster.masters()]
    assert len(held) == 3 and all(n > 100 for n in held), held
    cluster.down()


if __name__ == "__main__":
    run_tests([
        ("reference_on_one_redis", test_reference_on_one_redis),
        ("reference_on_a_cluster", test_reference_on_a_cluster),
    ])
