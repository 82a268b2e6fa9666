"""A counters family's bounded-staleness cache (`cache_ms`, docs/cache.md) and `rankd
counters FAMILY ID` (docs/events.md), on a real rankd and a real redis-server, events
posted through POST /events:

- with cache_ms 300, a rank right after an acknowledged event may show the old value, a
  rank cache_ms later shows the new one;
- repeated ranks within cache_ms read no counters key again (INFO commandstats), an
  uncached plan reads every key every time;
- a cached and an uncached plan give the same features for the same data;
- `rankd counters` prints one id's live buckets (decoded from the key's ring of slots),
  its stale slots, its bad fields and its fields, the fields equal to what a rank returns;
  its errors name the family, the id, the time or Redis.
About 10 s."""
import json
import os
import random
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import RANKD, Rankd, Redis, free_port, plans_dir, run_tests, write_plan  # noqa: E402

ITEMS = 30
FIELDS = ["clicks_1d", "imps_1d", "dwell_1d", "ctr_1d"]


def counters_family(key, cache_ms):
    # Hourly buckets kept a day: a ring of 25 slots in 4 blocks, all of which a day's window
    # reads, so a cached entry covers every read of the test.
    return {"type": "counters", "key": key, "by": "item", "count": ["impression", "click", "dwell"],
            "bucket_s": 3600, "keep_s": 86400, "cache_ms": cache_ms,
            "fields": {
                "clicks_1d": {"sum": "click", "window_s": 86400},
                "imps_1d": {"sum": "impression", "window_s": 86400},
                "dwell_1d": {"sum": "dwell", "window_s": 86400},
                "ctr_1d": {"rate": ["click", "impression"], "window_s": 86400, "prior": [1, 50]},
            }}


def counts_plan(d, name, family, cache):
    write_plan(d, name, {
        "schema_version": 1, "name": name,
        "nodes": [
            {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": ITEMS}},
            {"node_id": "f", "op": "features", "inputs": ["src"],
             "params": {"family": family, "fields": FIELDS, "cache": cache}},
        ],
        "output": {"node": "f", "columns": ["id"] + FIELDS},
    })


def folder():
    """The demo schema with dwell and two item counters families: `fresh` (cache_ms 300)
    and `slow` (cache_ms 60000), each read by a cached and an uncached plan."""
    d = plans_dir()
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "plans", "schema.json")) as f:
        s = json.load(f)
    s["events"]["dwell"] = {"user": "i64", "item": "i64", "value": True}
    s["families"]["fresh"] = counters_family("cnt:fresh:{id}", 300)
    s["families"]["slow"] = counters_family("cnt:slow:{id}", 60000)
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(s, f)
    for family in ("fresh", "slow"):
        counts_plan(d, f"{family}_cached", family, True)
        counts_plan(d, f"{family}_plain", family, False)
    return d


def post(r, events):
    status, _, data = r.request("POST", "/events", json.dumps({"events": events}))
    assert status == 200 and json.loads(data) == {"accepted": len(events)}, (status, data)


def rank(r, plan):
    status, _, body = r.rank({"plan": plan, "user_id": 1})
    assert status == 200, body
    return {it["id"]: {f: it[f] for f in FIELDS} for it in body["items"]}


def random_events(rng, n):
    now = int(time.time() * 1000)
    out = []
    for _ in range(n):
        kind = rng.choice(["impression"] * 6 + ["click"] * 2 + ["dwell"])
        ev = {"type": kind, "user_id": rng.randrange(5), "item_id": rng.randint(1, ITEMS),
              "ts_ms": now - rng.randrange(0, 20 * 3600 * 1000)}  # within the day's window
        if kind == "dwell":
            ev["value"] = round(rng.uniform(0.5, 30), 3)
        out.append(ev)
    return out


