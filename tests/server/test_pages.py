"""Pages of /rank (docs/api.md, "Pages"): "page_size" on a first request,
"cursor" on the next ones, the ranking kept as a snapshot in Redis. A real redis-server
with the demo data and real rankd processes:

- the feed paged 10 x 20 is 200 distinct items, the first 200 of the same ranking asked
  whole; later pages have the first page's shape; params and explain are ignored there;
  a ranking whose ids repeat pages the first row of each id;
- a cursor altered, cut, of another user, of another plan, or signed with another key is
  400 invalid_cursor; past --page-ttl-ms, or its snapshot deleted, 410 cursor_expired;
- later pages stay those of the snapshot while the data under the ranking changes;
- two replicas sharing --cursor-key-file serve each other's cursors, one with its own key
  refuses them; --page-max-items ends a chain; with the cache on;
- page_size out of 1..500 is 422; a ranking that fits one page writes nothing;
- a snapshot write that fails (page endpoint down, or refused by a Redis ACL) answers the
  first page without a cursor and counts it;
- rankd writes no key but its snapshots: its Redis user may write only rankd:page:*;
- a plan and user keep --page-max-snapshots chains: a new one ends the oldest (410), and
  3,000 first pages of one user leave that many snapshots and a few KB in Redis; past
  --page-write-bytes-per-s a first page goes without a cursor.
"""
import hashlib
import hmac
import json
import os
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SOURCE_ROOT, Rankd, Redis, demo_data, free_port, metric_value,  # noqa: E402
                     plans_dir, run_tests, temp_path, wait_until)

USERS = 300
ACL_USER, ACL_PASSWORD = "ranker", "ranker-secret-1"
_env = {}
# Ids 1..10, then 1..30 again: 40 rows, 30 ids.
REPEATS = {"schema_version": 1, "name": "repeats", "description": "ids that repeat",
           "params": {}, "expr_table": {}, "pred_table": {},
           "nodes": [{"node_id": "a", "op": "fixed_source", "inputs": [], "params": {"count": 10}},
                     {"node_id": "b", "op": "fixed_source", "inputs": [], "params": {"count": 30}},
                     {"node_id": "c", "op": "concat", "inputs": ["a", "b"], "params": {}}],
           "output": {"node": "c", "columns": ["id", "score"]}}
# 200 distinct ids: a snapshot of about 6 KB.
MANY = {"schema_version": 1, "name": "many", "description": "200 items", "params": {},
        "expr_table": {}, "pred_table": {},
        "nodes": [{"node_id": "a", "op": "fixed_source", "inputs": [], "params": {"count": 200}}],
        "output": {"node": "a", "columns": ["id", "score"]}}


def patient_feed():
    """plans/feed without its nodes' timeouts: a slow (sanitizer) build must not degrade
    the recommendations node, or the whole ranking and the paged one would differ for a
    reason that is not paging."""
    with open(os.path.join(SOURCE_ROOT, "plans", "feed.plan.json")) as f:
        plan = json.load(f)
    for node in plan["nodes"]:
        node.pop("timeout_ms", None)
    return plan


class AsUser:
    """Redis `r` reached as the ACL user that may read every key but write only rankd's
    snapshots (Rankd(redis=...) takes anything with url())."""

    def __init__(self, r, user, password):
        self.r, self.user, self.password = r, user, password

    def url(self):
        return f"redis://{self.user}:{self.password}@127.0.0.1:{self.r.port}"


def env():
    if not _env:
        r = Redis()
        demo_data(r, USERS)
        # rankd's own user: reads anything, writes only keys under rankd:page: (reads them too).
        assert r.execute("ACL", "SETUSER", ACL_USER, "on", ">" + ACL_PASSWORD, "resetkeys",
                         "%R~*", "~rankd:page:*", "+@all") == "OK"
        key_file = temp_path("rankd-cursor-key-")
        with open(key_file, "wb") as f:
            f.write(os.urandom(48))
        plans = plans_dir({"feed": patient_feed(), "repeats": REPEATS, "many": MANY})
        common = ["--cursor-key-file", key_file, "--deadline-ms", "5000"]
        # a: no byte rate to speak of, so that the quota is what bounds its snapshots.
        _env.update(redis=r, plans=plans, key_file=key_file, common=common,
                    a=Rankd(plans, redis=AsUser(r, ACL_USER, ACL_PASSWORD), shards=2,
                            extra_args=common + ["--page-write-bytes-per-s", str(1 << 40)]
                            ).wait_ready())
    return _env


