"""The served log end to end (docs/served-log.md): a real rankd writing records of what it
served to a real file and a real redis-server stream; the records against the answers
the clients got, sampling, rotation, sinks that fail and come back while traffic runs,
the drain's flush, bad flags and plans, `rankd replay`, and the training loop
(ops/train-from-log with Debian's python3-xgboost, so this file runs under
/usr/bin/python3): serve, click through POST /events into the event log, train on it
(and on a clicks file), reload, serve the new model, replay."""
import hashlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SOURCE_ROOT, Rankd, Redis, demo_data, listening_ports, metric_value,  # noqa: E402
                     plans_dir, run_tests, simple_plan, temp_dir, wait_until, write_plan)

USERS = 200
TRAIN_FROM_LOG = os.path.join(SOURCE_ROOT, "ops", "train-from-log")

_data = {}


def data_redis():
    """One seeded redis-server for every test's data plane."""
    if "redis" not in _data:
        _data["redis"] = Redis()
        demo_data(_data["redis"], USERS)
    return _data["redis"]


def load_plan(name):
    with open(os.path.join(SOURCE_ROOT, "plans", f"{name}.plan.json")) as f:
        return json.load(f)


def logged(base, name, **log):
    """plans/BASE as plan NAME with a log block; its optional nodes wait as long as needed
    (a sanitizer build is slow, and a degraded answer is not what these tests are about)."""
    p = load_plan(base)
    p["name"] = name
    for node in p["nodes"]:
        node.pop("timeout_ms", None)
    p["log"] = log
    return p


