"""Vector fields and dot / cosine / l2 end to end (docs/vectors.md): a real redis-server
holding 10,000 item vectors twice (a hash family's float32 bytes, a json family's arrays)
with missing, bad and all-zero ones, and viewers' vectors; a real rankd ranking with a plan
that computes the three functions against the viewer's vector ({"from"}) and between two
vector columns, compared with a float64 numpy reference within 1e-6 * sum|a_i b_i| (+1e-30);
the cache on and off; vectors in an answer and in a served-log record as JSON arrays;
bad_vector counted in /metrics; every load error named.

Runs under /usr/bin/python3 (Debian's python3-numpy). Redis is written through the test
harness's own RESP client, which sends bytes as they are (the hash values are
numpy's .astype('<f4').tobytes())."""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SANITIZED, Rankd, Redis, metric_value, run_tests,  # noqa: E402
                     temp_dir, wait_until, write_plan)

D = 40        # not a multiple of the kernels' 16 lanes: the tail is exercised too
ITEMS = 10_000
USERS = 4     # 1, 2: good vectors; 3: a bad one (every score null); 4: a zero vector

SCHEMA = {"schema_version": 1, "families": {
    "user_emb": {"type": "hash", "key": "vu:{id}", "fields": {"emb": f"vec:{D}"}},
    "item_emb": {"type": "hash", "key": "vi:{id}", "fields": {"emb": f"vec:{D}", "n": "i64"}},
    "item_doc": {"type": "json", "key": "vj:{id}", "fields": {"jemb": f"vec:{D}"}},
    "small_emb": {"type": "hash", "key": "vs:{id}", "fields": {"emb8": "vec:8"}},
}}

# What each item's stored vectors are, by id % 23 (the rest are good random vectors).
HASH_MISSING, HASH_SHORT, HASH_LONG, HASH_NAN, HASH_INF, HASH_ZERO = 1, 2, 3, 4, 5, 6
JSON_MISSING_KEY, JSON_SHORT, JSON_STRING_ELEM, JSON_OVERFLOW, JSON_NOT_ARRAY, JSON_ZERO = 7, 8, 9, 10, 11, 12


def plan(name, nodes, output, exprs, columns=None, cache=False, **top):
    for n in nodes:
        if n["op"] in ("features", "viewer") and cache:
            n["params"]["cache"] = True
    p = {"schema_version": 1, "name": name, "params": {}, "nodes": nodes, "expr_table": exprs,
         "pred_table": {"never": {"op": "is_null", "arg": {"key": "id"}}}, "output": {"node": output}}
    if columns:
        p["output"]["columns"] = columns
    p.update(top)
    return p


def fn(op, a, b):
    return {"op": op, "args": [a, b]}


VIEWER_EMB = {"from": "v", "key": "emb"}
OUTS = {  # column -> expression
    "d": fn("dot", VIEWER_EMB, {"key": "emb"}),
    "c": fn("cosine", VIEWER_EMB, {"key": "emb"}),
    "l": fn("l2", VIEWER_EMB, {"key": "emb"}),
    "dj": fn("dot", {"key": "jemb"}, VIEWER_EMB),
    "cj": fn("cosine", {"key": "jemb"}, VIEWER_EMB),
    "lj": fn("l2", {"key": "jemb"}, VIEWER_EMB),
    "x": fn("dot", {"key": "emb"}, {"key": "jemb"}),
}


def scoring_nodes(count):
    """fixed_source ids 1..count; the viewer only made an input (its row never passes);
    both families' vectors read; one vm node per function column."""
    nodes = [
        {"node_id": "src", "op": "fixed_source", "params": {"count": count}},
        {"node_id": "v", "op": "viewer", "params": {"family": "user_emb"}},
        {"node_id": "none", "op": "filter", "inputs": ["v"], "params": {"pred": "never"}},
        {"node_id": "cat", "op": "concat", "inputs": ["src", "none"], "params": {}},
        {"node_id": "fh", "op": "features", "inputs": ["cat"],
         "params": {"family": "item_emb", "fields": ["emb"]}},
        {"node_id": "fj", "op": "features", "inputs": ["fh"],
         "params": {"family": "item_doc", "fields": ["jemb"]}},
    ]
    prev = "fj"
    for col in OUTS:
        nodes.append({"node_id": f"s_{col}", "op": "vm", "inputs": [prev],
                      "params": {"out_key": col, "expr": col}})
        prev = f"s_{col}"
    return nodes, prev