def rank(rankd, body):
    status, _, out = rankd.rank(body, timeout=30)
    return status, out


def ok(rankd, body):
    status, out = rank(rankd, body)
    assert status == 200, (status, out)
    return out


def error(rankd, body, status, code):
    got, out = rank(rankd, body)
    assert got == status and out["error"]["code"] == code, (got, out)
    return out["error"]["message"]


def whole(rankd, user, limit=500):
    return ok(rankd, {"plan": "feed", "user_id": user, "params": {"limit": limit}})["items"]


def page_keys(r):
    return set(r.execute("KEYS", "rankd:page:*"))


def snapshot_keys(r, tag="*"):
    """Snapshots, rankd:page:{<tag>}:<id>, without the chains' lists rankd:page:{<tag>}."""
    return set(r.execute("KEYS", "rankd:page:{" + tag + "}:*"))


def chain_tag(key_file, plan, user):
    """The hash tag of a plan and integer user's keys: HMAC-SHA256 under the cursor key of
    0xff "chain", the plan (length first) and the user id, its first 16 bytes in hex."""
    with open(key_file, "rb") as f:
        key = f.read()
    msg = (b"\xffchain" + struct.pack("<I", len(plan)) + plan.encode() + b"i" +
           struct.pack("<Q", user & (2**64 - 1)))
    return hmac.new(key, msg, hashlib.sha256).digest()[:16].hex()


def viewer_with(rankd, n):
    """A viewer whose whole feed ranking has at least n items."""
    for user in range(1, USERS):
        if len(whole(rankd, user)) >= n:
            return user
    raise AssertionError(f"no viewer with {n} items in feed")


def follow(rankd, first, user, plan="feed", pages=None):
    """The items of the chain that starts with answer `first`, and every answer."""
    answers = [first]
    items = list(first["items"])
    cursor = first.get("cursor")
    while cursor and (pages is None or len(answers) < pages):
        answers.append(ok(rankd, {"plan": plan, "user_id": user, "cursor": cursor}))
        items += answers[-1]["items"]
        cursor = answers[-1].get("cursor")
    return items, answers


def test_feed_paged_10_by_20_is_the_whole_ranking():
    e = env()
    a = e["a"]
    user = viewer_with(a, 201)
    want = whole(a, user)
    written = metric_value(a.metrics(), "rankd_page_snapshots_total", outcome="written") or 0
    first = ok(a, {"plan": "feed", "user_id": user, "page_size": 20, "params": {"limit": 500}})
    assert first["count"] == 20 and first["cursor"], first
    items, answers = follow(a, first, user, pages=10)
    assert len(answers) == 10 and len(items) == 200
    assert len({i["id"] for i in items}) == 200, "an item repeats within the chain"
    assert items == want[:200]
    # Later pages: the first page's shape, their own count; a cursor while items remain.
    for p in answers[1:]:
        assert set(p) == set(first), (sorted(p), sorted(first))
        assert p["plan"] == "feed" and p["user_id"] == user and p["count"] == 20
        assert p["degraded"] == first["degraded"]
    # The chain goes on to the end of the ranking, and the last page has no cursor.
    rest, tail = follow(a, answers[-1], user)
    assert items + rest[20:] == want and "cursor" not in tail[-1], len(rest)
    assert tail[-1]["count"] == len(want) - 20 * (len(answers) + len(tail) - 2)
    metrics = a.metrics()
    assert metric_value(metrics, "rankd_page_snapshots_total", outcome="written") == written + 1
    assert metric_value(metrics, "rankd_page_requests_total", outcome="ok") >= 9 + len(tail) - 1


