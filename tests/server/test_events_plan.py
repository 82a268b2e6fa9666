"""The plan side of events (#45) end to end, a real rankd on a real redis-server
(docs/plan.md): {"from": node, "key": column} expressions (the viewer's values, null
without a viewer row); seen_filter on a zset, with and without within_s; a plan's
served_state (each answer's items written after it, so that five calls in a row never
repeat an item; max and TTL kept; pages; explain, shadow and console runs write nothing;
failed and dropped writes counted, never a request's error). About 5 s."""
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import Rankd, Redis, free_port, metric_value, run_tests, temp_dir, wait_until, write_plan  # noqa: E402

SCHEMA = {"schema_version": 1, "families": {
    "user": {"type": "hash", "key": "user:{id}", "fields": {"age": "i64", "fav": "str"}},
    "seen": {"type": "set", "key": "seen:{id}"},
    "zseen": {"type": "zset", "key": "zseen:{id}"},
    "served": {"type": "zset", "key": "served:{id}"},
    "small": {"type": "zset", "key": "small:{id}"},
    "shadowed": {"type": "zset", "key": "shadowed:{id}"},
}}


def plan(name, nodes, output, expr_table=None, pred_table=None, **top):
    p = {"schema_version": 1, "name": name, "nodes": nodes, "expr_table": expr_table or {},
         "pred_table": pred_table or {}, "output": {"node": output}}
    p.update(top)
    return p


SRC = {"node_id": "src", "op": "fixed_source", "params": {"count": 5}}
VIEWER = {"node_id": "v", "op": "viewer", "params": {}}
# The viewer's row never passes: it only makes v an input of what follows the concat.
NONE = {"node_id": "none", "op": "filter", "inputs": ["v"], "params": {"pred": "never"}}
CAT = {"node_id": "c", "op": "concat", "inputs": ["src", "none"], "params": {}}
NEVER = {"never": {"op": "is_null", "arg": {"key": "id"}}}


def seen_plan(name, family, within_s=0, **top):
    params = {"family": family}
    if within_s:
        params["within_s"] = within_s
    return plan(name, [dict(SRC, params={"count": 20}),
                       {"node_id": "u", "op": "seen_filter", "inputs": ["src"], "params": params},
                       {"node_id": "t", "op": "take", "inputs": ["u"], "params": {"count": 3}}],
                "t", **top)


PLANS = {
    "from_vm": plan("from_vm", [SRC, VIEWER, NONE, CAT,
                                {"node_id": "x", "op": "vm", "inputs": ["c"], "params": {"out_key": "x", "expr": "x"}},
                                {"node_id": "f", "op": "vm", "inputs": ["x"], "params": {"out_key": "f", "expr": "f"}}],
                    "f", {"x": {"op": "+", "args": [{"key": "score"}, {"from": "v", "key": "age"}]},
                          "f": {"from": "v", "key": "fav"}}, NEVER),
    "from_filter": plan("from_filter", [SRC, VIEWER, NONE, CAT,
                                        {"node_id": "k", "op": "filter", "inputs": ["c"], "params": {"pred": "k"}}],
                        "k", {}, dict(NEVER, k={"op": "cmp", "cmp": ">=", "lhs": {"key": "score"},
                                               "rhs": {"op": "/", "args": [{"from": "v", "key": "age"}, {"const": 5}]}})),
    "seen_set": seen_plan("seen_set", "seen"),
    "seen_zset": seen_plan("seen_zset", "zseen"),
    "seen_recent": seen_plan("seen_recent", "zseen", within_s=60),
    "ss": seen_plan("ss", "served", served_state={"family": "served", "max": 100, "ttl_s": 3600}),
    "ss_small": seen_plan("ss_small", "small", served_state={"family": "small", "max": 4, "ttl_s": 50}),
    "prim": plan("prim", [SRC], "src"),
    # No Redis read: it answers while Redis is stopped, and only its write waits.
    "ss_blind": plan("ss_blind", [SRC], "src", served_state={"family": "served", "max": 10, "ttl_s": 60}),
    "ss_shadow": seen_plan("ss_shadow", "shadowed", served_state={"family": "shadowed", "max": 10, "ttl_s": 60}),
}
EXPERIMENTS = {"experiments": [{"name": "e", "plan": "prim", "salt": "s", "variants": [],
                                "shadow": [{"plan": "ss_shadow", "percent": 100, "compare_top": 3}]}]}

_env = {}


def env():
    if not _env:
        d = temp_dir("rankd-events-plan-")
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(SCHEMA, f)
        with open(os.path.join(d, "experiments.json"), "w") as f:
            json.dump(EXPERIMENTS, f)
        for name, p in PLANS.items():
            write_plan(d, name, p)
        redis = Redis()
        metrics_port = free_port()
        s = Rankd(d, redis=redis, extra_args=["--metrics-port", str(metrics_port), "--console"])
        s.wait_ready()
        _env.update(redis=redis, rankd=s, metrics_port=metrics_port)
    return _env["rankd"], _env["redis"]


def on_metrics_address(method, path, body=None):
    """A request to the metrics address (with --metrics-port, /metrics is there only; the
    console's /rank too)."""
    c = http.client.HTTPConnection("127.0.0.1", _env["metrics_port"], timeout=10)
    try:
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metrics():
    status, text = on_metrics_address("GET", "/metrics")
    assert status == 200, status
    return text.decode()


def rank(s, plan_name, user_id, **extra):
    status, _, body = s.rank(dict({"plan": plan_name, "user_id": user_id}, **extra))
    assert status == 200, (status, body)
    return body


def ids(body):
    return [it["id"] for it in body["items"]]


