"""Declared schemas end to end (docs/data.md, "Declared schema"): the marketplace example
(string ids, JSON listings, scored zsets, a set of hidden items) served by a real rankd
from a real Redis and compared with a reference computed from the data the generator
wrote; the same data in i64 and hash encoding; the cache on and off, invalidation of a
custom key template (text after {id}) in both tracking modes; user_id types; GET
/schema; bad values counted by family; every schema load error named; a schema reloaded
under traffic."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SANITIZED, SOURCE_ROOT, Rankd, Redis, Traffic, metric_value,  # noqa: E402
                     run_tests, temp_dir, wait_until)

EXAMPLE = os.path.join(SOURCE_ROOT, "examples", "marketplace")
sys.path.insert(0, EXAMPLE)
import reference  # noqa: E402

ACCOUNTS = 200
LISTINGS = 2000


def generate(redis, encoding="native", db=0):
    url = f"redis://127.0.0.1:{redis.port}/{db}"
    out = subprocess.run([os.path.join(EXAMPLE, "generate"), "--redis", url, "--seed", "7", "--flush",
                          "--encoding", encoding, "--accounts", str(ACCOUNTS), "--listings",
                          str(LISTINGS)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return url


_shared = {}


def market():
    """One Redis with both encodings (db 0 native, db 1 i64), generated once."""
    if not _shared:
        r = Redis()
        _shared["redis"] = r
        _shared["native"] = generate(r, "native", 0)
        _shared["i64"] = generate(r, "i64", 1)
    return _shared


def accounts(n):
    step = max(1, ACCOUNTS // n)
    return [f"acct-{i:06d}" for i in range(0, ACCOUNTS, step)][:n]


def rank(s, plan, user_id, params=None, expect=200):
    body = {"plan": plan, "user_id": user_id}
    if params:
        body["params"] = params
    status, _, text = s.request("POST", "/rank", json.dumps(body))
    assert status == expect, (status, text)
    return json.loads(text)


def same_items(got, want):
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert g["id"] == w["id"], (g, w)
        for k in ("score", "price"):
            if w.get(k) is None:
                assert g.get(k) is None, (g, w)
            else:
                assert abs(g[k] - w[k]) <= 1e-9 * max(1.0, abs(w[k])), (k, g, w)
        assert g.get("seller") == w.get("seller") and g.get("title") == w.get("title"), (g, w)


def test_marketplace_matches_the_reference_with_the_cache_off_and_on():
    m = market()
    redis = m["redis"]
    plans = os.path.join(EXAMPLE, "plans")
    off = Rankd(plans, redis=redis, shards=2)
    on = Rankd(plans, redis=redis, shards=2, extra_args=["--cache-mb", "16"])
    n = 12 if SANITIZED else 40
    for acct in accounts(n):
        want = reference.rank(m["native"], acct)
        got_off = rank(off, "market", acct)
        assert got_off["user_id"] == acct
        same_items(got_off["items"], want)
        for _ in range(2):  # a miss, then hits
            same_items(rank(on, "market", acct)["items"], want)
    text = on.metrics()
    assert (metric_value(text, "rankd_cache_hits_total", shard="0") or 0) + \
        (metric_value(text, "rankd_cache_hits_total", shard="1") or 0) > 0


def test_the_i64_encoding_ranks_the_same_items():
    m = market()
    native = Rankd(os.path.join(EXAMPLE, "plans"), redis=m["redis"])
    class Db1:  # the same server's db 1
        def url(self):
            return m["i64"]
    twin = Rankd(os.path.join(EXAMPLE, "i64"), redis=Db1())
    for acct in accounts(10):
        a = rank(native, "market", acct)["items"]
        b = rank(twin, "market", int(acct.split("-")[1]))["items"]
        assert [int(x["id"].split("-")[1]) for x in a] == [x["id"] for x in b]
        assert [x["score"] for x in a] == [x["score"] for x in b]


def test_user_id_types_and_the_schema_route():
    m = market()
    s = Rankd(os.path.join(EXAMPLE, "plans"), redis=m["redis"])
    e = rank(s, "market", 1, expect=400)["error"]
    assert e["code"] == "bad_request" and "user_id" in e["message"] and "string" in e["message"], e
    for bad in ["", "x" * 257, "a{b}"]:
        e = rank(s, "market", bad, expect=400)["error"]
        assert e["code"] == "bad_request" and "user_id" in e["message"], e
    assert rank(s, "market", "acct-999999")["items"] == []  # no such account: zero rows
    status, _, text = s.request("GET", "/schema")
    assert status == 200
    body = json.loads(text)
    with open(os.path.join(EXAMPLE, "plans", "schema.json"), "rb") as f:
        raw = f.read()
    assert body["sha256"] == hashlib.sha256(raw).hexdigest() and body["builtin"] is False
    assert body["schema"] == json.loads(raw)
    # The demo folder: an i64 plan refuses a string user_id.
    demo = Rankd(os.path.join(SOURCE_ROOT, "plans"), redis=m["redis"])
    e = rank(demo, "feed", "42", expect=400)["error"]
    assert "user_id" in e["message"] and "integer" in e["message"], e


# A schema of custom templates: text after {id}, a json family, a zset, str ids.
CUSTOM_SCHEMA = {"schema_version": 1, "families": {
    "who": {"type": "json", "key": "t:who:{id}:v1", "id": "str", "fields": {"lang": "str", "vip": "bool"}},
    "doc": {"type": "json", "key": "t:doc:{id}:v1", "id": "str",
            "fields": {"n": "i64", "x": "f64", "tag": "str", "ok": "bool"}},
    "pick": {"type": "zset", "key": "t:pick:{id}", "id": "str", "members": "str"},
    "seen": {"type": "set", "key": "t:seen:{id}", "id": "str", "members": "str"}}}

CUSTOM_PLAN = {
    "schema_version": 1, "name": "custom",
    "nodes": [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"family": "who", "cache": True}},
        {"node_id": "r", "op": "recommendation", "inputs": ["v"],
         "params": {"family": "pick", "fanout": 10, "score_as": "s", "cache": True}},
        {"node_id": "h", "op": "features", "inputs": ["r"],
         "params": {"family": "doc", "fields": ["n", "x", "tag", "ok"], "cache": True}},
        {"node_id": "f", "op": "seen_filter", "inputs": ["h"], "params": {"family": "seen"}},
    ],
    "output": {"node": "f", "columns": ["id", "s", "n", "x", "tag", "ok"]},
}


# The same zset read without its scores (ZRANGE without WITHSCORES), cached and not.
NOSCORE_PLAN = {
    "schema_version": 1, "name": "noscore",
    "nodes": [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"family": "who", "fields": ["lang"]}},
        {"node_id": "r", "op": "recommendation", "inputs": ["v"], "params": {"family": "pick", "fanout": 3}},
        {"node_id": "c", "op": "recommendation", "inputs": ["v"],
         "params": {"family": "pick", "fanout": 3, "cache": True}},
        {"node_id": "j", "op": "concat", "inputs": ["r", "c"], "params": {}},
    ],
    "output": {"node": "j"},
}


def custom_folder(schema=CUSTOM_SCHEMA, plans=None):
    d = temp_dir("schema-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(schema, f)
    for p in plans if plans is not None else [CUSTOM_PLAN, NOSCORE_PLAN]:
        with open(os.path.join(d, p["name"] + ".plan.json"), "w") as f:
            json.dump(p, f)
    return d


def test_custom_templates_types_and_invalidation_in_both_tracking_modes():
    redis = Redis()
    redis.execute_many([
        ["SET", "t:who:u1:v1", json.dumps({"lang": "de", "vip": True})],
        ["ZADD", "t:pick:u1", "3", "d-a", "2", "d-b", "1", "d-c", "0.5", "d-{x}", "inf", "d-e"],
        ["SET", "t:doc:d-a:v1", json.dumps({"n": 1, "x": 1.5, "tag": "a", "ok": False, "n2": 1})],
        ["SET", "t:doc:d-b:v1", json.dumps({"n": 2.5, "x": "no", "tag": 3, "ok": 1})],
        ["SET", "t:doc:d-c:v1", "[1, 2]"],
        ["SET", "t:doc:d-e:v1", json.dumps({"n": 9223372036854775807, "x": 1e308, "tag": "é", "ok": True,
                                            "n ": 0})],
        ["SADD", "t:seen:u1", "d-c"],
    ])
    d = custom_folder()
    for mode in ["bcast", "default"]:
        s = Rankd(d, redis=redis, extra_args=["--cache-mb", "8", "--cache-tracking", mode])
        got = rank(s, "custom", "u1")
        assert got["user_id"] == "u1"
        rows = {r["id"]: r for r in got["items"]}
        # d-{x} is no valid id (dropped, counted); d-c is seen; inf scores are null.
        assert [r["id"] for r in got["items"]] == ["d-e", "d-a", "d-b"], got
        assert rows["d-e"]["s"] is None and rows["d-a"]["s"] == 3
        assert rows["d-a"] == {"id": "d-a", "s": 3, "n": 1, "x": 1.5, "tag": "a", "ok": 0}
        assert rows["d-b"] == {"id": "d-b", "s": 2, "n": None, "x": None, "tag": None, "ok": None}
        assert rows["d-e"]["n"] == 9223372036854775807 and rows["d-e"]["tag"] == "é"
        for _ in range(2):
            ids = [r["id"] for r in rank(s, "noscore", "u1")["items"]]
            assert ids == ["d-e", "d-a", "d-b"] * 2, ids
        text = s.metrics()
        assert metric_value(text, "rankd_redis_bad_values_total", family="doc", kind="bad_json") >= 1
        assert metric_value(text, "rankd_redis_bad_values_total", family="pick", kind="bad_id") >= 1
        assert metric_value(text, "rankd_redis_bad_values_total", family="doc",
                            kind="unparsable_field") >= 4
        # Cached now; a write to a templated key (text after {id}) is seen by the next
        # requests, through the cache's invalidation.
        assert rank(s, "custom", "u1")["items"] == got["items"]
        redis.execute("SET", "t:doc:d-a:v1", json.dumps({"n": 5, "x": 1.5, "tag": "a", "ok": True}))
        wait_until(lambda: {r["id"]: r for r in rank(s, "custom", "u1")["items"]}["d-a"]["n"] == 5,
                   timeout=5, what=f"the write seen ({mode})")
        redis.execute("ZADD", "t:pick:u1", "10", "d-new")
        wait_until(lambda: "d-new" in [r["id"] for r in rank(s, "custom", "u1")["items"]], timeout=5,
                   what=f"the zset write seen ({mode})")
        redis.execute("SET", "t:doc:d-a:v1", json.dumps({"n": 1, "x": 1.5, "tag": "a", "ok": False}))
        redis.execute("ZREM", "t:pick:u1", "d-new")
        s.stop()


def check_plans(folder):
    out = subprocess.run([RANKD, "check-plans", "--plans", folder], capture_output=True, text=True,
                         timeout=60)
    return out.returncode, out.stdout + out.stderr


def test_every_schema_mistake_fails_the_load_naming_family_and_member():
    def fam(**over):
        f = {"type": "hash", "key": "k:{id}", "fields": {"a": "i64"}}
        f.update(over)
        return {k: v for k, v in f.items() if v is not None}
    cases = [
        ({"schema_version": 1, "families": {"x": fam(type="table")}}, ["'x'", "type", "table"]),
        ({"schema_version": 1, "families": {"x": fam(colour=1)}}, ["'x'", "colour"]),
        ({"schema_version": 1, "families": {"x": fam(key="k:{id}:{id}")}}, ["'x'", "key", "second"]),
        ({"schema_version": 1, "families": {"x": fam(key="k:")}}, ["'x'", "key", "{id}"]),
        ({"schema_version": 1, "families": {"x": fam(key="rankd:{id}")}}, ["'x'", "key", "rankd:"]),
        ({"schema_version": 1, "families": {"x": fam(key="k" * 260 + "{id}")}}, ["'x'", "key", "256"]),
        ({"schema_version": 1, "families": {"x": {"type": "list", "key": "l:{id}", "fields": {"a": "i64"}}}},
         ["'x'", "fields"]),
        ({"schema_version": 1, "families": {"x": fam(members="i64")}}, ["'x'", "members"]),
        ({"schema_version": 1, "families": {"Bad-Name": fam()}}, ["Bad-Name"]),
        ({"schema_version": 1, "families": {"x": fam(fields={"A b": "i64"})}}, ["'x'", "A b"]),
        ({"schema_version": 1, "families": {"x": fam(fields={"a": "int"})}}, ["'x'", "fields.a", "int"]),
        ({"schema_version": 1, "families": {"x": fam(id="uuid")}}, ["'x'", "id"]),
        ({"schema_version": 1, "families": {f"f{i}": fam() for i in range(257)}}, ["families", "256"]),
        ({"schema_version": 1, "families": {"x": fam(fields={f"f{i}": "i64" for i in range(1025)})}},
         ["'x'", "1024"]),
        # A str id, which a client chooses, must not steer a key onto rankd's own keys or
        # onto another family's keys.
        ({"schema_version": 1, "families": {"x": fam(key="{id}", id="str")}}, ["'x'", "'rankd:'"]),
        ({"schema_version": 1, "families": {"x": fam(key="rank{id}:v", id="str")}}, ["'x'", "'rankd:'"]),
        ({"schema_version": 1, "families": {
            "acct": fam(key="acct:{id}", id="str"),
            "watch": {"type": "zset", "key": "acct:{id}:watch", "id": "str", "members": "str"}}},
         ["family 'acct'", "family 'watch'"]),
        ({"schema_version": 1, "families": {"u": fam(key="u:{id}", id="str"), "ux": fam(key="u:x{id}")}},
         ["family 'u'", "family 'ux'"]),
        ({"schema_version": 1, "families": {"a": fam(key="a:{id}"), "b": fam(key="a:7{id}", id="str")}},
         ["family 'b'", "family 'a'"]),
        ({"schema_version": 2, "families": {}}, ["schema_version"]),
        ({"families": {}}, ["schema_version"]),
    ]
    for schema, words in cases:
        d = custom_folder(schema, plans=[])
        rc, text = check_plans(d)
        assert rc != 0, (schema, text)
        assert "schema.json" in text, text
        for w in words:
            assert w in text, (w, text[:400])
    # What a str id cannot reach loads: i64 ids under any text, disjoint texts, an i64
    # family whose extra text no decimal id holds, one template shared.
    for fams in ({"x": fam(key="{id}"), "y": fam(key="rank{id}")},
                 {"a": fam(key="a:{id}", id="str"), "b": fam(key="b:{id}", id="str")},
                 {"u": fam(key="u:x{id}", id="str"), "n": fam(key="u:{id}")},
                 {"h": fam(key="h:{id}", id="str"), "j": {"type": "json", "key": "h:{id}", "id": "str",
                                                          "fields": {"a": "i64"}}}):
        rc, text = check_plans(custom_folder({"schema_version": 1, "families": fams}, plans=[]))
        assert rc == 0, (fams, text)
    # Plans checked against the schema.
    def plan_with(node, out="n"):
        return {"schema_version": 1, "name": "p", "nodes": [
            {"node_id": "v", "op": "viewer", "inputs": [], "params": {"family": "who"}}, node],
            "output": {"node": out}}
    plan_cases = [
        ({"node_id": "n", "op": "follow", "inputs": ["v"], "params": {"family": "nope"}}, ["'n'", "nope"]),
        ({"node_id": "n", "op": "follow", "inputs": ["v"], "params": {"family": "doc"}}, ["'n'", "doc", "json"]),
        ({"node_id": "n", "op": "features", "inputs": ["v"], "params": {"family": "doc", "fields": ["zz"]}},
         ["'n'", "zz", "doc"]),
        ({"node_id": "n", "op": "recommendation", "inputs": ["v"], "params": {"family": "pick", "score_as": "id"}},
         ["'n'", "score_as"]),
    ]
    for node, words in plan_cases:
        d = custom_folder(plans=[plan_with(node)])
        rc, text = check_plans(d)
        assert rc != 0 and all(w in text for w in words), (node, text)
    # score_as on a list family; ids of one type flowing into a family keyed by the other;
    # viewer and seen_filter keyed differently.
    schema = json.loads(json.dumps(CUSTOM_SCHEMA))
    schema["families"]["plain"] = {"type": "list", "key": "t:plain:{id}", "id": "str", "members": "i64"}
    schema["families"]["nums"] = {"type": "set", "key": "t:nums:{id}"}
    bad = [
        ({"node_id": "n", "op": "follow", "inputs": ["v"], "params": {"family": "plain", "score_as": "s"}},
         ["score_as", "plain", "zset"]),
        ({"node_id": "n", "op": "features", "inputs": ["v"], "params": {"family": "doc", "fields": ["n"]}},
         []),  # fine: str ids into a str family
    ]
    d = custom_folder(schema, plans=[plan_with(bad[0][0])])
    rc, text = check_plans(d)
    assert rc != 0 and all(w in text for w in bad[0][1]), text
    d = custom_folder(schema, plans=[plan_with(bad[1][0])])
    assert check_plans(d)[0] == 0
    typed = plan_with({"node_id": "n", "op": "follow", "inputs": ["v"], "params": {"family": "plain"}})
    typed["nodes"].append({"node_id": "h", "op": "features", "inputs": ["n"],
                           "params": {"family": "doc", "fields": ["n"]}})
    typed["output"] = {"node": "h"}
    rc, text = check_plans(custom_folder(schema, plans=[typed]))
    assert rc != 0 and "'h'" in text and "doc" in text and "i64" in text, text
    mixed = plan_with({"node_id": "n", "op": "seen_filter", "inputs": ["v"], "params": {"family": "nums"}})
    rc, text = check_plans(custom_folder(schema, plans=[mixed]))
    assert rc != 0 and "'n'" in text, text


def test_a_schema_change_reloads_under_traffic_all_or_nothing():
    redis = Redis()
    redis.execute_many([["SET", "t:who:u1:v1", json.dumps({"lang": "de"})],
                        ["ZADD", "t:pick:u1", "1", "d-a"],
                        ["SET", "t:doc:d-a:v1", json.dumps({"n": 1, "tag": "a"})]])
    d = custom_folder()
    s = Rankd(d, redis=redis, shards=2, extra_args=["--cache-mb", "8", "--watch-plans-ms", "100"])
    failures = []

    def one():
        status, _, text = s.request("POST", "/rank", json.dumps({"plan": "custom", "user_id": "u1"}))
        if status != 200:
            failures.append((status, text))
    with Traffic(one, "/rank traffic") as traffic:
        traffic.wait_steps(1)
        sha0 = json.loads(s.request("GET", "/schema")[2])["sha256"]
        # A bad schema: rejected whole, the old one serves on.
        with open(os.path.join(d, "schema.json"), "w") as f:
            f.write('{"schema_version": 1, "families": {"who": {"type": "hash"}}}')
        s.signal(signal.SIGHUP)
        wait_until(lambda: "reload rejected" in s.stderr(), what="the bad schema rejected")
        assert json.loads(s.request("GET", "/schema")[2])["sha256"] == sha0
        traffic.wait_steps(1)  # traffic went on while the old schema served
        # doc moves to other keys (its key template changes): the cached entries go, and
        # the next answers read the new keys.
        redis.execute("SET", "t:doc2:d-a", json.dumps({"n": 2, "tag": "b"}))
        schema = json.loads(json.dumps(CUSTOM_SCHEMA))
        schema["families"]["doc"]["key"] = "t:doc2:{id}"
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(schema, f)
        wait_until(lambda: rank(s, "custom", "u1")["items"][0]["n"] == 2, timeout=10,
                   what="the new schema's keys read")
        assert json.loads(s.request("GET", "/schema")[2])["sha256"] != sha0
        redis.execute("SET", "t:doc2:d-a", json.dumps({"n": 3, "tag": "b"}))
        wait_until(lambda: rank(s, "custom", "u1")["items"][0]["n"] == 3, timeout=5,
                   what="a write under the new template seen")
        traffic.wait_steps(1)  # and under the new one
    assert not failures, failures[:3]


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