def test_later_pages_take_a_page_size_and_ignore_params_and_explain():
    e = env()
    a = e["a"]
    user = viewer_with(a, 60)
    want = whole(a, user, limit=60)
    first = ok(a, {"plan": "feed", "user_id": user, "page_size": 10, "params": {"limit": 60},
                   "explain": True})
    assert "nodes" in first and first["count"] == 10
    second = ok(a, {"plan": "feed", "user_id": user, "cursor": first["cursor"], "page_size": 25,
                    "params": {"limit": 1, "weight": 9.0}, "explain": True})
    assert "nodes" not in second and second["count"] == 25
    assert second["items"] == want[10:35]
    # The first request's page size again when none is asked.
    third = ok(a, {"plan": "feed", "user_id": user, "cursor": second["cursor"]})
    assert third["items"] == want[35:45]
    # A cursor can be asked again: it names a place in the snapshot, not a session.
    again = ok(a, {"plan": "feed", "user_id": user, "cursor": second["cursor"]})
    assert again["items"] == third["items"] and again["cursor"] == third["cursor"]


def test_a_chain_holds_the_first_row_of_each_id():
    a = env()["a"]
    rows = ok(a, {"plan": "repeats", "user_id": 1})["items"]
    assert len(rows) == 40
    first_of_each = [row for k, row in enumerate(rows) if row["id"] not in
                     {r["id"] for r in rows[:k]}]
    items, answers = follow(a, ok(a, {"plan": "repeats", "user_id": 1, "page_size": 7}), 1,
                            plan="repeats")
    assert items == first_of_each and [p["count"] for p in answers] == [7, 7, 7, 7, 2]


def test_page_size_out_of_range_is_422():
    a = env()["a"]
    for bad in (0, 501, -1, 2**63, -(2**63)):
        msg = error(a, {"plan": "feed", "user_id": 1, "page_size": bad}, 422, "invalid_param")
        assert msg.startswith("page_size:") and "1..500" in msg, msg
    for bad in ("20", 2.5, None, [20]):
        msg = error(a, {"plan": "feed", "user_id": 1, "page_size": bad}, 400, "bad_request")
        assert msg.startswith("page_size:"), msg
    first = ok(a, {"plan": "feed", "user_id": 1, "page_size": 5})
    error(a, {"plan": "feed", "user_id": 1, "cursor": first["cursor"], "page_size": 501}, 422,
          "invalid_param")
    error(a, {"plan": "feed", "user_id": 1, "cursor": 12}, 400, "bad_request")


def test_one_page_writes_nothing():
    e = env()
    a, r = e["a"], e["redis"]
    before = page_keys(r)
    one = metric_value(a.metrics(), "rankd_page_snapshots_total", outcome="one_page") or 0
    got = ok(a, {"plan": "feed", "user_id": 2, "page_size": 500, "params": {"limit": 30}})
    assert "cursor" not in got and got["count"] == len(whole(a, 2, limit=30))
    assert page_keys(r) == before
    assert metric_value(a.metrics(), "rankd_page_snapshots_total", outcome="one_page") == one + 1


def test_bad_cursors_are_400():
    e = env()
    a = e["a"]
    first = ok(a, {"plan": "feed", "user_id": 3, "page_size": 5})
    cursor = first["cursor"]
    flip = {"A": "B"}.get(cursor[40], "A")
    cases = {
        "altered": {"plan": "feed", "user_id": 3, "cursor": cursor[:40] + flip + cursor[41:]},
        "cut": {"plan": "feed", "user_id": 3, "cursor": cursor[:-4]},
        "longer": {"plan": "feed", "user_id": 3, "cursor": cursor + "AAAA"},
        "not base64url": {"plan": "feed", "user_id": 3, "cursor": cursor[:-1] + "="},
        "empty": {"plan": "feed", "user_id": 3, "cursor": ""},
        "another user": {"plan": "feed", "user_id": 4, "cursor": cursor},
        "another plan": {"plan": "home_light", "user_id": 3, "cursor": cursor},
        "a string user id": {"plan": "feed", "user_id": "3", "cursor": cursor},
    }
    counted = metric_value(a.metrics(), "rankd_page_requests_total", outcome="invalid_cursor") or 0
    for name, body in cases.items():
        msg = error(a, body, 400, "invalid_cursor")
        assert msg.startswith("cursor:"), (name, msg)
    assert (metric_value(a.metrics(), "rankd_page_requests_total", outcome="invalid_cursor") ==
            counted + len(cases))
    # Still good as it came.
    assert ok(a, {"plan": "feed", "user_id": 3, "cursor": cursor})["count"] == 5