def writes(s, plan_name, outcome="ok"):
    return metric_value(metrics(), "rankd_served_state_writes_total", plan=plan_name, outcome=outcome) or 0


def wait_writes(s, plan_name, n):
    wait_until(lambda: writes(s, plan_name) >= n, timeout=5, what=f"{n} served-state writes of {plan_name}")


def members(redis, key):
    return sorted(int(m) for m in redis.execute("ZRANGE", key, "0", "-1"))


def test_from_reads_the_viewer():
    s, redis = env()
    redis.execute("HSET", "user:1", "age", "10", "fav", "a")
    body = rank(s, "from_vm", 1)
    assert [(it["id"], it["x"], it["f"]) for it in body["items"]] == \
        [(i, float(i + 10), "a") for i in range(1, 6)], body
    # No viewer row: every from value is null, in vm and filter alike.
    body = rank(s, "from_vm", 2)
    assert [(it["x"], it["f"]) for it in body["items"]] == [(None, None)] * 5, body
    assert ids(rank(s, "from_filter", 1)) == [2, 3, 4, 5]  # score >= 10 / 5
    assert ids(rank(s, "from_filter", 2)) == []  # a null operand: false


def test_seen_filter_on_a_zset():
    s, redis = env()
    now = int(time.time() * 1000)
    redis.execute("SADD", "seen:3", "2")
    redis.execute("ZADD", "zseen:3", str(now), "1", str(now - 120_000), "2", str(now - 30_000), "4")
    assert ids(rank(s, "seen_set", 3)) == [1, 3, 4]
    assert ids(rank(s, "seen_zset", 3)) == [3, 5, 6]  # every member counts
    assert ids(rank(s, "seen_recent", 3)) == [2, 3, 5]  # only those of the last 60 s
    assert ids(rank(s, "seen_recent", 4)) == [1, 2, 3]  # no key: nothing seen


def test_served_state_never_repeats():
    s, redis = env()
    shown = []
    for call in range(5):
        shown += ids(rank(s, "ss", 10))
        wait_writes(s, "ss", call + 1)
    assert shown == list(range(1, 16)), shown
    assert members(redis, "served:10") == list(range(1, 16))
    assert 3_590_000 < int(redis.execute("PTTL", "served:10")) <= 3_600_000
    assert writes(s, "ss", "failed") == 0 and writes(s, "ss", "dropped") == 0


def test_served_state_max_and_ttl():
    s, redis = env()
    base = writes(s, "ss_small")
    for call in range(3):
        rank(s, "ss_small", 11)
        wait_writes(s, "ss_small", base + call + 1)
        assert int(redis.execute("ZCARD", "small:11")) == min(4, 3 * (call + 1))
        time.sleep(0.02)  # the next call's ts_ms is later
    # Call 1 wrote 1 2 3; call 2 wrote 4 5 6 (newest 4: 3 4 5 6, equal scores ranked by
    # member); call 3 saw those, wrote 1 2 7 (newest 4: 1 2 7 and 6).
    assert members(redis, "small:11") == [1, 2, 6, 7]
    assert 0 < int(redis.execute("PTTL", "small:11")) <= 50_000


def test_served_state_pages():
    s, redis = env()
    base = writes(s, "ss")
    first = rank(s, "ss", 12, page_size=2)
    assert ids(first) == [1, 2] and first["cursor"]
    wait_writes(s, "ss", base + 1)
    assert members(redis, "served:12") == [1, 2]  # the first page's items only
    later = rank(s, "ss", 12, cursor=first["cursor"])
    assert ids(later) == [3]
    wait_writes(s, "ss", base + 2)
    assert members(redis, "served:12") == [1, 2, 3]


def test_no_served_state_for_explain_shadow_console():
    s, redis = env()
    base = writes(s, "ss")
    body = rank(s, "ss", 13, explain=True)
    assert ids(body) == [1, 2, 3] and "nodes" in body
    # The console's runs come on the metrics address.
    status, text = on_metrics_address("POST", "/rank", {"plan": "ss", "user_id": 13})
    assert status == 200 and ids(json.loads(text)) == [1, 2, 3], (status, text)
    # A shadow of prim runs ss_shadow, whose served_state is never written.
    before = metric_value(metrics(), "rankd_shadow_runs_total", plan="ss_shadow", outcome="ok") or 0
    rank(s, "prim", 13)
    wait_until(lambda: (metric_value(metrics(), "rankd_shadow_runs_total", plan="ss_shadow",
                                     outcome="ok") or 0) > before, timeout=5, what="the shadow run")
    # A write of another user after them: on one connection, in order, so theirs would be in.
    rank(s, "ss", 14)
    wait_writes(s, "ss", base + 1)
    assert writes(s, "ss") == base + 1
    assert redis.execute("EXISTS", "served:13") == 0
    assert redis.execute("EXISTS", "shadowed:13") == 0
    assert writes(s, "ss_shadow") == 0


def test_served_state_failures_are_counted_never_errors():
    """Redis stopped: every answer is 200; past 256 writes in flight they are dropped, the
    others fail after 1 s; every one is counted. Last: it leaves Redis's connection busy."""
    s, redis = env()
    n = 600
    redis.suspend()
    try:
        c = s.conn()
        for i in range(n):
            c.request("POST", "/rank", json.dumps({"plan": "ss_blind", "user_id": 20 + i % 7}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
        c.close()
        time.sleep(1.5)  # past the writes' 1 s
    finally:
        redis.resume()

    def counted():
        return sum(writes(s, "ss_blind", o) for o in ("ok", "failed", "dropped"))
    wait_until(lambda: counted() == n, timeout=10, what="every write counted")
    assert writes(s, "ss_blind", "dropped") > 0, metrics()
    assert writes(s, "ss_blind", "failed") > 0, metrics()


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
