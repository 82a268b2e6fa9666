"""The ann op and its indexes end to end (docs/vectors.md, "Indexes"): a real redis-server
holding 50,000 clustered 64-dimensional item vectors and 200 viewers' vectors; a real rankd
that builds an index per metric (ip, cosine, l2) from them and answers `ann` plans, whose
recall@100 at the default ef is checked against the test's own numpy brute force; exclude
(a node's ids, the viewer's set), both encodings (hash float32 bytes, json arrays) with bad
vectors skipped and counted, a refresh under traffic, max_items, --index-dir, /readyz before
the first build and while Redis is down, and every load error.

Runs under /usr/bin/python3 (Debian's python3-numpy)."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, Redis, free_port, metric_value, run_tests,  # noqa: E402
                     temp_dir, wait_until, write_plan)

D = 64
ITEMS = 50_000
CLUSTERS = 100
QUERIES = 200
K = 100
DOCS = 2_000  # the json family's items (ids 1..DOCS)

SCHEMA = {"schema_version": 1, "families": {
    "user_emb": {"type": "hash", "key": "au:{id}", "fields": {"emb": f"vec:{D}"}},
    "item_emb": {"type": "hash", "key": "ai:{id}", "fields": {"emb": f"vec:{D}"}},
    "item_doc": {"type": "json", "key": "aj:{id}", "fields": {"emb": f"vec:{D}", "t": "str"}},
    "seen": {"type": "set", "key": "as:{id}"},
}, "indexes": {
    "items_ip": {"family": "item_emb", "field": "emb", "metric": "ip"},
    "items_cos": {"family": "item_emb", "field": "emb", "metric": "cosine"},
    "items_l2": {"family": "item_emb", "field": "emb", "metric": "l2"},
    "docs": {"family": "item_doc", "field": "emb", "metric": "ip"},
}}


def ann_plan(name, index, k=K, exclude=None, extra_nodes=(), with_vectors=False, user_family="user_emb"):
    params = {"index": index, "query": {"from": "v", "key": "emb"}, "k": k}
    inputs = ["v"]
    if exclude is not None:
        params["exclude"] = exclude
        if isinstance(exclude, str):
            inputs.append(exclude)
    if with_vectors:
        params["with_vectors"] = True
    nodes = [{"node_id": "v", "op": "viewer", "params": {"family": user_family}}]
    nodes += list(extra_nodes)
    nodes.append({"node_id": "a", "op": "ann", "inputs": inputs, "params": params})
    return {"schema_version": 1, "name": name, "params": {"k": {"type": "i64", "default": k}},
            "nodes": nodes, "output": {"node": "a"}}


def plans():
    p = {f"ann_{m}": ann_plan(f"ann_{m}", f"items_{m}") for m in ("ip", "cos", "l2")}
    p["ann_docs"] = ann_plan("ann_docs", "docs", with_vectors=True)
    p["ann_seen"] = ann_plan("ann_seen", "items_l2", exclude={"family": "seen"})
    p["ann_node"] = ann_plan("ann_node", "items_ip", exclude="low", extra_nodes=[
        {"node_id": "low", "op": "fixed_source", "params": {"count": 30_000}}])
    p["ann_param_k"] = ann_plan("ann_param_k", "items_ip")
    p["ann_param_k"]["nodes"][-1]["params"]["k"] = {"param": "k"}
    return p


def data(rng):
    centers = rng.normal(size=(CLUSTERS, D)).astype(np.float32)
    which = rng.integers(0, CLUSTERS, size=ITEMS)
    items = (centers[which] + 0.35 * rng.normal(size=(ITEMS, D))).astype(np.float32)
    qwhich = rng.integers(0, CLUSTERS, size=QUERIES)
    queries = (centers[qwhich] + 0.5 * rng.normal(size=(QUERIES, D))).astype(np.float32)
    docs = rng.normal(size=(DOCS, D)).astype(np.float32)
    return items, queries, docs


def write(redis, cmds):
    for start in range(0, len(cmds), 5000):
        for r in redis.execute_many(cmds[start:start + 5000]):
            assert not isinstance(r, Exception), r


_env = {}


def env():
    if not _env:
        items, queries, docs = data(np.random.default_rng(4646))
        redis = Redis()
        cmds = [["HSET", f"ai:{i + 1}", "emb", items[i].astype("<f4").tobytes()] for i in range(ITEMS)]
        cmds += [["HSET", f"au:{u + 1}", "emb", queries[u].astype("<f4").tobytes()] for u in range(QUERIES)]
        cmds += [["SET", f"aj:{i + 1}", json.dumps({"emb": [float(x) for x in docs[i]], "t": "x"})]
                 for i in range(DOCS)]
        # Skipped by the builds: keys whose id does not parse, vectors that are bad.
        cmds += [["HSET", "ai:x7", "emb", items[0].astype("<f4").tobytes()],
                 ["HSET", f"ai:{ITEMS + 1}", "emb", items[0].astype("<f4").tobytes()[:-4]],
                 ["HSET", f"ai:{ITEMS + 2}", "emb", np.full(D, np.nan, np.float32).tobytes()],
                 ["SET", f"aj:{DOCS + 1}", json.dumps({"emb": [1.0] * (D - 1)})],
                 ["SET", f"aj:{DOCS + 2}", json.dumps({"emb": ["a"] * D})],
                 # Globs in the template's text are escaped: these keys are no items.
                 ["HSET", "aiX:9", "emb", items[0].astype("<f4").tobytes()]]
        write(redis, cmds)
        d = temp_dir("rankd-ann-")
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(SCHEMA, f)
        for name, p in plans().items():
            write_plan(d, name, p)
        s = Rankd(d, redis=redis, shards=2).wait_ready(timeout=240)
        _env.update(items=items, queries=queries, docs=docs, redis=redis, rankd=s, plans=d)
    return _env


def rank(s, plan, user, **params):
    status, _, body = s.rank({"plan": plan, "user_id": user, "deadline_ms": 10000,
                              "params": params, "explain": False}, timeout=30)
    assert status == 200, (status, body)
    return body


def ids_of(body):
    return [it["id"] for it in body["items"]]


def exact(items, q, metric, k):
    if metric == "ip":
        s = items @ q
    elif metric == "cos":
        n = items / np.linalg.norm(items, axis=1, keepdims=True)
        s = n @ (q / np.linalg.norm(q))
    else:
        s = -np.linalg.norm(items.astype(np.float64) - q, axis=1)
    top = np.argsort(-s, kind="stable")[:k]
    return top + 1, s  # ids are 1-based


def test_recall_at_100_is_at_least_095_for_each_metric():
    e = env()
    for metric in ("ip", "cos", "l2"):
        hits = 0
        for u in range(QUERIES):
            want, s = exact(e["items"], e["queries"][u], metric, K)
            body = rank(e["rankd"], f"ann_{metric}", u + 1)
            got = ids_of(body)
            assert len(got) == K, (metric, len(got))
            hits += len(set(got) & set(want.tolist()))
            sims = [it["similarity"] for it in body["items"]]
            assert sims == sorted(sims, reverse=True), metric  # nearest first
            for it in body["items"][:5]:  # the similarity is the metric's own value
                assert abs(it["similarity"] - s[it["id"] - 1]) <= 1e-3 * (1 + abs(s[it["id"] - 1])), it
        recall = hits / (QUERIES * K)
        print(f"  recall@{K} {metric}: {recall:.4f}")
        assert recall >= 0.95, (metric, recall)


def test_exclude_never_returns_an_excluded_id():
    e = env()
    s, redis = e["rankd"], e["redis"]
    for u in range(20):
        want, _ = exact(e["items"], e["queries"][u], "l2", K)
        seen = want[:50].tolist()
        redis.execute("SADD", f"as:{u + 1}", *[str(i) for i in seen])
        got = ids_of(rank(s, "ann_seen", u + 1))
        assert len(got) == K and not set(got) & set(seen), u
        got = ids_of(rank(s, "ann_node", u + 1))
        assert len(got) == K and min(got) > 30_000, u


def test_json_encoding_and_bad_vectors_skipped_and_counted():
    e = env()
    s = e["rankd"]
    for u in range(10):
        want, _ = exact(e["docs"], e["queries"][u], "ip", K)
        body = rank(s, "ann_docs", u + 1)
        got = ids_of(body)
        assert len(set(got) & set(want.tolist())) >= 0.95 * K, u
        for it in body["items"]:  # with_vectors: the item's vector from the index
            assert np.array_equal(np.asarray(it["emb"], np.float32), e["docs"][it["id"] - 1])
    text = s.metrics()
    for name in ("items_ip", "items_cos", "items_l2", "docs"):
        print(f"  {name}: {metric_value(text, 'rankd_index_bytes', index=name):.0f} bytes, built in "
              f"{metric_value(text, 'rankd_index_build_seconds', index=name):.1f} s")
    assert metric_value(text, "rankd_index_items", index="docs") == DOCS
    assert metric_value(text, "rankd_index_items", index="items_ip") == ITEMS
    assert metric_value(text, "rankd_index_skipped_total", index="items_ip", kind="bad_vector") == 2
    assert metric_value(text, "rankd_index_skipped_total", index="items_ip", kind="bad_id") == 1
    assert metric_value(text, "rankd_index_skipped_total", index="docs", kind="bad_vector") == 2
    assert metric_value(text, "rankd_index_builds_total", index="docs", outcome="ok") >= 1
    assert metric_value(text, "rankd_index_bytes", index="items_l2") > ITEMS * 4 * D
    assert metric_value(text, "rankd_index_build_seconds", index="items_l2") > 0


def test_k_bound_and_param_k():
    e = env()
    s = e["rankd"]
    assert len(ids_of(rank(s, "ann_param_k", 1, k=7))) == 7
    status, _, body = s.rank({"plan": "ann_param_k", "user_id": 1, "params": {"k": 10_001}})
    assert status == 422 and "params.k: 10001 is out of bounds 1..10000" in body["error"]["message"], (
        status, body)
    # A viewer without a vector: no rows, no error.
    assert ids_of(rank(s, "ann_ip", 99_999)) == []


# ---- small indexes: refresh, max_items, --index-dir, readiness ---------------------------

SMALL = {"schema_version": 1, "families": {
    "user_emb": {"type": "hash", "key": "su:{id}", "fields": {"emb": "vec:8"}},
    "item_emb": {"type": "hash", "key": "si:{id}", "fields": {"emb": "vec:8"}},
}, "indexes": {"small": {"family": "item_emb", "field": "emb", "metric": "l2", "refresh_s": 1,
                         "max_items": 100}}}


def small_folder():
    d = temp_dir("rankd-ann-small-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(SMALL, f)
    write_plan(d, "near", ann_plan("near", "small", k=5))
    return d


def vec8(x):
    return np.full(8, x, np.float32).astype("<f4").tobytes()


def small_items(redis, ids, at=0.0):
    write(redis, [["HSET", f"si:{i}", "emb", vec8(at + i)] for i in ids])


def test_refresh_under_traffic_finds_new_items_without_a_failed_request():
    redis = Redis()
    small_items(redis, range(1, 51))
    redis.execute("HSET", "su:1", "emb", vec8(1000.0))
    s = Rankd(small_folder(), redis=redis).wait_ready()
    assert ids_of(rank(s, "near", 1))[0] == 50
    failures, stop = [], threading.Event()

    def traffic():
        while not stop.is_set():
            status, _, body = s.rank({"plan": "near", "user_id": 1})
            if status != 200:
                failures.append((status, body))
    t = threading.Thread(target=traffic)
    t.start()
    try:
        redis.execute("HSET", "si:77", "emb", vec8(999.0))  # nearest to the viewer now
        wait_until(lambda: ids_of(rank(s, "near", 1))[0] == 77, timeout=15, what="the new item")
    finally:
        stop.set()
        t.join()
    assert not failures, failures[:3]
    s.stop()


def test_over_max_items_keeps_the_old_index():
    redis = Redis()
    small_items(redis, range(1, 91))
    redis.execute("HSET", "su:1", "emb", vec8(1000.0))
    s = Rankd(small_folder(), redis=redis).wait_ready()
    small_items(redis, range(91, 131))  # 130 > max_items 100
    wait_until(lambda: (metric_value(s.metrics(), "rankd_index_builds_total", index="small",
                                     outcome="over_max_items") or 0) >= 1, what="a refused build")
    assert ids_of(rank(s, "near", 1))[0] == 90  # the index built before
    assert metric_value(s.metrics(), "rankd_index_items", index="small") == 90
    assert "max_items" in s.stderr()
    s.stop()


def test_index_dir_round_trip():
    redis = Redis()
    small_items(redis, range(1, 21))
    redis.execute("HSET", "su:1", "emb", vec8(1000.0))
    folder, idx = small_folder(), temp_dir("rankd-ann-dir-")
    s = Rankd(folder, redis=redis, extra_args=["--index-dir", idx]).wait_ready()
    assert os.path.exists(os.path.join(idx, "small.ann"))
    s.stop()
    for i in range(1, 21):  # Redis loses the items: only the saved index knows them
        redis.execute("DEL", f"si:{i}")
    s = Rankd(folder, redis=redis, extra_args=["--index-dir", idx]).wait_ready()
    assert ids_of(rank(s, "near", 1)) == [20, 19, 18, 17, 16]
    assert metric_value(s.metrics(), "rankd_index_builds_total", index="small", outcome="loaded") == 1
    s.stop()
    # A saved index of another declaration is not loaded: it is built from Redis instead.
    schema = json.loads(json.dumps(SMALL))
    schema["indexes"]["small"]["metric"] = "ip"
    with open(os.path.join(folder, "schema.json"), "w") as f:
        json.dump(schema, f)
    small_items(redis, [3])
    s = Rankd(folder, redis=redis, extra_args=["--index-dir", idx]).wait_ready()
    assert ids_of(rank(s, "near", 1)) == [3]
    assert "another declaration" in s.stderr()
    s.stop()


def test_readyz_waits_for_the_first_build_while_redis_is_down():
    port = free_port()
    folder = small_folder()
    class NotYet:  # the Redis this rankd is given starts later
        def url(self):
            return f"redis://127.0.0.1:{port}"
    s = Rankd(folder, redis=NotYet())
    status, _, body = s.request("GET", "/readyz")
    assert status == 503 and b"index 'small' has no build yet" in body, body
    time.sleep(1.5)  # retried meanwhile: still not ready
    assert s.request("GET", "/readyz")[0] == 503
    redis = Redis(port=port)
    small_items(redis, range(1, 11))
    redis.execute("HSET", "su:1", "emb", vec8(1000.0))
    s.wait_ready(timeout=20)
    # The first build may have read the items half written (Redis answered before they
    # were all there): the next refresh (refresh_s 1) reads them all.
    deadline = time.time() + 10
    while (ids := ids_of(rank(s, "near", 1)))[:1] != [10]:
        assert time.time() < deadline, ids
        time.sleep(0.2)
    s.stop()


def test_sigterm_during_the_first_build_exits_without_waiting_for_it():
    # The fixture's 50,000-item indexes take this rankd seconds to build: SIGTERM while it
    # builds ends the build at its next chunk, and the drain exits 0 (a process stopping
    # waited for whole faiss builds, minutes for a large index, and was killed).
    e = env()
    s = Rankd(e["plans"], redis=e["redis"], shards=2)
    status, _, body = s.request("GET", "/readyz")
    assert status == 503 and b"no build yet" in body, body
    time.sleep(0.3)  # the build under way (the stimulus), not a wait
    s.stop(timeout=10)


def check_plans(folder):
    out = subprocess.run([RANKD, "check-plans", "--plans", folder, "--enable-test-ops"],
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


def test_every_load_error_names_where():
    def folder(schema, plan=None):
        d = temp_dir("rankd-ann-bad-")
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(schema, f)
        if plan:
            write_plan(d, plan["name"], plan)
        return d

    def schema_error(change, *words):
        schema = json.loads(json.dumps(SMALL))
        change(schema["indexes"]["small"])
        rc, text = check_plans(folder(schema))
        assert rc != 0 and "index 'small'" in text, text
        for w in words:
            assert w in text, (w, text)

    schema_error(lambda i: i.pop("field"), "field: missing")
    schema_error(lambda i: i.update(field="nope"), "has no field 'nope'")
    schema_error(lambda i: i.update(family="nope"), "unknown family 'nope'")
    schema_error(lambda i: i.update(metric="dot"), "unknown metric 'dot'")
    schema_error(lambda i: i.update(max_items=0), "max_items")
    schema_error(lambda i: i.update(refresh_s="1"), "refresh_s")
    schema_error(lambda i: i.update(extra=1), "unknown member")
    bad = json.loads(json.dumps(SMALL))
    bad["families"]["item_emb"]["fields"]["n"] = "i64"
    bad["indexes"]["small"]["field"] = "n"
    rc, text = check_plans(folder(bad))
    assert rc != 0 and "'item_emb.n' is i64, not a vector" in text, text
    bad = json.loads(json.dumps(SMALL))
    bad["families"]["follow"] = {"type": "list", "key": "sf:{id}"}
    bad["indexes"]["small"]["family"] = "follow"
    rc, text = check_plans(folder(bad))
    assert rc != 0 and "hash or json family" in text, text

    def plan_error(p, *words):
        rc, text = check_plans(folder(SMALL, p))
        assert rc != 0 and "node 'a'" in text, text
        for w in words:
            assert w in text, (w, text)

    assert check_plans(folder(SMALL, ann_plan("near", "small")))[0] == 0
    plan_error(ann_plan("p", "nope"), "unknown index 'nope'", "declared: small")
    other = json.loads(json.dumps(SMALL))
    other["families"]["user32"] = {"type": "hash", "key": "s32:{id}", "fields": {"emb": "vec:32"}}
    rc, text = check_plans(folder(other, ann_plan("p", "small", user_family="user32")))
    assert rc != 0 and "is vec:32 but index 'small' holds vec:8" in text, text
    plan_error(ann_plan("p", "small", k=10_001), "k", "10000")
    plan_error(ann_plan("p", "small", exclude={"family": "item_emb"}), "exclude.family",
               "set or zset")
    p = ann_plan("p", "small")
    p["nodes"][-1]["params"]["query"] = {"from": "v"}
    plan_error(p, "params.query")
    p = ann_plan("p", "small")
    p["nodes"].insert(0, {"node_id": "w", "op": "viewer", "params": {"family": "user_emb"}})
    p["nodes"][-1]["inputs"] = ["v", "w"]
    plan_error(p, "inputs: must be exactly [\"v\"]")


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