def plans():
    nodes, last = scoring_nodes(ITEMS)
    cached_nodes, cached_last = scoring_nodes(ITEMS)
    small, small_last = scoring_nodes(5)
    return {
        "vec": plan("vec", nodes, last, OUTS, columns=["id"] + list(OUTS)),
        "vec_cached": plan("vec_cached", cached_nodes, cached_last, OUTS,
                           columns=["id"] + list(OUTS), cache=True),
        # The vectors themselves in the answer, and in a served-log record.
        "vec_out": plan("vec_out", small, small_last, OUTS, columns=["id", "emb", "jemb", "d"],
                        log={"sample": 1.0, "sink": "main"}),
    }


def vectors(rng):
    """The items' vectors (float32) and the viewers'."""
    items = rng.standard_normal((ITEMS + 1, D)).astype("<f4")
    docs = rng.standard_normal((ITEMS + 1, D)).astype("<f4")
    users = rng.standard_normal((USERS + 1, D)).astype("<f4")
    users[4] = 0
    for i in range(ITEMS + 1):
        if i % 23 == HASH_ZERO:
            items[i] = 0
        if i % 23 == JSON_ZERO:
            docs[i] = 0
    return items, docs, users


def write_data(redis, items, docs, users):
    cmds = []
    for u in range(1, USERS + 1):
        value = users[u].tobytes() if u != 3 else users[u].tobytes()[:-1]  # 3: one byte short
        cmds.append(["HSET", f"vu:{u}", "emb", value])
    for i in range(1, ITEMS + 1):
        k = i % 23
        b = items[i].tobytes()
        if k == HASH_SHORT:
            b = b[:-4]
        elif k == HASH_LONG:
            b = b + b"\0\0\0\0"
        elif k == HASH_NAN:
            b = np.where(np.arange(D) == 7, np.float32("nan"), items[i]).astype("<f4").tobytes()
        elif k == HASH_INF:
            b = np.where(np.arange(D) == D - 1, np.float32("inf"), items[i]).astype("<f4").tobytes()
        cmds.append(["HSET", f"vi:{i}", "n", str(i)] + ([] if k == HASH_MISSING else ["emb", b]))
        arr = [float(x) for x in docs[i]]  # float32 values as doubles: exact in JSON text
        if k == JSON_MISSING_KEY:
            continue
        doc = {"jemb": arr}
        if k == JSON_SHORT:
            doc["jemb"] = arr[:-1]
        elif k == JSON_STRING_ELEM:
            doc["jemb"] = arr[:3] + ["1"] + arr[4:]
        elif k == JSON_OVERFLOW:
            doc["jemb"] = arr[:-1] + [1e39]  # beyond float32
        elif k == JSON_NOT_ARRAY:
            doc["jemb"] = 3.5
        cmds.append(["SET", f"vj:{i}", json.dumps(doc)])
    for start in range(0, len(cmds), 2000):
        for r in redis.execute_many(cmds[start:start + 2000]):
            assert not isinstance(r, Exception), r


HASH_BAD = {HASH_SHORT, HASH_LONG, HASH_NAN, HASH_INF}
JSON_BAD = {JSON_SHORT, JSON_STRING_ELEM, JSON_OVERFLOW, JSON_NOT_ARRAY}


def valid_hash(i):
    return i % 23 not in HASH_BAD and i % 23 != HASH_MISSING


def valid_json(i):
    return i % 23 not in JSON_BAD and i % 23 != JSON_MISSING_KEY