def records_in(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out


def counted(rankd, outcome, sink):
    return metric_value(rankd.metrics(), "rankd_served_log_records_total",
                        sink=sink, outcome=outcome) or 0


def sink_flag(name, url):
    return ["--served-log", f"{name}={url}"]


def file_sink(path, max_mb=64, keep=2):
    return f"file://{path}?max_mb={max_mb}&keep={keep}"


def replay(log, plans, extra=(), expect=0):
    """Runs `rankd replay`; its exit status must be `expect` (0: every record checked
    agreed or differed only as reported; 1: nothing could be checked)."""
    out = subprocess.run([RANKD, "replay", "--log", log, "--plans", plans, "--enable-test-ops", *extra],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == expect, \
        f"rankd replay exited {out.returncode}, not {expect}: {out.stderr[-2000:]}"
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    return out.returncode, {x["model"]: x for x in lines}, out.stderr


def test_file_records_equal_the_answers():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    plans = plans_dir({"logged": logged("rerank", "logged", sample=1.0, sink="main",
                                        candidates={"node": "top_k", "top": 5})})
    rankd = Rankd(plans, redis=data_redis(), shards=2,
                  extra_args=sink_flag("main", file_sink(path))).wait_ready()
    answers = {}
    for i in range(30):
        user = 1 + (i * 7) % USERS
        limit = 5 + i % 10
        status, headers, body = rankd.rank({"plan": "logged", "user_id": user,
                                            "params": {"limit": limit}})
        assert status == 200, body
        assert len(body["served_id"]) == 32 and int(body["served_id"], 16) >= 0, body
        answers[body["served_id"]] = (user, limit, body, headers)
    wait_until(lambda: counted(rankd, "written", "main") == 30, what="30 records written")
    recs = {r["served_id"]: r for r in records_in(path)}
    assert set(recs) == set(answers), "one record per answer, under the answer's served_id"
    with open(os.path.join(plans, "logged.plan.json"), "rb") as f:
        plan_sha = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(plans, "rerank.model.json"), "rb") as f:
        model_sha = hashlib.sha256(f.read()).hexdigest()
    model_features = None
    for sid, (user, limit, body, headers) in answers.items():
        r = recs[sid]
        assert r["plan"] == "logged" and r["plan_sha256"] == plan_sha
        assert r["user_id"] == user and r["params"] == {"k": 200, "limit": limit}
        assert r["experiment"] is None and r["variant"] is None and r["shadow"] is False
        assert r["degraded"] == body["degraded"]
        assert r["viewer"]["id"] == user
        assert isinstance(r["ts_ms"], int) and abs(r["ts_ms"] / 1000 - time.time()) < 120
        assert len(r["request_id"]) > 0
        served = [it for it in r["items"] if it["served"]]
        unserved = [it for it in r["items"] if not it["served"]]
        assert r["items"][:len(served)] == served, "served items come first"
        assert len(served) == len(body["items"])
        for pos, (it, ans) in enumerate(zip(served, body["items"])):
            assert it["position"] == pos
            assert it["id"] == ans["id"] and it["score"] == ans["score"]
            assert it["columns"] == ans, (it["columns"], ans)
            m = it["models"]["model"]
            assert m["model"] == "rerank" and m["sha256"] == model_sha and m["output"] == "default"
            assert m["score"] == ans["score"], "the model's score is the served score"
            model_features = model_features or list(m["inputs"])
            assert list(m["inputs"]) == model_features
        served_ids = {it["id"] for it in served}
        assert len(unserved) == 5
        for it in unserved:
            assert it["id"] not in served_ids and it["position"] >= 0
            assert set(it["columns"]) == {"id", "score", "author"}
            assert "model" in it["models"], "the candidates of top_k were all scored"
    assert model_features == ["likes", "age_s", "quality", "nsfw"]
    code, stats, err = replay(path, plans)
    assert code == 0, err
    checked = sum(len(r["items"]) for r in recs.values())
    assert stats["rerank"]["checked"] == checked and stats["rerank"]["differ"] == 0, stats
    assert stats["rerank"]["sha256_mismatch"] == 0 and stats["rerank"]["max_abs_diff"] == 0

    # The model is changed: replay reports every score as of another model, and that
    # they moved, but fails nothing (no score of the same model differs).
    changed = temp_dir("rankd-plans-changed-")
    for f in os.listdir(plans):
        shutil.copy(os.path.join(plans, f), changed)
    with open(os.path.join(changed, "rerank.model.json")) as f:
        model = json.load(f)
    model["learner"]["learner_model_param"]["base_score"] = "3E-1"
    with open(os.path.join(changed, "rerank.model.json"), "w") as f:
        json.dump(model, f)
    code, stats, err = replay(path, changed)
    assert code == 0, err
    assert stats["rerank"]["sha256_mismatch"] == checked and stats["rerank"]["max_abs_diff"] > 0
    # A model the folder lacks checks nothing: exit 1.
    os.remove(os.path.join(changed, "rerank.model.json"))
    os.remove(os.path.join(changed, "rerank.plan.json"))
    os.remove(os.path.join(changed, "logged.plan.json"))
    code, stats, err = replay(path, changed, expect=1)
    assert code == 1 and stats["rerank"]["missing"] == checked and stats["rerank"]["checked"] == 0
    assert rankd.stop() == 0


def test_sampling_and_asking():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    plans = plans_dir({"quarter": logged("simple_viewer", "quarter", sample=0.25, sink="main"),
                       "asked": logged("simple_viewer", "asked", sink="main")})
    rankd = Rankd(plans, redis=data_redis(),
                  extra_args=sink_flag("main", file_sink(path)) + ["--allow-forced-logging"]).wait_ready()
    n = 800
    conn = rankd.conn()
    with_id = 0
    for i in range(n):
        conn.request("POST", "/rank", json.dumps({"plan": "quarter", "user_id": 1 + i % USERS}))
        r = conn.getresponse()
        body = json.loads(r.read())
        assert r.status == 200
        with_id += "served_id" in body
    # Binomial(800, 0.25): mean 200, sd 12.2; 5 sd either side fails once in ~3.5 million.
    assert 139 <= with_id <= 261, with_id
    wait_until(lambda: counted(rankd, "written", "main") == with_id, what="the sampled records")
    assert len(records_in(path)) == with_id
    # sample 0 (the default): only the requests that ask are recorded.
    for ask in (False, True, False, True):
        status, _, body = rankd.rank({"plan": "asked", "user_id": 3, "log": ask})
        assert status == 200 and ("served_id" in body) == ask, body
    wait_until(lambda: counted(rankd, "written", "main") == with_id + 2, what="asked records")
    recs = records_in(path)
    assert [r["forced_log"] for r in recs if r["plan"] == "asked"] == [True, True]
    assert not any(r["forced_log"] for r in recs if r["plan"] == "quarter")
    status, _, body = rankd.rank({"plan": "asked", "user_id": 3, "log": "yes"})
    assert status == 400 and "log" in body["error"]["message"], body
    # A plan without a log block records nothing, asked or not.
    status, _, body = rankd.rank({"plan": "simple_viewer", "user_id": 3, "log": True})
    assert status == 200 and "served_id" not in body
    assert rankd.stop() == 0


# --- xoshiro256** and the recovery of its state from its outputs, over GF(2) -----------
M64 = (1 << 64) - 1


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Xoshiro:
    """xoshiro256** (Blackman and Vigna), as the served log used to make its ids."""

    def __init__(self, s):
        self.s = list(s)

    def next(self):
        s = self.s
        out = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return out

    def served_id(self):  # two outputs, as 32 hex digits
        return "%016x%016x" % (self.next(), self.next())


def xoshiro_s1(out):
    """The state word s[1] that gave output `out`: the scrambler is a bijection."""
    x = (out * pow(9, -1, 1 << 64)) & M64
    return (rotl(x, 64 - 7) * pow(5, -1, 1 << 64)) & M64


def predict_third_id(id1, id2):
    """From two served ids (four consecutive outputs), the state over GF(2) — every bit of
    the state a linear form of the 256 unknown seed bits, each a bit mask — and from it
    the next id. None when the outputs fit no state."""
    sym = [[1 << (64 * w + b) for b in range(64)] for w in range(4)]  # bit b of word w

    def step(s):
        t = [0] * 17 + s[1][:47]  # s1 << 17
        s[2] = [a ^ b for a, b in zip(s[2], s[0])]
        s[3] = [a ^ b for a, b in zip(s[3], s[1])]
        s[1] = [a ^ b for a, b in zip(s[1], s[2])]
        s[0] = [a ^ b for a, b in zip(s[0], s[3])]
        s[2] = [a ^ b for a, b in zip(s[2], t)]
        s[3] = s[3][-45:] + s[3][:-45]  # rotl 45: bit b comes from bit b - 45

    rows = []  # (mask, bit)
    outputs = [int(id1[:16], 16), int(id1[16:], 16), int(id2[:16], 16), int(id2[16:], 16)]
    for out in outputs:
        s1 = xoshiro_s1(out)
        rows += [(sym[1][b], (s1 >> b) & 1) for b in range(64)]
        step(sym)
    pivots = {}  # pivot bit -> (mask, rhs), reduced
    for mask, rhs in rows:
        for p, (pm, pr) in pivots.items():
            if mask >> p & 1:
                mask, rhs = mask ^ pm, rhs ^ pr
        if mask == 0:
            if rhs:
                return None  # inconsistent: no xoshiro256** state gives these outputs
            continue
        p = mask.bit_length() - 1
        for q, (qm, qr) in list(pivots.items()):
            if qm >> p & 1:
                pivots[q] = (qm ^ mask, qr ^ rhs)
        pivots[p] = (mask, rhs)
    seed = 0  # free bits (if any) taken as 0
    for p, (mask, rhs) in pivots.items():
        if rhs:
            seed |= 1 << p
    state = [(seed >> (64 * w)) & M64 for w in range(4)]
    g = Xoshiro(state)
    for _ in range(4):
        g.next()
    return g.served_id()


def test_served_ids_do_not_predict_each_other():
    # The recovery works: two ids of a reference xoshiro256** give the third.
    rng = random.Random(44)
    for _ in range(3):
        g = Xoshiro([rng.getrandbits(64) for _ in range(4)])
        a, b, c = g.served_id(), g.served_id(), g.served_id()
        assert predict_third_id(a, b) == c
    # rankd's: one shard, forced logging, so no sampling draw comes between the ids.
    d = temp_dir("rankd-served-")
    plans = plans_dir({"asked": logged("simple_viewer", "asked", sink="main")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=sink_flag(
        "main", file_sink(os.path.join(d, "served.jsonl"))) + ["--allow-forced-logging"]).wait_ready()
    ids = []
    for i in range(9):
        status, _, body = rankd.rank({"plan": "asked", "user_id": 1 + i, "log": True})
        assert status == 200 and len(body["served_id"]) == 32, body
        ids.append(body["served_id"])
    for k in range(0, 9, 3):
        assert predict_third_id(ids[k], ids[k + 1]) != ids[k + 2], ids[k:k + 3]
    assert len(set(ids)) == 9
    assert rankd.stop() == 0


def test_forced_logging_needs_the_flag():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    plans = plans_dir({"asked": logged("simple_viewer", "asked", sink="main"),
                       "always": logged("simple_viewer", "always", sample=1.0, sink="main")})
    rankd = Rankd(plans, redis=data_redis(),
                  extra_args=sink_flag("main", file_sink(path))).wait_ready()
    for i in range(5):
        status, _, body = rankd.rank({"plan": "asked", "user_id": 1 + i, "log": True})
        assert status == 200 and "served_id" not in body, body
    # The sample still records: such a record says it was not forced.
    status, _, body = rankd.rank({"plan": "always", "user_id": 1, "log": True})
    assert status == 200 and "served_id" in body, body
    status, _, body = rankd.rank({"plan": "asked", "user_id": 1})
    assert status == 200 and "served_id" not in body, body
    assert metric_value(rankd.metrics(), "rankd_served_log_forced_ignored_total") == 6
    wait_until(lambda: counted(rankd, "written", "main") == 1, what="the sampled record")
    assert [r["forced_log"] for r in records_in(path)] == [False]
    assert rankd.stop() == 0


def xlen(redis, stream):
    return redis.execute("XLEN", stream)


def test_stream_sink_survives_its_redis_going_away():
    logs = Redis()
    plans = plans_dir({"logged": logged("rerank", "logged", sample=1.0, sink="s")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=[
        "--redis", f"logs={logs.url()}",
        *sink_flag("s", "redis-stream://logs?stream=served&maxlen=100000")]).wait_ready()
    for i in range(20):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i})[0] == 200
    wait_until(lambda: counted(rankd, "written", "s") == 20, what="20 records written")
    assert xlen(logs, "served") == 20
    entry = logs.execute("XRANGE", "served", "-", "+", "COUNT", "1")[0]
    assert entry[1][0] == "record" and json.loads(entry[1][1])["plan"] == "logged"

    logs.stop()
    for i in range(30):
        status, _, body = rankd.rank({"plan": "logged", "user_id": 1 + i})
        assert status == 200, body
    wait_until(lambda: counted(rankd, "dropped_error", "s") + counted(rankd, "dropped_full", "s")
               == 30, what="30 records dropped")
    # A dead log sink does not take the replica out of its balancer.
    assert rankd.request("GET", "/readyz")[0] == 200
    logs.start()  # the same port, empty

    def resumed():
        rankd.rank({"plan": "logged", "user_id": 7})
        return xlen(logs, "served") > 0
    wait_until(resumed, timeout=20, what="records written once the sink is back")
    wait_until(lambda: counted(rankd, "written", "s") > 20, what="the written counter moving")
    code, stats, err = replay(f"redis-stream://logs?stream=served", plans,
                              ["--redis", f"logs={logs.url()}"])
    assert code == 0 and stats["rerank"]["checked"] > 0, (code, stats, err)
    assert rankd.stop() == 0


def test_stream_maxlen_trims():
    logs = Redis()
    plans = plans_dir({"logged": logged("simple_viewer", "logged", sample=1.0, sink="s")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=[
        "--redis", f"logs={logs.url()}",
        *sink_flag("s", "redis-stream://logs?stream=served&maxlen=10")]).wait_ready()
    conn = rankd.conn()
    for i in range(400):
        conn.request("POST", "/rank", json.dumps({"plan": "logged", "user_id": 1 + i % USERS}))
        assert conn.getresponse().read()
    wait_until(lambda: counted(rankd, "written", "s") == 400, what="400 records written")
    # MAXLEN ~: trimmed by whole stream nodes (100 entries by default), never below 10.
    assert 10 <= xlen(logs, "served") <= 200, xlen(logs, "served")
    assert rankd.stop() == 0


def test_replay_reads_a_stream_of_1_mib_records():
    """8 records of 1 MiB less a little under a 4 MiB reply limit: 500 to a page would be
    an 8 MiB reply, over the limit; replay's pages hold what the limit does (3)."""
    logs = Redis()
    plans = plans_dir({"logged": logged("rerank", "logged", sample=1.0, sink="s")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=[
        "--redis", f"logs={logs.url()}",
        *sink_flag("s", "redis-stream://logs?stream=served&maxlen=1000")]).wait_ready()
    assert rankd.rank({"plan": "logged", "user_id": 3})[0] == 200
    wait_until(lambda: counted(rankd, "written", "s") == 1, what="a record written")
    assert rankd.stop() == 0
    record = json.loads(logs.execute("XRANGE", "served", "-", "+")[0][1][1])
    record["pad"] = ""
    record["pad"] = "x" * ((1 << 20) - len(json.dumps(record)) - 64)
    text = json.dumps(record)
    assert (1 << 20) - 100 < len(text) < 1 << 20
    n = 8
    logs.execute_many([("XADD", "big", "*", "record", text)] * n)
    assert xlen(logs, "big") == n
    # redis_default too: replay waits (5 s) for every endpoint it knows to connect.
    ends = ["--redis", f"logs={logs.url()}", "--redis", f"redis_default={logs.url()}"]
    code, stats, err = replay("redis-stream://logs?stream=big", plans,
                              ends + ["--redis-max-reply-bytes", str(4 << 20)])
    assert code == 0, err
    code, one, err = replay("redis-stream://logs?stream=served", plans, ends)
    assert code == 0, err
    assert stats["rerank"]["checked"] == n * one["rerank"]["checked"] > 0, (stats, one)
    assert stats["rerank"]["differ"] == 0


def test_file_sink_is_0640_and_refuses_a_symlink():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    target = os.path.join(d, "not-a-log")
    with open(target, "w"):
        pass
    link = os.path.join(d, "linked.jsonl")
    os.symlink(target, link)
    plans = plans_dir({"f": logged("simple_viewer", "f", sample=1.0, sink="f"),
                       "l": logged("simple_viewer", "l", sample=1.0, sink="l")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=sink_flag("f", file_sink(path)) +
                  sink_flag("l", file_sink(link))).wait_ready()
    for plan in ("f", "l"):
        assert rankd.rank({"plan": plan, "user_id": 1})[0] == 200
    wait_until(lambda: counted(rankd, "written", "f") == 1 and counted(rankd, "dropped_error", "l") == 1,
               what="one record written, one refused")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o640 & ~umask, oct(os.stat(path).st_mode)
    assert os.path.getsize(target) == 0 and os.path.islink(link)
    assert "cannot open " + link in rankd.stderr(), rankd.stderr()[-2000:]
    assert rankd.stop() == 0


def test_rotation_keeps_k_files():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    plans = plans_dir({"logged": logged("rerank", "logged", sample=1.0, sink="f",
                                        candidates={"node": "top_k", "top": 50})})
    rankd = Rankd(plans, redis=data_redis(), shards=2,
                  extra_args=sink_flag("f", file_sink(path, max_mb=1, keep=2))).wait_ready()
    n = 0

    def lines_kept():
        return sum(len(records_in(os.path.join(d, f))) for f in os.listdir(d))
    # Until the oldest file has been deleted once more than K were made: then twice that.
    while n < 40 or lines_kept() == n:
        for i in range(20):
            assert rankd.rank({"plan": "logged", "user_id": 1 + (n + i) % USERS})[0] == 200
        n += 20
        wait_until(lambda: counted(rankd, "written", "f") == n, what="records written")
        assert n < 3000
    for i in range(n):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i % USERS})[0] == 200
    wait_until(lambda: counted(rankd, "written", "f") == 2 * n, what="records written")
    files = sorted(os.listdir(d))
    assert files == ["served.jsonl", "served.jsonl.1", "served.jsonl.2"], files
    for f in files:
        size = os.path.getsize(os.path.join(d, f))
        assert size <= (1 << 20) + (1 << 20), (f, size)  # a batch may end past the limit
        for rec in records_in(os.path.join(d, f)):
            assert rec["plan"] == "logged"
    assert rankd.stop() == 0


def test_file_that_cannot_be_written_then_can():
    d = temp_dir("rankd-served-")
    logdir = os.path.join(d, "logs")
    os.mkdir(logdir)
    path = os.path.join(logdir, "served.jsonl")
    plans = plans_dir({"logged": logged("simple_viewer", "logged", sample=1.0, sink="f")})
    rankd = Rankd(plans, redis=data_redis(),
                  extra_args=sink_flag("f", file_sink(path))).wait_ready()
    for i in range(5):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i})[0] == 200
    wait_until(lambda: counted(rankd, "written", "f") == 5, what="5 written")
    shutil.rmtree(logdir)  # the folder goes: the open file is noticed gone, none can open
    for i in range(10):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i})[0] == 200
    wait_until(lambda: counted(rankd, "dropped_error", "f") == 10, what="10 dropped")
    os.mkdir(logdir)
    for i in range(5):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i})[0] == 200
    wait_until(lambda: counted(rankd, "written", "f") == 10, what="writing again")
    assert len(records_in(path)) == 5
    assert "cannot open" in rankd.stderr()
    assert rankd.stop() == 0