def test_snapshot_deleted_is_410():
    e = env()
    a, r = e["a"], e["redis"]
    before = snapshot_keys(r)
    first = ok(a, {"plan": "feed", "user_id": 5, "page_size": 5})
    made = snapshot_keys(r) - before
    assert len(made) == 1, made
    key = made.pop()
    ttl = r.execute("PTTL", key)
    assert 590000 < ttl <= 600000, ttl  # --page-ttl-ms's default
    assert r.execute("DEL", key) == 1
    msg = error(a, {"plan": "feed", "user_id": 5, "cursor": first["cursor"]}, 410, "cursor_expired")
    assert msg.startswith("cursor:"), msg
    # A key rewritten by someone else is no snapshot either.
    first = ok(a, {"plan": "feed", "user_id": 5, "page_size": 5})
    key = (snapshot_keys(r) - before).pop()
    r.execute("SET", key, "something else")
    error(a, {"plan": "feed", "user_id": 5, "cursor": first["cursor"]}, 410, "cursor_expired")


def test_pages_stay_on_the_snapshot_while_the_data_changes():
    e = env()
    a, r = e["a"], e["redis"]
    user = viewer_with(a, 80)
    want = whole(a, user, limit=80)
    first = ok(a, {"plan": "feed", "user_id": user, "page_size": 20, "params": {"limit": 80}})
    # Every item after the first page becomes nsfw: a new run filters them out.
    r.execute_many([("HSET", f"item:{i['id']}", "nsfw", 1) for i in want[20:]])
    try:
        fresh = whole(a, user, limit=80)
        assert not {i["id"] for i in fresh} & {i["id"] for i in want[20:]}, "the change shows"
        items, answers = follow(a, first, user)
        assert items == want and len(answers) == 4
    finally:
        r.execute_many([("HSET", f"item:{i['id']}", "nsfw", 0) for i in want[20:]])


def test_two_replicas_share_a_key_file_and_ttl_and_max_items_end_a_chain():
    e = env()
    a, r = e["a"], e["redis"]
    b = Rankd(e["plans"], redis=r, extra_args=e["common"] + [
        "--page-ttl-ms", "1000", "--page-max-items", "25"]).wait_ready()
    other = Rankd(e["plans"], redis=r, extra_args=["--deadline-ms", "5000"]).wait_ready()
    user = viewer_with(a, 40)
    want = whole(a, user, limit=40)
    # a's cursor, served by b and back by a.
    first = ok(a, {"plan": "feed", "user_id": user, "page_size": 10, "params": {"limit": 40}})
    second = ok(b, {"plan": "feed", "user_id": user, "cursor": first["cursor"]})
    third = ok(a, {"plan": "feed", "user_id": user, "cursor": second["cursor"]})
    assert first["items"] + second["items"] + third["items"] == want[:30]
    # A replica with its own (random) key refuses both.
    error(other, {"plan": "feed", "user_id": user, "cursor": first["cursor"]}, 400,
          "invalid_cursor")
    # b keeps 25 items of a ranking: its chain ends there, in pages of 10, 10 and 5.
    first = ok(b, {"plan": "feed", "user_id": user, "page_size": 10, "params": {"limit": 40}})
    items, answers = follow(a, first, user)
    assert items == want[:25] and [p["count"] for p in answers] == [10, 10, 5]
    # ... for 1000 ms: served by a before, 410 once Redis has expired b's snapshots.
    short = [k for k in r.execute("KEYS", "*rankd:page:*") if 0 <= r.execute("PTTL", k) <= 1000]
    assert short
    wait_until(lambda: all(r.execute("EXISTS", k) == 0 for k in short), timeout=10,
               what="b's snapshots to expire")
    error(a, {"plan": "feed", "user_id": user, "cursor": first["cursor"]}, 410, "cursor_expired")
    assert metric_value(a.metrics(), "rankd_page_requests_total", outcome="cursor_expired") >= 1
    b.stop()
    other.stop()