def hmget_calls(redis):
    for line in redis.execute("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_hmget:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


class Env:
    redis = rankd = plans = None


env = Env()


def setup():
    env.redis = Redis()
    env.plans = folder()
    env.rankd = Rankd(env.plans, redis=env.redis, extra_args=["--cache-mb", "16"])
    post(env.rankd, random_events(random.Random(5), 400))


def test_cached_and_uncached_plans_agree():
    for family in ("fresh", "slow"):
        plain = rank(env.rankd, f"{family}_plain")
        assert sum(v["imps_1d"] for v in plain.values()) > 0, plain
        assert rank(env.rankd, f"{family}_cached") == plain, family
        assert rank(env.rankd, f"{family}_cached") == plain, family  # from the cache


def test_repeated_ranks_within_cache_ms_read_no_counters_key():
    rank(env.rankd, "slow_cached")  # filled, if it was not
    before = hmget_calls(env.redis)
    for _ in range(10):
        rank(env.rankd, "slow_cached")
    assert hmget_calls(env.redis) == before, "a cached rank read counters keys again"
    for _ in range(3):
        rank(env.rankd, "slow_plain")
    assert hmget_calls(env.redis) - before == 3 * ITEMS
    # An event does not reach the slow family's cached answer (60 s), only the plain one.
    old = rank(env.rankd, "slow_cached")[7]["clicks_1d"]
    post(env.rankd, [{"type": "click", "user_id": 1, "item_id": 7}])
    assert rank(env.rankd, "slow_plain")[7]["clicks_1d"] == old + 1
    assert rank(env.rankd, "slow_cached")[7]["clicks_1d"] == old


def test_a_value_served_is_never_older_than_cache_ms():
    for round_ in range(3):
        old = rank(env.rankd, "fresh_cached")[3]["clicks_1d"]
        post(env.rankd, [{"type": "click", "user_id": 1, "item_id": 3}] * 2)
        acked = time.monotonic()
        # Within cache_ms the old value may still be served, never anything else.
        assert rank(env.rankd, "fresh_cached")[3]["clicks_1d"] in (old, old + 2), round_
        time.sleep(max(0.0, acked + 0.31 - time.monotonic()))
        assert rank(env.rankd, "fresh_cached")[3]["clicks_1d"] == old + 2, round_
    assert rank(env.rankd, "fresh_cached") == rank(env.rankd, "fresh_plain")


def counters_cli(*args, redis_url=None):
    out = subprocess.run(
        [RANKD, "counters", *args, "--plans", env.plans,
         "--redis", f"redis_default={redis_url or env.redis.url()}"],
        capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout, out.stderr


def test_counters_cli_prints_what_a_rank_reads():
    now = int(time.time() * 1000)
    hour = now // 3_600_000 * 3600
    post(env.rankd, [{"type": "click", "user_id": 1, "item_id": 11, "ts_ms": now}] * 3 +
         [{"type": "dwell", "user_id": 1, "item_id": 11, "value": 2.5, "ts_ms": now}])
    ranked = rank(env.rankd, "fresh_plain")
    for item in (11, 12, 5):
        code, out, err = counters_cli("fresh", str(item), "--now-ms", str(int(time.time() * 1000)))
        assert code == 0, err
        got = json.loads(out)
        assert (got["family"], got["id"], got["key"]) == ("fresh", item, f"cnt:fresh:{item}"), got
        assert got["fields"] == ranked[item], (item, got["fields"], ranked[item])
        assert got["bad_blocks"] == [] and got["stale_slots"] == 0, got
        assert 0 < got["ttl_ms"] <= 86400 * 1000, got
        assert set(got["buckets"]) == {"impression", "click", "dwell"}, got
        # The buckets sum to the day's fields; starts are hours, oldest first.
        for t, field in (("click", "clicks_1d"), ("impression", "imps_1d"), ("dwell", "dwell_1d")):
            starts = [b[0] for b in got["buckets"][t]]
            assert starts == sorted(starts) and all(s % 3600 == 0 for s in starts), got
            assert abs(sum(b[1] for b in got["buckets"][t]) - got["fields"][field]) < 1e-9, (t, got)
    got = json.loads(counters_cli("fresh", "11")[1])
    assert any(b[0] == hour and b[1] >= 3 for b in got["buckets"]["click"]), got
    # An id without events: no buckets, sums 0, the rate its prior.
    got = json.loads(counters_cli("fresh", "999999")[1])
    assert got["buckets"] == {"impression": [], "click": [], "dwell": []} and got["ttl_ms"] is None
    ctr = got["fields"].pop("ctr_1d")
    assert got["fields"] == {"clicks_1d": 0, "imps_1d": 0, "dwell_1d": 0} and abs(ctr - 1 / 51) < 1e-15, got


def write_ring(key, slots, extra=()):
    """Writes `key` as a ring of the test families (25 slots of 28 bytes, 8 to a block):
    `slots` maps a bucket index to its (impression, click, dwell) sums; `extra` adds
    (field, value) pairs as they are."""
    blocks = {}
    for index, sums in slots.items():
        pos = index % 25
        block = blocks.setdefault(pos // 8, bytearray(28 * 8))
        block[(pos % 8) * 28:(pos % 8 + 1) * 28] = struct.pack("<I3d", index, *sums)
    pairs = [x for b, v in blocks.items() for x in (str(b), bytes(v))]
    pairs += [x for pair in extra for x in pair]
    env.redis.execute("DEL", key)
    env.redis.execute("HSET", key, *pairs)


def test_counters_cli_decodes_the_ring():
    now = int(time.time() * 1000)
    h = now // 3_600_000
    # h - 30 is a whole ring older than h: stale, never read again; "9" is past the ring's
    # 4 blocks and "junk" names no block: bad.
    write_ring("cnt:fresh:78", {h: (4, 1, 0), h - 2: (2, 0, 0.5), h - 30: (7, 7, 7)},
               extra=[("9", b"x" * 28), ("junk", b"")])
    code, out, err = counters_cli("fresh", "78", "--now-ms", str(now))
    assert code == 0, err
    got = json.loads(out)
    assert got["buckets"] == {"impression": [[(h - 2) * 3600, 2], [h * 3600, 4]],
                              "click": [[h * 3600, 1]], "dwell": [[(h - 2) * 3600, 0.5]]}, got
    assert got["stale_slots"] == 1 and sorted(got["bad_blocks"]) == ["9", "junk"], got
    ctr = got["fields"].pop("ctr_1d")
    assert got["fields"] == {"clicks_1d": 1, "imps_1d": 6, "dwell_1d": 0.5}, got
    assert abs(ctr - 2 / 57) < 1e-15, got
    # A bucket read a day later is out of the window, still live in the ring.
    got = json.loads(counters_cli("fresh", "78", "--now-ms", str(now + 86_400_000))[1])
    assert got["fields"]["imps_1d"] == 0 and got["stale_slots"] == 1, got


def test_counters_cli_errors():
    for args, code, words in [
        (["nope", "1"], 2, "no family 'nope' (counters: item_counts, user_counts, fresh, slow)"),
        (["item", "1"], 2, "'item' is a hash family"),
        (["fresh", "x1"], 2, "ID: family 'fresh' is keyed by i64 ids (an integer >= 0), got 'x1'"),
        (["fresh", "-3"], 2, "got '-3'"),
        (["fresh"], 2, "give FAMILY and ID first"),
        (["fresh", "1", "--now-ms", "soon"], 2, "--now-ms"),
        (["fresh", "1", "--colour", "red"], 2, "unknown argument '--colour'"),
        (["fresh", "1", "--now-ms", "0"], 2, "--now-ms: 0 is outside the times"),
    ]:
        got, out, err = counters_cli(*args)
        assert got == code and out == "" and words in err, (args, got, out, err)
    got, out, err = counters_cli("fresh", "1", redis_url=f"redis://127.0.0.1:{free_port()}")
    assert got == 1 and out == "" and "redis_default" in err, (got, err)
    env.redis.execute("SET", "cnt:fresh:77", "not a hash")
    got, out, err = counters_cli("fresh", "77")
    assert got == 1 and "cnt:fresh:77: WRONGTYPE" in err, (got, err)
    helped = subprocess.run([RANKD, "counters", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "rankd counters FAMILY ID" in helped.stdout


if __name__ == "__main__":
    setup()  # the processes stop at exit (harness)
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