def test_drain_flushes_what_is_buffered():
    logs = Redis()
    plans = plans_dir({"logged": logged("simple_viewer", "logged", sample=1.0, sink="s")})
    rankd = Rankd(plans, redis=data_redis(), extra_args=[
        "--redis", f"logs={logs.url()}", "--drain-timeout-ms", "20000",
        *sink_flag("s", "redis-stream://logs?stream=served&maxlen=1000")]).wait_ready()
    logs.suspend()  # the XADDs wait in the kernel's buffers and rankd's
    for i in range(10):
        assert rankd.rank({"plan": "logged", "user_id": 1 + i})[0] == 200
    rankd.signal(signal.SIGTERM)
    # The drain has closed the listener; what is left of it is the served log's flush.
    wait_until(lambda: not listening_ports(rankd.proc.pid), what="the drain to close the listener")
    assert rankd.proc.poll() is None, "the drain waits for the served log"
    logs.resume()
    assert rankd.wait_exit(timeout=20) == 0
    assert xlen(logs, "served") == 10


def test_bad_flags_and_plans():
    plans = plans_dir()

    def start(*flags):
        return subprocess.run([RANKD, "serve", "--port", "0", "--plans", plans, "--enable-test-ops",
                               *flags],
                              capture_output=True, text=True, timeout=30)
    for flag, words in [
            ("x=kafka://broker?topic=t", "unknown scheme"),
            ("x=redis-stream://redis_default?stream=s", "maxlen"),
            ("x=redis-stream://nowhere?stream=s&maxlen=10", "no --redis endpoint"),
            ("x=file:///tmp/x.jsonl?max_mb=1", "keep"),
            ("x=file://relative.jsonl?max_mb=1&keep=1", "absolute"),
            ("x=file:///tmp/x.jsonl?max_mb=0&keep=1", "max_mb"),
            ("x=file:///tmp/x.jsonl?max_mb=1&keep=1&color=red", "unknown parameter"),
            ("bad name=file:///tmp/x.jsonl?max_mb=1&keep=1", "sink name")]:
        out = start("--served-log", flag)
        assert out.returncode == 2 and "--served-log" in out.stderr and words in out.stderr, \
            (flag, out.returncode, out.stderr)

    def check(plan, *flags):
        d = plans_dir({plan["name"]: plan})
        return subprocess.run([RANKD, "check-plans", "--plans", d, "--enable-test-ops", *flags],
                              capture_output=True, text=True, timeout=30)
    for log, words in [({"sink": "s", "columns": ["nope"]}, "no column 'nope'"),
                       ({"sink": "s", "candidates": {"node": "zz", "top": 3}}, "unknown node 'zz'"),
                       ({"sink": "s", "candidates": {"node": "viewer", "top": 0}}, "top"),
                       ({"sink": "s", "sample": 1.5}, "log.sample"),
                       ({"sample": 1}, "log.sink"),
                       ({"sink": "s", "color": 1}, "unknown field 'color'")]:
        out = check(logged("simple_viewer", "bad", **log))
        assert out.returncode == 1 and words in out.stderr, (log, out.stderr)
    good = logged("simple_viewer", "good", sink="elsewhere", sample=0.5)
    assert check(good).returncode == 0, "sink names are checked only against given sinks"
    main = ["--served-log", "main=file:///tmp/x.jsonl?max_mb=1&keep=1"]  # plans/rerank's
    out = check(good, *main)
    assert out.returncode == 1 and "'elsewhere'" in out.stderr and "main" in out.stderr
    assert check(good, *main, "--served-log", "elsewhere=file:///tmp/y.jsonl?max_mb=1&keep=1") \
        .returncode == 0