def reference(a, b):
    """dot, cosine (None for a zero vector), l2 in float64, and each one's tolerance."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    dot = float(np.dot(a, b))
    mag = float(np.sum(np.abs(a * b)))
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    cos = None if na == 0 or nb == 0 else dot / (na * nb)
    l2 = float(np.linalg.norm(a - b))
    tol = 1e-6 * mag + 1e-30
    return (dot, tol), (cos, None if cos is None else tol / (na * nb) + 1e-30), (l2, 1e-6 * l2 + 1e-30)


def check_close(got, want, what):
    value, tol = want
    if value is None:
        assert got is None, (what, got)
        return
    assert got is not None, (what, value)
    assert abs(got - value) <= tol, (what, got, value, tol)


_env = {}


def env():
    if not _env:
        rng = np.random.default_rng(46)
        items, docs, users = vectors(rng)
        redis = Redis()
        write_data(redis, items, docs, users)
        d = temp_dir("rankd-vectors-")
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(SCHEMA, f)
        for name, p in plans().items():
            write_plan(d, name, p)
        log = os.path.join(temp_dir("rankd-vectors-log-"), "served.jsonl")
        s = Rankd(d, redis=redis, extra_args=[
            "--cache-mb", "64", "--served-log", f"main=file://{log}?max_mb=16&keep=1"])
        s.wait_ready()
        _env.update(redis=redis, rankd=s, items=items, docs=docs, users=users, log=log, dir=d)
    return _env


def rank(s, plan_name, user_id):
    status, _, body = s.rank({"plan": plan_name, "user_id": user_id, "deadline_ms": 60000},
                             timeout=120)
    assert status == 200, (status, body)
    return body


def check_answer(body, user):
    e = _env
    items = {it["id"]: it for it in body["items"]}
    assert len(items) == ITEMS
    viewer_ok = user in (1, 2, 4)
    u = e["users"][user]
    checked = 0
    for i in range(1, ITEMS + 1):
        it = items[i]
        (hd, hc, hl) = reference(u, e["items"][i])
        (jd, jc, jl) = reference(e["docs"][i], u)
        (xd, _, _) = reference(e["items"][i], e["docs"][i])
        h, j = valid_hash(i) and viewer_ok, valid_json(i) and viewer_ok
        check_close(it["d"], hd if h else (None, None), ("d", user, i))
        check_close(it["c"], hc if h else (None, None), ("c", user, i))
        check_close(it["l"], hl if h else (None, None), ("l", user, i))
        check_close(it["dj"], jd if j else (None, None), ("dj", user, i))
        check_close(it["cj"], jc if j else (None, None), ("cj", user, i))
        check_close(it["lj"], jl if j else (None, None), ("lj", user, i))
        check_close(it["x"], xd if valid_hash(i) and valid_json(i) else (None, None), ("x", i))
        checked += h
    if viewer_ok:
        assert checked > 0.7 * ITEMS
    if user == 4:  # a zero viewer: every cosine null, dot 0
        assert all(items[i]["c"] is None and items[i]["cj"] is None for i in items)


def bad_vectors(text, family):
    return metric_value(text, "rankd_redis_bad_values_total", family=family, kind="bad_vector") or 0


def test_dot_cosine_l2_match_a_float64_reference_over_10000_rows():
    e = env()
    s = e["rankd"]
    before = s.metrics()
    body = rank(s, "vec", 1)
    check_answer(body, 1)
    after = s.metrics()
    # Each bad value counted once per decode: one request read each item once.
    n_hash_bad = sum(1 for i in range(1, ITEMS + 1) if i % 23 in HASH_BAD)
    n_json_bad = sum(1 for i in range(1, ITEMS + 1) if i % 23 in JSON_BAD)
    assert bad_vectors(after, "item_emb") - bad_vectors(before, "item_emb") == n_hash_bad
    assert bad_vectors(after, "item_doc") - bad_vectors(before, "item_doc") == n_json_bad
    # The other viewers (a sanitizer build, 2-5x slower, checks the bad one only).
    for user in (3,) if SANITIZED else (2, 3, 4):
        check_answer(rank(s, "vec", user), user)
    assert bad_vectors(s.metrics(), "user_emb") >= 1  # viewer 3's short vector
    # No such viewer: the viewer has no row, every function of its vector is null.
    body = rank(s, "vec", 99)
    assert all(it["d"] is None and it["cj"] is None for it in body["items"])
    assert sum(1 for it in body["items"] if it["x"] is not None) == \
        sum(1 for i in range(1, ITEMS + 1) if valid_hash(i) and valid_json(i))


def test_cached_vectors_give_the_same_answers():
    e = env()
    s = e["rankd"]
    want = rank(s, "vec", 2)["items"]
    for _ in range(2):  # a miss (decoded, stored), then hits (read from the entries)
        got = rank(s, "vec_cached", 2)["items"]
        assert got == want
    text = s.metrics()
    hits = metric_value(text, "rankd_cache_hits_total", shard="0") or 0
    assert hits >= ITEMS, text


def test_vectors_in_the_answer_and_the_served_log_are_json_arrays():
    e = env()
    s = e["rankd"]
    body = rank(s, "vec_out", 1)
    assert [it["id"] for it in body["items"]] == [1, 2, 3, 4, 5]
    for it in body["items"]:
        i = it["id"]
        if valid_hash(i):
            got = np.asarray(it["emb"], dtype=np.float64).astype("<f4")
            assert np.array_equal(got, e["items"][i]), (i, it["emb"])
        else:
            assert it["emb"] is None, it
        if valid_json(i):
            assert np.array_equal(np.asarray(it["jemb"]).astype("<f4"), e["docs"][i])
        else:
            assert it["jemb"] is None, it
    wait_until(lambda: os.path.exists(e["log"]) and any(
        json.loads(line)["served_id"] == body["served_id"] for line in open(e["log"]) if line.strip()),
        timeout=20, what="the served-log record")
    rec = next(json.loads(line) for line in open(e["log"])
               if line.strip() and json.loads(line)["served_id"] == body["served_id"])
    assert np.array_equal(np.asarray(rec["viewer"]["emb"]).astype("<f4"), e["users"][1])
    for item, it in zip(rec["items"], body["items"]):
        assert item["columns"]["emb"] == it["emb"] and item["columns"]["jemb"] == it["jemb"]


def check_plans(folder):
    out = subprocess.run([RANKD, "check-plans", "--plans", folder, "--enable-test-ops"],
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


def folder_with(schema, plans_by_name):
    d = temp_dir("rankd-vectors-bad-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(schema, f)
    for name, p in plans_by_name.items():
        write_plan(d, name, p)
    return d


def test_every_load_error_names_where():
    # Schema: a vector type that is none.
    for bad in ("vec", "vec:0", "vec:4097", "vec:08", "vec:x"):
        schema = json.loads(json.dumps(SCHEMA))
        schema["families"]["item_emb"]["fields"]["emb"] = bad
        rc, text = check_plans(folder_with(schema, {}))
        assert rc != 0 and "item_emb" in text and "fields.emb" in text and "vec:D" in text, text
    assert check_plans(folder_with(SCHEMA, plans()))[0] == 0

    def plan_error(expr=None, extra_nodes=(), output_node=None, pred=None):
        nodes, last = scoring_nodes(3)
        nodes = nodes[:6]  # src, v, none, cat, fh, fj
        nodes.append({"node_id": "small", "op": "features", "inputs": ["fj"],
                      "params": {"family": "small_emb", "fields": ["emb8"]}})
        nodes.append({"node_id": "s", "op": "vm", "inputs": ["small"],
                      "params": {"out_key": "z", "expr": "e"}})
        nodes.extend(extra_nodes)
        p = plan("bad", nodes, output_node or "s", {"e": expr or {"const": 1}})
        if pred:
            p["pred_table"]["p"] = pred
        rc, text = check_plans(folder_with(SCHEMA, {"bad": p}))
        assert rc != 0, text
        return text

    text = plan_error(fn("dot", {"key": "emb"}, {"key": "emb8"}))
    assert "node 's'" in text and "column 'emb') is vec:40" in text and \
        "column 'emb8') is vec:8" in text, text
    text = plan_error(fn("cosine", VIEWER_EMB, {"key": "emb8"}))
    assert "from 'v' key 'emb') is vec:40" in text, text
    text = plan_error(fn("l2", {"key": "emb"}, {"key": "id"}))
    assert "needs two vectors but args[1] (column 'id') is i64" in text, text
    text = plan_error(fn("dot", {"key": "emb"}, {"key": "nope"}))
    assert "args[1] (column 'nope') is null" in text, text
    text = plan_error(fn("dot", {"from": "v", "key": "nope"}, {"key": "emb"}))
    assert "has no column 'nope'" in text, text
    text = plan_error({"op": "*", "args": [{"key": "emb"}, {"const": 2}]})
    assert "op '*' needs numbers but args[0] is vec" in text, text
    text = plan_error({"key": "jemb"})
    assert "the result is a vector (vec:40)" in text, text
    text = plan_error(extra_nodes=[{"node_id": "k", "op": "filter", "inputs": ["s"], "params": {"pred": "p"}}],
                      output_node="k",
                      pred={"op": "cmp", "cmp": ">", "lhs": {"key": "emb"}, "rhs": {"const": 0}})
    assert "op 'cmp' cannot take a vector (lhs is vec:40)" in text, text
    text = plan_error(extra_nodes=[{"node_id": "o", "op": "sort", "inputs": ["s"], "params": {"key": "emb"}}],
                      output_node="o")
    assert "node 'o'" in text and "column 'emb' is vec:40" in text, text
    text = plan_error(extra_nodes=[{"node_id": "o", "op": "dedupe", "inputs": ["s"], "params": {"key": "jemb"}}],
                      output_node="o")
    assert "column 'jemb' is vec:40" in text, text


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