def test_pages_with_the_cache_on():
    e = env()
    cached = Rankd(e["plans"], redis=e["redis"], shards=2,
                   extra_args=e["common"] + ["--cache-mb", "16"]).wait_ready()
    user = viewer_with(cached, 100)
    want = whole(cached, user, limit=100)
    assert want == whole(e["a"], user, limit=100)
    for _ in range(2):  # the second time from the cache
        first = ok(cached, {"plan": "feed", "user_id": user, "page_size": 30,
                            "params": {"limit": 100}})
        items, answers = follow(cached, first, user)
        assert items == want and len(answers) == 4 and answers[-1]["count"] == 10
    cached.stop()


def test_snapshot_write_failures_answer_without_a_cursor():
    e = env()
    r = e["redis"]
    # A page endpoint nobody listens on; and one whose user may write no key at all.
    r.execute("ACL", "SETUSER", "reader", "on", ">reader-secret-1", "resetkeys", "%R~*", "+@all")
    ends = {"down": f"redis://127.0.0.1:{free_port()}",
            "refused": f"redis://reader:reader-secret-1@127.0.0.1:{r.port}"}
    for name, url in ends.items():
        s = Rankd(e["plans"], redis=r, extra_args=e["common"] + [
            "--redis", f"pages={url}", "--page-endpoint", "pages"])
        if name == "refused":
            s.wait_ready()  # connected: the SET reaches Redis, which refuses it (NOPERM)
        before = page_keys(r)
        got = ok(s, {"plan": "feed", "user_id": 6, "page_size": 5})
        assert "cursor" not in got and got["count"] == 5, (name, got)
        assert got["items"] == whole(s, 6, limit=50)[:5]
        assert page_keys(r) == before
        metrics = s.metrics()
        assert metric_value(metrics, "rankd_page_snapshots_total", outcome="write_failed") == 1, name
        assert (metric_value(metrics, "rankd_page_snapshots_total", outcome="written") or 0) == 0
        assert "first page sent without cursor: page snapshot" in s.stderr(), (name, s.stderr()[-2000:])
        s.stop()


def ended(rankd):
    return metric_value(rankd.metrics(), "rankd_page_chains_ended_total") or 0


def test_a_viewer_keeps_page_max_snapshots_chains():
    e = env()
    a, r = e["a"], e["redis"]
    tag = chain_tag(e["key_file"], "repeats", 77)
    before = ended(a)
    # Five chains of one plan and user, over both shards (a connection each).
    firsts = [ok(a, {"plan": "repeats", "user_id": 77, "page_size": 5}) for _ in range(5)]
    assert all(f.get("cursor") for f in firsts)
    assert len(snapshot_keys(r, tag)) == 4 and r.execute("LLEN", "rankd:page:{" + tag + "}") == 4
    assert 0 < r.execute("PTTL", "rankd:page:{" + tag + "}") <= 600000
    # The oldest ended; the newest four page on.
    msg = error(a, {"plan": "repeats", "user_id": 77, "cursor": firsts[0]["cursor"]}, 410,
                "cursor_expired")
    assert msg.startswith("cursor:"), msg
    for f in firsts[1:]:
        assert ok(a, {"plan": "repeats", "user_id": 77, "cursor": f["cursor"]})["count"] == 5
    assert ended(a) == before + 1
    # Another user's and another plan's chains are counted apart.
    other = ok(a, {"plan": "repeats", "user_id": 78, "page_size": 5})
    feed = ok(a, {"plan": "feed", "user_id": 77, "page_size": 5})
    assert ended(a) == before + 1 and len(snapshot_keys(r, tag)) == 4
    for plan, user, f in (("repeats", 78, other), ("feed", 77, feed), ("repeats", 77, firsts[1])):
        ok(a, {"plan": plan, "user_id": user, "cursor": f["cursor"]})


