"""POST /events (docs/api.md, docs/events.md) on a real rankd and a real redis-server:
events counted into counters families and read back by a plan's `features` at the
request's time (against sums the test keeps itself), marks (ZADD GT, the newest `max`,
the TTL), all-or-nothing validation (nothing applied on a 400), --max-events-per-request,
Redis down -> 503 with nothing acknowledged, SIGKILL right after a 200 loses nothing,
aggregation across requests (--events-flush-ms), none with --events-flush-ms 0, the
metrics, Redis killed and restarted during a stream of events (nothing acknowledged lost),
and the bound on a counters key's buckets under sparse writes and its expiry, read in
Redis."""
import json
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from counter_layout import CounterKey  # noqa: E402
from harness import (Rankd, Redis, Traffic, metric_value, plans_dir, run_tests, temp_dir,  # noqa: E402
                     wait_until, write_plan)

ITEMS = 40


def schema(d, marks_max=5):
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "plans", "schema.json")) as f:
        s = json.load(f)
    s["events"] = {
        "impression": {"user": "i64", "item": "i64",
                       "marks": {"family": "served", "max": marks_max, "ttl_s": 600}},
        "click": {"user": "i64", "item": "i64"},
        "dwell": {"user": "i64", "item": "i64", "value": True},
    }
    s["families"]["item_counts"] = {
        "type": "counters", "key": "cnt:item:{id}", "by": "item",
        "count": ["impression", "click", "dwell"], "bucket_s": 60, "keep_s": 3600,
        "fields": {
            "clicks_1h": {"sum": "click", "window_s": 3600},
            "imps_1h": {"sum": "impression", "window_s": 3600},
            "dwell_1h": {"sum": "dwell", "window_s": 3600},
            "ctr_1h": {"rate": ["click", "impression"], "window_s": 3600, "prior": [1, 50]},
        }}
    s["families"]["served"] = {"type": "zset", "key": "served:{id}"}
    del s["families"]["user_counts"]  # the demo's, kept 7 days: only item_counts here
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(s, f)
    os.remove(os.path.join(d, "for_you.plan.json"))  # it reads the demo's item_counts fields
    write_plan(d, "counts", {
        "schema_version": 1, "name": "counts",
        "nodes": [
            {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": ITEMS}},
            {"node_id": "f", "op": "features", "inputs": ["src"],
             "params": {"family": "item_counts",
                        "fields": ["clicks_1h", "imps_1h", "dwell_1h", "ctr_1h"]}},
        ],
        "output": {"node": "f", "columns": ["id", "clicks_1h", "imps_1h", "dwell_1h", "ctr_1h"]},
    })
    return d


def post(r, events, raw=None):
    body = raw if raw is not None else json.dumps({"events": events})
    status, headers, data = r.request("POST", "/events", body)
    return status, headers, json.loads(data) if data else None


def counts(r):
    status, _, body = r.rank({"plan": "counts", "user_id": 1})
    assert status == 200, body
    return {it["id"]: it for it in body["items"]}


def test_counts_read_back_at_the_request_time():
    redis = Redis()
    r = Rankd(schema(plans_dir()), redis=redis, shards=2)
    rng = random.Random(7)
    now = int(time.time() * 1000)
    want = {i: {"click": 0, "impression": 0, "dwell": 0.0} for i in range(1, ITEMS + 1)}  # fixed_source: 1..count
    sent = 0
    for _ in range(30):
        batch = []
        for _ in range(rng.randint(1, 60)):
            item = min(int(rng.paretovariate(1.1)), ITEMS)  # Zipf-like over 1..ITEMS
            kind = rng.choice(["impression"] * 6 + ["click"] * 2 + ["dwell"])
            ev = {"type": kind, "user_id": rng.randrange(5), "item_id": item,
                  "ts_ms": now - rng.randrange(0, 3000 * 1000)}
            if kind == "dwell":
                ev["value"] = round(rng.uniform(0.5, 30), 3)
                want[item]["dwell"] += ev["value"]
            else:
                want[item][kind] += 1
            batch.append(ev)
        status, _, body = post(r, batch)
        assert status == 200 and body == {"accepted": len(batch)}, (status, body)
        sent += len(batch)
    got = counts(r)
    for i in range(1, ITEMS + 1):
        w, g = want[i], got[i]
        assert g["clicks_1h"] == w["click"], (i, g, w)
        assert g["imps_1h"] == w["impression"], (i, g, w)
        assert abs(g["dwell_1h"] - w["dwell"]) <= 1e-9 * max(1, w["dwell"]), (i, g, w)
        assert abs(g["ctr_1h"] - (w["click"] + 1) / (w["impression"] + 51)) < 1e-12, (i, g, w)
    text = r.metrics()
    accepted = sum(metric_value(text, "rankd_events_total", outcome="accepted", type=t) or 0
                   for t in ("impression", "click", "dwell"))
    assert accepted == sent, (accepted, sent)
    r.stop()
    redis.stop()


def test_marks_keep_the_newest_and_the_ttl():
    redis = Redis()
    r = Rankd(schema(plans_dir(), marks_max=3), redis=redis)
    now = int(time.time() * 1000)
    evs = [{"type": "impression", "user_id": 9, "item_id": i, "ts_ms": now - 1000 * (10 - i)}
           for i in range(6)]
    # Item 5 again, older: ZADD GT keeps its newest time.
    evs.append({"type": "impression", "user_id": 9, "item_id": 5, "ts_ms": now - 60000})
    assert post(r, evs)[0] == 200
    members = redis.execute("ZRANGE", "served:9", "0", "-1", "WITHSCORES")
    assert members[0::2] == ["3", "4", "5"], members
    assert int(members[-1]) == now - 5000, members
    assert 0 < int(redis.execute("TTL", "served:9")) <= 600
    assert redis.execute("EXISTS", "served:1") == 0  # clicks mark nothing
    r.stop()
    redis.stop()


def test_bad_events_apply_nothing():
    redis = Redis()
    r = Rankd(schema(plans_dir()), redis=redis, extra_args=["--max-events-per-request", "5"])
    now = int(time.time() * 1000)
    good = {"type": "click", "user_id": 1, "item_id": 3}
    cases = [
        ({"type": "nope", "user_id": 1, "item_id": 3}, "events[1].type"),
        ({"type": "click", "user_id": "x", "item_id": 3}, "events[1].user_id"),
        ({"type": "click", "user_id": 1}, "events[1].item_id: missing"),
        ({"type": "click", "user_id": 1, "item_id": 3, "value": 2}, "events[1].value"),
        ({"type": "dwell", "user_id": 1, "item_id": 3}, "events[1].value: missing"),
        ({"type": "dwell", "user_id": 1, "item_id": 3, "value": 2e9}, "events[1].value"),
        ({"type": "click", "user_id": 1, "item_id": 3, "ts_ms": now + 400000}, "events[1].ts_ms"),
        ({"type": "click", "user_id": 1, "item_id": 3, "ts_ms": now - 4000 * 1000},
         "events[1].ts_ms"),
        ({"type": "click", "user_id": 1, "item_id": 3, "served_id": "XYZ"}, "events[1].served_id"),
        ({"type": "click", "user_id": 1, "item_id": 3, "event_id": ""}, "events[1].event_id"),
        ({"type": "click", "user_id": 1, "item_id": 3, "colour": 1}, "events[1].colour"),
        ("not an object", "events[1]: must be an object"),
    ]
    for bad, where in cases:
        status, _, body = post(r, [good, bad])
        assert status == 400 and body["error"]["code"] == "bad_event", (bad, status, body)
        assert body["error"]["message"].startswith(where), (bad, body)
    for raw, what in [("{", "invalid JSON"), ('{"events": 3}', "events: missing or not an array"),
                      (json.dumps({"events": [good] * 6}), "over --max-events-per-request 5"),
                      (json.dumps({"events": [], "x": 1}), "x: unknown field")]:
        status, _, body = post(r, None, raw=raw)
        assert status == 400 and body["error"]["code"] == "bad_request", (raw, body)
        assert what in body["error"]["message"], (raw, body)
    assert redis.execute("DBSIZE") == 0, "a rejected request wrote something"
    assert post(r, [good] * 5)[0] == 200
    assert counts(r)[3]["clicks_1h"] == 5
    r.stop()
    redis.stop()


def test_redis_down_acknowledges_nothing():
    redis = Redis()
    r = Rankd(schema(plans_dir()), redis=redis)
    ev = [{"type": "click", "user_id": 1, "item_id": 2}]
    assert post(r, ev)[0] == 200
    redis.stop()
    status, headers, body = post(r, ev)
    assert status == 503 and body["error"]["code"] == "unavailable", (status, body)
    assert headers.get("retry-after") == "1"
    text = r.metrics()
    assert metric_value(text, "rankd_events_total", outcome="failed", type="click") == 1
    assert sum(metric_value(text, "rankd_events_flushes_failed_total", shard=s) or 0
               for s in range(1)) >= 1
    r.stop()


def test_sigkill_after_200_loses_nothing():
    # Many clients, each posting and counting what was acknowledged; rankd is killed with
    # SIGKILL in the middle. Every acknowledged event is in Redis (some unacknowledged
    # ones may be too: at least once).
    redis = Redis()
    r = Rankd(schema(plans_dir()), redis=redis, shards=2, extra_args=["--events-flush-ms", "5"])
    acked = [0] * 8
    errors = []
    stop = threading.Event()

    def client(k):
        try:
            while not stop.is_set():
                status, _, _ = post(r, [{"type": "click", "user_id": k, "item_id": 7}] * 10)
                if status != 200:
                    return
                acked[k] += 10
        except OSError:
            return  # the kill
        except Exception as e:  # noqa: BLE001: reported below
            errors.append(e)
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    r.proc.send_signal(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    assert not errors, errors
    r.wait_exit(expect=-signal.SIGKILL)
    total = sum(acked)
    assert total > 100, f"only {total} events acknowledged: the load did not run"
    r2 = Rankd(schema(plans_dir()), redis=redis)
    got = counts(r2)[7]["clicks_1h"]
    assert got >= total, f"{total} acknowledged, {got} in Redis"
    r2.stop()
    redis.stop()


def test_requests_share_a_flush():
    # 20 concurrent requests of one event each on one key and bucket, within a 50 ms
    # flush window: fewer flushes than requests, one increment each.
    redis = Redis()
    r = Rankd(schema(plans_dir()), redis=redis, extra_args=["--events-flush-ms", "50"])
    now = int(time.time() * 1000)
    ev = [{"type": "click", "user_id": 1, "item_id": 11, "ts_ms": now}]
    results = []
    threads = [threading.Thread(target=lambda: results.append(post(r, ev)[0])) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == [200] * 20, results
    text = r.metrics()
    flushes = metric_value(text, "rankd_events_flush_increments_count", shard=0)
    assert flushes < 20, f"{flushes} flushes for 20 requests"
    assert counts(r)[11]["clicks_1h"] == 20
    r.stop()
    redis.stop()


def test_flush_0_does_not_aggregate():
    # One request of 10 clicks on one key and bucket: one increment per event with
    # --events-flush-ms 0, one for all of them with a flush window; the same counts.
    now = int(time.time() * 1000)
    ev = [{"type": "click", "user_id": 1, "item_id": 11, "ts_ms": now}] * 10
    for flush_ms, increments in (("0", 10), ("20", 1)):
        redis = Redis()
        r = Rankd(schema(plans_dir()), redis=redis, extra_args=["--events-flush-ms", flush_ms])
        status, _, body = post(r, ev)
        assert status == 200 and body == {"accepted": 10}, (status, body)
        text = r.metrics()
        got = metric_value(text, "rankd_events_flush_increments_sum", shard=0)
        assert got == increments, f"--events-flush-ms {flush_ms}: {got} increments"
        assert counts(r)[11]["clicks_1h"] == 10
        r.stop()
        redis.stop()


def test_redis_stopped_during_a_stream():
    # Two clients post events without pause while redis-server (AOF, fsync on every
    # write: what it acknowledged survives its death) is killed and restarted twice. Every
    # answer is a 200 or a 503; afterwards each item counts at least the events
    # acknowledged for it (at least once) and at most those sent; rankd answers 200 again
    # after each restart (its scripts reloaded: NOSCRIPT) and exits cleanly at the end.
    redis = Redis(extra_args=["--appendonly", "yes", "--appendfsync", "always"])
    r = Rankd(schema(plans_dir()), redis=redis, shards=2)
    lock = threading.Lock()
    sent, acked, statuses = {}, {}, {}

    def client(k):
        rng = random.Random(k)

        def step():
            item = rng.randrange(1, ITEMS + 1)
            n = rng.randint(1, 5)
            with lock:
                sent[item] = sent.get(item, 0) + n
            status, _, body = post(r, [{"type": "click", "user_id": k, "item_id": item}] * n)
            assert status in (200, 503), (status, body)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    acked[item] = acked.get(item, 0) + n
        return step

    def answered(status):
        with lock:
            return statuses.get(status, 0)
    with Traffic(client(1), "client 1"), Traffic(client(2), "client 2"):
        for _ in range(2):
            ok = answered(200)
            wait_until(lambda: answered(200) >= ok + 50, what="200s with Redis up")
            redis.stop()
            refused = answered(503)
            wait_until(lambda: answered(503) >= refused + 20, what="503s with Redis down")
            redis.start()
            ok = answered(200)
            wait_until(lambda: answered(200) >= ok + 50, timeout=15, what="200s after the restart")
    assert r.proc.poll() is None, r.stderr()
    got = counts(r)
    short = {i: (got[i]["clicks_1h"], n) for i, n in acked.items() if got[i]["clicks_1h"] < n}
    assert not short, f"acknowledged events missing (item: (counted, acknowledged)): {short}"
    over = {i: (got[i]["clicks_1h"], sent.get(i, 0)) for i in got if got[i]["clicks_1h"] > sent.get(i, 0)}
    assert not over, f"more counted than sent (item: (counted, sent)): {over}"
    print(f"  answers: {statuses}, {sum(acked.values())} of {sum(sent.values())} events acknowledged")
    r.stop()
    redis.stop()


def test_the_bound_and_expiry_through_the_server():
    # Writes sparser than keep_s (10 s, buckets of 1 s) over 28 x keep_s, dated ahead (the
    # API takes 5 minutes ahead, so the test need not wait): after each, the key's ring
    # (tests/support/counter_layout.py) holds exactly the buckets of [top - keep_s, top],
    # each write's own older buckets dropped, the older ones replaced, the key's TTL at
    # most keep_s; a key no event touches expires after keep_s (2 s).
    d = temp_dir("rankd-events-bound-")
    write_plan(d, "noop", {"schema_version": 1, "name": "noop", "output": {"node": "src"}, "nodes": [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 1}}]})
    families = {name: {"type": "counters", "key": f"{name}:{{id}}", "by": "item", "count": ["click"],
                       "bucket_s": 1, "keep_s": keep, "fields": {"c": {"sum": "click", "window_s": keep}}}
                for name, keep in (("sparse", 10), ("brief", 2))}
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump({"schema_version": 1, "events": {"click": {"user": "i64", "item": "i64"}},
                   "families": families}, f)
    redis = Redis()
    r = Rankd(d, redis=redis)
    start = int(time.time()) + 5
    for step in range(15):
        top = start + 20 * step  # up to 285 s ahead
        evs = [{"type": "click", "user_id": 1, "item_id": 5, "ts_ms": (top - back) * 1000}
               for back in range(13)]
        status, _, body = post(r, evs)
        assert status == 200, (status, body)
        for name, keep in (("sparse", 10), ("brief", 2)):
            key = CounterKey(redis.execute("HGETALL", f"{name}:5"), ["click"], 1, keep)
            assert key.starts("click") == list(range(top - keep, top + 1)), (step, name, key.buckets)
            assert set(key.buckets.values()) == {1.0}, (step, name, key.buckets)
            assert key.slots == keep + 1 and key.blocks <= 2, (step, name, key.slots, key.blocks)
            assert 0 < redis.execute("PTTL", f"{name}:5") <= keep * 1000
    assert post(r, [{"type": "click", "user_id": 1, "item_id": 6}])[0] == 200
    assert redis.execute("EXISTS", "brief:6") == 1
    wait_until(lambda: redis.execute("EXISTS", "brief:6") == 0, timeout=5, what="brief:6 to expire")
    assert redis.execute("EXISTS", "sparse:6") == 1  # kept 10 s
    r.stop()
    redis.stop()


if __name__ == "__main__":
    run_tests([
        ("counts_read_back_at_the_request_time", test_counts_read_back_at_the_request_time),
        ("marks_keep_the_newest_and_the_ttl", test_marks_keep_the_newest_and_the_ttl),
        ("bad_events_apply_nothing", test_bad_events_apply_nothing),
        ("redis_down_acknowledges_nothing", test_redis_down_acknowledges_nothing),
        ("sigkill_after_200_loses_nothing", test_sigkill_after_200_loses_nothing),
        ("requests_share_a_flush", test_requests_share_a_flush),
        ("flush_0_does_not_aggregate", test_flush_0_does_not_aggregate),
        ("redis_stopped_during_a_stream", test_redis_stopped_during_a_stream),
        ("the_bound_and_expiry_through_the_server", test_the_bound_and_expiry_through_the_server),
    ])