def test_no_sink_and_too_large():
    d = temp_dir("rankd-served-")
    path = os.path.join(d, "served.jsonl")
    big = simple_plan("big", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 30000}}], "src")
    big["log"] = {"sink": "f", "sample": 1.0}
    plans = plans_dir({"nosink": logged("simple_viewer", "nosink", sink="nope", sample=1.0),
                       "big": big})
    rankd = Rankd(plans, redis=data_redis(),
                  extra_args=sink_flag("f", file_sink(path))).wait_ready()
    for _ in range(3):
        assert rankd.rank({"plan": "nosink", "user_id": 2})[0] == 200
    status, _, body = rankd.rank({"plan": "big", "user_id": 2})
    assert status == 200 and body["count"] == 30000
    wait_until(lambda: counted(rankd, "dropped_no_sink", "nope") == 3, what="dropped_no_sink")
    wait_until(lambda: counted(rankd, "dropped_too_large", "f") == 1, what="dropped_too_large")
    assert records_in(path) == []
    assert rankd.stop() == 0


def events_schema(plans, sink):
    """The demo schema, its events logged to `sink`, as the plans folder's schema.json."""
    with open(os.path.join(SOURCE_ROOT, "plans", "schema.json")) as f:
        s = json.load(f)
    s["event_log"] = {"sink": sink}
    with open(os.path.join(plans, "schema.json"), "w") as f:
        json.dump(s, f)