def test_3000_first_pages_of_one_user_stay_within_the_quota():
    e = env()
    a, r = e["a"], e["redis"]
    tag = chain_tag(e["key_file"], "many", 79)
    used = r.execute("INFO", "memory")
    start = int(used.split("used_memory:")[1].split()[0])
    errors = []

    def client(n):
        conn = a.conn(timeout=30)
        try:
            for _ in range(n):
                conn.request("POST", "/rank", json.dumps({"plan": "many", "user_id": 79, "page_size": 1}))
                resp = conn.getresponse()
                body = json.loads(resp.read())
                if resp.status != 200 or not body.get("cursor"):
                    errors.append((resp.status, body))
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(750,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    keys = snapshot_keys(r, tag)
    assert len(keys) == 4, len(keys)
    usage = sum(r.execute("MEMORY", "USAGE", k) for k in keys | {"rankd:page:{" + tag + "}"})
    used = r.execute("INFO", "memory")
    grown = int(used.split("used_memory:")[1].split()[0]) - start
    # Without the quota: 3,000 snapshots of about 6 KB, 18 MB.
    assert grown < 8 << 20, grown
    print(f"     3,000 first pages: {len(keys)} snapshots, {usage} bytes (MEMORY USAGE), "
          f"used_memory grew {grown} bytes")


def test_past_the_byte_rate_a_first_page_goes_without_a_cursor():
    e = env()
    # 100 bytes a second: the first snapshot (over 1 KB) empties the bucket for 10 s.
    s = Rankd(e["plans"], redis=e["redis"], extra_args=e["common"] + [
        "--page-write-bytes-per-s", "100"]).wait_ready()
    first = ok(s, {"plan": "repeats", "user_id": 80, "page_size": 5})
    second = ok(s, {"plan": "repeats", "user_id": 81, "page_size": 5})
    assert first.get("cursor") and "cursor" not in second, second
    assert second["items"] == first["items"]
    metrics = s.metrics()
    assert metric_value(metrics, "rankd_page_snapshots_total", outcome="rate_limited") == 1
    assert metric_value(metrics, "rankd_page_snapshots_total", outcome="written") == 1
    s.stop()


def test_start_up_errors():
    e = env()
    short = temp_path("rankd-short-key-")
    with open(short, "wb") as f:
        f.write(b"x" * 31)
    cases = [
        (["--cursor-key-file", short], "--cursor-key-file: " + short + " holds 31 bytes"),
        (["--cursor-key-file", short + ".none"], "--cursor-key-file: cannot read"),
        (["--page-endpoint", "nope"], "--page-endpoint: no --redis endpoint is named 'nope'"),
        (["--page-max-items", "0"], "--page-max-items"),
        (["--page-ttl-ms", "0"], "--page-ttl-ms"),
        (["--page-max-snapshots", "0"], "--page-max-snapshots"),
        (["--page-write-bytes-per-s", "0"], "--page-write-bytes-per-s"),
    ]
    for args, says in cases:
        out = subprocess.run([RANKD, "serve", "--port", "0", "--plans", e["plans"], "--enable-test-ops",
                              "--redis", f"redis_default={e['redis'].url()}"] + args,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and says in out.stderr, (args, out.returncode, out.stderr)


if __name__ == "__main__":
    run_tests([
        ("the feed paged 10 x 20 is the whole ranking's first 200",
         test_feed_paged_10_by_20_is_the_whole_ranking),
        ("later pages take a page_size, ignore params and explain",
         test_later_pages_take_a_page_size_and_ignore_params_and_explain),
        ("a chain holds the first row of each id", test_a_chain_holds_the_first_row_of_each_id),
        ("page_size out of 1..500 is 422", test_page_size_out_of_range_is_422),
        ("a ranking that fits one page writes nothing", test_one_page_writes_nothing),
        ("altered, cut, other user's and other plan's cursors are 400", test_bad_cursors_are_400),
        ("a deleted snapshot is 410", test_snapshot_deleted_is_410),
        ("pages stay on the snapshot while the data changes",
         test_pages_stay_on_the_snapshot_while_the_data_changes),
        ("two replicas share a key file; --page-max-items and --page-ttl-ms end a chain",
         test_two_replicas_share_a_key_file_and_ttl_and_max_items_end_a_chain),
        ("pages with the cache on", test_pages_with_the_cache_on),
        ("a failed snapshot write answers without a cursor",
         test_snapshot_write_failures_answer_without_a_cursor),
        ("a plan and user keep --page-max-snapshots chains; the oldest ends in 410",
         test_a_viewer_keeps_page_max_snapshots_chains),
        ("3,000 first pages of one user stay within the quota",
         test_3000_first_pages_of_one_user_stay_within_the_quota),
        ("past --page-write-bytes-per-s a first page goes without a cursor",
         test_past_the_byte_rate_a_first_page_goes_without_a_cursor),
        ("start-up errors", test_start_up_errors),
    ])
