#!/usr/bin/python3
"""Tests of the marketplace example's Python side, against a redis-server of their own:

    /usr/bin/python3 examples/marketplace/test_marketplace.py

- generate: refuses a non-empty database without --flush; one seed gives byte-identical
  contents (a digest of every key's DUMP), another seed other contents; the deliberately bad
  values are there;
- the two encodings hold the same data: reference.py ranks every sampled account the same
  in both (ids mapped);
- reference.py's semantics on a hand-written data set whose answer is worked out below.
Needs redis-server on PATH (skips otherwise). No build of rankd is needed.
"""
import hashlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mklib import Layout, Redis  # noqa: E402
import reference  # noqa: E402

GEN = os.path.join(HERE, "generate")
SMALL = ["--accounts", "300", "--listings", "3000", "--bad-rate", "0.01"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mk-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                r = Redis(self.url(0))
                r.call("PING")
                r.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def url(self, db):
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def digest(url):
    r = Redis(url)
    keys, cur = [], b"0"
    while True:
        cur, ks = r.call("SCAN", cur, "COUNT", 5000)
        keys += ks
        if cur == b"0":
            break
    keys.sort()
    h = hashlib.sha256()
    for i in range(0, len(keys), 1000):
        chunk = keys[i:i + 1000]
        for k, d in zip(chunk, r.pipeline([("DUMP", k) for k in chunk])):
            h.update(k + b"\0" + d)
    r.close()
    return len(keys), h.hexdigest()


def gen(*args):
    return subprocess.run([GEN, *args], capture_output=True, text=True, timeout=120)


SERVER = None


def setUpModule():
    global SERVER
    if not shutil.which("redis-server"):
        raise unittest.SkipTest("redis-server is not on PATH")
    SERVER = Server()


def tearDownModule():
    if SERVER:
        SERVER.stop()


class Generate(unittest.TestCase):
    def test_refuses_a_non_empty_db_without_flush(self):
        r = Redis(SERVER.url(5))
        self.addCleanup(r.close)
        r.call("FLUSHDB")
        r.call("SET", "someone:else", "1")
        g = gen("--redis", SERVER.url(5), *SMALL)
        self.assertEqual(g.returncode, 2, g.stderr)
        self.assertIn("not empty; use --flush", g.stderr)
        self.assertEqual(r.call("DBSIZE"), 1)
        g = gen("--redis", SERVER.url(5), "--flush", *SMALL)
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertIsNone(r.call("GET", "someone:else"))

    def test_one_seed_gives_byte_identical_contents(self):
        runs = []
        for seed in ("7", "7", "8"):
            g = gen("--redis", SERVER.url(6), "--flush", "--seed", seed, *SMALL)
            self.assertEqual(g.returncode, 0, g.stderr)
            runs.append(digest(SERVER.url(6)))
        self.assertEqual(runs[0], runs[1])
        self.assertNotEqual(runs[0][1], runs[2][1])

    def test_bad_values_are_there(self):
        g = gen("--redis", SERVER.url(7), "--flush", "--seed", "3", *SMALL)
        self.assertEqual(g.returncode, 0, g.stderr)
        r = Redis(SERVER.url(7))
        self.addCleanup(r.close)
        lay = Layout("native")
        keys = [lay.key("listing", lay.listing_id(n)) for n in range(3000)]
        docs = r.pipeline([("GET", k) for k in keys])
        kinds = {"not_json": 0, "not_object": 0, "wrong_type": 0}
        for d in docs:
            try:
                v = json.loads(d)
            except ValueError:
                kinds["not_json"] += 1
                continue
            if not isinstance(v, dict):
                kinds["not_object"] += 1
            elif not (isinstance(v["views"], int) and isinstance(v["price"], float) and isinstance(v["in_stock"], bool)
                      and isinstance(v["seller"], str)):
                kinds["wrong_type"] += 1
        self.assertTrue(all(kinds.values()), kinds)
        self.assertLess(sum(kinds.values()), 3000 * 0.02, kinds)
        self.assertEqual(r.call("TYPE", lay.key("account", "acct-000001")), b"hash")
        self.assertEqual(r.call("TYPE", lay.key("listing", "lst-00000001")), b"string")


class Encodings(unittest.TestCase):
    def test_native_and_i64_rank_alike(self):
        for enc, db in (("native", 8), ("i64", 9)):
            g = gen("--redis", SERVER.url(db), "--flush", "--seed", "11", "--encoding", enc, *SMALL)
            self.assertEqual(g.returncode, 0, g.stderr)
        rn, ri = Redis(SERVER.url(8)), Redis(SERVER.url(9))
        self.addCleanup(rn.close)
        self.addCleanup(ri.close)

        def num(v):
            return int(v.split("-")[1]) if isinstance(v, str) and v.startswith(("acct-", "lst-")) else v

        rows = nulls = 0
        for a in range(0, 300, 3):
            for params in ({}, {"limit": 200, "w_views": 0.5, "max_price": 100.0}):
                x = reference.rank(None, f"acct-{a:06d}", params, "native", r=rn)
                y = reference.rank(None, str(a), params, "i64", r=ri)
                self.assertEqual([{k: num(v) for k, v in row.items()} for row in x], y, (a, params))
                rows += len(x)
                nulls += sum(row["score"] is None for row in x)
        self.assertGreater(rows, 1000)
        self.assertGreater(nulls, 0)  # listings without a rating: null scores, ranked last


class ReferenceSemantics(unittest.TestCase):
    """A hand-made data set: every rule of the plan, with the answer worked out by hand."""

    def test_hand_made(self):
        r = Redis(SERVER.url(10))
        self.addCleanup(r.close)
        r.call("FLUSHDB")
        doc = lambda **kw: json.dumps({"seller": "acct-000009", "price": 10.0, "title": "t", "category": "c",
                                      "in_stock": True, "rating": 4.0, "views": 0, **kw})
        r.pipeline([
            ("HSET", "mk:account:acct-000001", "region", "eu-west", "tier", "free", "vip", "maybe"),
            ("ZADD", "mk:watch:acct-000001", "0.9", "acct-000009", "0.5", "acct-000008"),
            # seller 9: newest first: lst-a (recency 720), lst-b (360); per_seller 1 keeps only lst-a
            ("ZADD", "mk:shop:acct-000009", "720", "lst-a", "360", "lst-b"),
            ("ZADD", "mk:shop:acct-000008", "0", "lst-c"),
            ("ZADD", "mk:recs:acct-000001", "0.8", "lst-c", "0.7", "lst-d", "0.6", "lst-e", "0.5", "lst-f",
             "0.4", "lst-g", "0.3", "lst-h", "0.2", "lst-i", "0.1", "lst-j"),
            ("SADD", "mk:hidden:acct-000001", "lst-i"),
            ("SET", "mk:listing:lst-a", doc(views=0)),  # 0.5*4 + 0 + 0.3*720/720 = 2.3
            ("SET", "mk:listing:lst-c", doc(rating=1.0)),  # from shop 8 (recency 0) first: 0.5; rec_score dropped by dedupe
            ("SET", "mk:listing:lst-d", doc(rating=2.0)),  # 0.7 + 1.0 = 1.7
            ("SET", "mk:listing:lst-e", doc(in_stock=False)),  # filtered out
            ("SET", "mk:listing:lst-f", '["not", "an", "object"]'),  # all null: in_stock null → filtered
            ("SET", "mk:listing:lst-g", doc(rating="5")),  # wrong type: rating null → score null, last
            ("SET", "mk:listing:lst-h", doc(price=9000.5)),  # over max_price
            ("SET", "mk:listing:lst-i", doc()),  # hidden
            ("SET", "mk:listing:lst-j", doc(views=9, rating=1.0)),  # 0.1 + 0.5 + 0.1*log1p(9)
        ])
        got = reference.rank(None, "acct-000001", {"per_seller": 1}, "native", r=r)
        self.assertEqual([row["id"] for row in got], ["lst-a", "lst-d", "lst-j", "lst-c", "lst-g"])
        want = [0.0 * 1.0 + 4.0 * 0.5 + math.log1p(0) * 0.1 + 720.0 * 0.3 / 720,
                0.7 * 1.0 + 2.0 * 0.5 + math.log1p(0) * 0.1 + 0.0 * 0.3 / 720,
                0.1 * 1.0 + 1.0 * 0.5 + math.log1p(9) * 0.1 + 0.0 * 0.3 / 720,
                0.0 * 1.0 + 1.0 * 0.5 + math.log1p(0) * 0.1 + 0.0 * 0.3 / 720,
                None]
        self.assertEqual([row["score"] for row in got], want)
        self.assertEqual(got[0], {"id": "lst-a", "score": want[0], "seller": "acct-000009", "price": 10.0, "title": "t"})
        # a missing account: zero viewer rows, an empty answer
        self.assertEqual(reference.rank(None, "acct-999999", {}, "native", r=r), [])
        # params are checked against the plan's declaration
        with self.assertRaises(ValueError):
            reference.rank(None, "acct-000001", {"limit": 0}, "native", r=r)
        with self.assertRaises(ValueError):
            reference.rank(None, "acct-000001", {"nope": 1}, "native", r=r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