def train(log, labels, plans):
    """ops/train-from-log on the served log `log`, with `labels` (--events ... or
    --clicks ...), into `plans`: its summary and stderr."""
    out = subprocess.run(["/usr/bin/python3", TRAIN_FROM_LOG, "--log", log, *labels,
                          "--model-node", "model", "--name", "rerank", "--plans", plans,
                          "--include-unserved"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def model_bytes(plans):
    with open(os.path.join(plans, "rerank.model.json"), "rb") as f:
        return f.read()


def test_train_from_log_usage():
    """Exactly one of --clicks and --events; --events needs --label; a stream's endpoint
    must be given; a bad event line is named. Exit 2 each, run side by side."""
    d = temp_dir("rankd-train-usage-")
    bad = os.path.join(d, "events.jsonl")
    with open(bad, "w") as f:
        f.write('{"type": "click", "item_id": 1, "served_id": null}\n\n{"type": 3}\n')
    common = ["--log", bad, "--model-node", "model", "--name", "m", "--plans", d]
    cases = [
        ([], "one of the arguments --events --clicks is required"),
        (["--clicks", bad, "--events", bad, "--label", "click"], "not allowed with argument"),
        (["--events", bad], "--events needs --label TYPE"),
        (["--clicks", bad, "--label", "click"], "--label goes with --events"),
        (["--events", "redis-stream://nope?stream=s", "--label", "click"],
         "no --redis endpoint is named 'nope'"),
        (["--events", bad, "--label", "click"], f"{bad}:3: type must be a non-empty string"),
    ]
    procs = [subprocess.Popen(["/usr/bin/python3", TRAIN_FROM_LOG, *common, *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for args, _ in cases]
    for p, (args, words) in zip(procs, cases):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2 and words in err, (args, p.returncode, err)


def test_training_loop_closes():
    """Serve with logging, click (POST /events, with the answers' served_ids) the items a
    hidden rule likes, train a model on the served log and the event log, reload, and the
    new model serves; a replay of the new log agrees with it. The labels read from the
    event log's Redis stream, from the same records in a file, and from a clicks file of
    the same pairs train the very same model."""
    d = temp_dir("rankd-train-")
    path = os.path.join(d, "served.jsonl")
    logs = Redis()
    plans = plans_dir({"logged": logged("rerank", "logged", sample=1.0, sink="f",
                                        candidates={"node": "top_k", "top": 20})})
    events_schema(plans, "ev")
    rankd = Rankd(plans, redis=data_redis(), extra_args=[
        *sink_flag("f", file_sink(path)), "--redis", f"logs={logs.url()}",
        *sink_flag("ev", "redis-stream://logs?stream=events&maxlen=100000")]).wait_ready()
    for u in range(1, 61):
        assert rankd.rank({"plan": "logged", "user_id": u, "params": {"limit": 20}})[0] == 200
    wait_until(lambda: counted(rankd, "written", "f") == 60, what="60 records")
    rng = random.Random(7)
    clicks, clicked = [], set()
    for rec in records_in(path):
        for it in rec["items"]:
            x = it["models"]["model"]["inputs"]
            # Young items get clicked: a rule the demo model does not know.
            young = x["age_s"] is not None and x["age_s"] < 20000
            if rng.random() < (0.7 if young else 0.05):
                clicks.append({"type": "click", "user_id": rec["user_id"], "item_id": it["id"],
                               "served_id": rec["served_id"]})
                if it["served"]:
                    clicked.add((rec["served_id"], it["id"]))
    # Not labels: impressions, and clicks that name no served_id.
    events = clicks + [{"type": "impression", "user_id": 1000, "item_id": 1 + i,
                        "served_id": clicks[0]["served_id"]} for i in range(5)]
    events += [{"type": "click", "user_id": 1000, "item_id": 1 + i} for i in range(3)]
    for i in range(0, len(events), 500):
        status, _, body = rankd.request("POST", "/events", json.dumps({"events": events[i:i + 500]}))
        assert status == 200, body
    wait_until(lambda: metric_value(rankd.metrics(), "rankd_event_log_records_total", sink="ev",
                                    outcome="written") == len(events), what="the event records")
    summary, err = train(path, ["--events", "redis-stream://logs?stream=events", "--label", "click",
                          "--redis", f"logs={logs.url()}"], plans)
    assert summary["rows"] > 1000 and summary["positives"] == len(clicked) > 0, summary
    assert "5 events of other types than 'click' ignored" in err, err
    assert "3 'click' events without a served_id ignored" in err, err

    # The same labels from the event log as a file, and as a clicks file: the same model.
    as_file = os.path.join(d, "events.jsonl")
    with open(as_file, "w") as f:
        for _, fields in logs.execute("XRANGE", "events", "-", "+"):
            f.write(fields[1] + "\n")
    clicks_file = os.path.join(d, "clicks.jsonl")
    with open(clicks_file, "w") as f:
        for e in clicks:
            f.write(json.dumps({"served_id": e["served_id"], "id": str(e["item_id"])}) + "\n")
    for labels in (["--events", as_file, "--label", "click"], ["--clicks", clicks_file]):
        other = temp_dir("rankd-train-again-")
        assert train(path, labels, other)[0]["positives"] == len(clicked)
        assert model_bytes(other) == model_bytes(plans), labels
    new_sha = hashlib.sha256(model_bytes(plans)).hexdigest()
    rankd.signal(signal.SIGHUP)

    def serving_new():
        _, _, body = rankd.request("GET", "/plans/logged")
        return new_sha in body.decode()
    wait_until(serving_new, what="the retrained model to be served")
    os.rename(path, path + ".before")
    for u in range(61, 81):
        status, _, body = rankd.rank({"plan": "logged", "user_id": u, "params": {"limit": 20}})
        assert status == 200, body
    wait_until(lambda: counted(rankd, "written", "f") == 80, what="20 more records")
    recs = records_in(path)
    assert recs and all(it["models"]["model"]["sha256"] == new_sha
                        for r in recs for it in r["items"])
    code, stats, err = replay(path, plans)
    assert code == 0 and stats["rerank"]["differ"] == 0 and stats["rerank"]["checked"] > 0, err
    assert stats["rerank"]["sha256_mismatch"] == 0
    # The old log against the new model: every score is of another model.
    code, stats, err = replay(path + ".before", plans)
    assert code == 0, err
    assert stats["rerank"]["sha256_mismatch"] == stats["rerank"]["checked"] > 0
    assert rankd.stop() == 0


if __name__ == "__main__":
    run_tests([
        ("file sink: records equal the answers; replay, a changed model", test_file_records_equal_the_answers),
        ("sampling within bounds; a request may ask", test_sampling_and_asking),
        ("two served ids do not predict a third", test_served_ids_do_not_predict_each_other),
        ("forced logging needs --allow-forced-logging", test_forced_logging_needs_the_flag),
        ("stream sink: its Redis goes away and comes back", test_stream_sink_survives_its_redis_going_away),
        ("stream sink: MAXLEN ~ trims", test_stream_maxlen_trims),
        ("replay reads a stream of 1 MiB records", test_replay_reads_a_stream_of_1_mib_records),
        ("file sink: mode 0640, a symlink refused", test_file_sink_is_0640_and_refuses_a_symlink),
        ("file sink: rotation keeps K files", test_rotation_keeps_k_files),
        ("file sink: cannot write, then can", test_file_that_cannot_be_written_then_can),
        ("SIGTERM's drain flushes the served log", test_drain_flushes_what_is_buffered),
        ("bad sink flags and log blocks", test_bad_flags_and_plans),
        ("dropped_no_sink and dropped_too_large", test_no_sink_and_too_large),
        ("train-from-log: usage errors", test_train_from_log_usage),
        ("the training loop closes, from events", test_training_loop_closes),
    ])
