"""Experiments end to end (docs/experiments.md): a real rankd loading experiments.json
from its plans folder, asked over HTTP. Bucketing against Python's hashlib for 2,000 ids,
stickiness across a reload and a restart, a weight raised under traffic, forced variants
with and without --allow-forced-variants, params, the time window, the served log's
fields, shadow plans that never change the primary answer and are shed or cancelled
under overload, and load errors naming the experiment and the field."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SOURCE_ROOT, Rankd, Redis, Traffic, demo_data,  # noqa: E402
                     metric_value, plans_dir, run_tests, simple_plan, temp_dir, wait_until,
                     write_plan)

USERS = 2000
_data = {}


def data_redis():
    if "redis" not in _data:
        _data["redis"] = Redis()
        demo_data(_data["redis"], USERS)
    return _data["redis"]


def bucket(salt, user_id):
    digest = hashlib.sha256(f"{salt}:{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 10000


def expected_variant(exp, user_id):
    b, first = bucket(exp["salt"], user_id), 0
    for v in exp["variants"]:
        if first <= b < first + v["weight"]:
            return v["name"]
        first += v["weight"]
    return "control"


def experiment(**over):
    e = {"name": "fw", "plan": "feed", "salt": "fw-salt",
         "variants": [{"name": "heavy", "plan": "feed", "params": {"weight": 0.9}, "weight": 2500},
                      {"name": "light", "plan": "home_light", "weight": 2000}]}
    e.update(over)
    return e


def write_experiments(d, experiments):
    tmp = os.path.join(d, ".experiments.tmp")
    with open(tmp, "w") as f:
        json.dump({"experiments": experiments}, f)
    os.replace(tmp, os.path.join(d, "experiments.json"))


def patient(name):
    with open(os.path.join(SOURCE_ROOT, "plans", f"{name}.plan.json")) as f:
        p = json.load(f)
    for node in p["nodes"]:
        node.pop("timeout_ms", None)
    p.pop("log", None)
    return p


def folder(experiments, extra=None):
    d = plans_dir({"feed": patient("feed"), "home_light": patient("home_light"),
                   "rerank": patient("rerank"), **(extra or {})})
    write_experiments(d, experiments)
    return d


def ask(conn, body, headers=None):
    conn.request("POST", "/rank", json.dumps(body), headers or {})
    r = conn.getresponse()
    return r.status, json.loads(r.read())


def variants_of(rankd, users, plan="feed"):
    conn = rankd.conn(timeout=30)
    out = {}
    for u in users:
        status, body = ask(conn, {"plan": plan, "user_id": u, "deadline_ms": 5000})
        assert status == 200, body
        out[u] = body.get("variant")
    return out


def test_buckets_match_the_formula_and_stick():
    exp = experiment()
    d = folder([exp])
    rankd = Rankd(d, redis=data_redis(), shards=2).wait_ready()
    conn = rankd.conn(timeout=30)
    seen = {}
    for u in range(1, USERS + 1):
        status, body = ask(conn, {"plan": "feed", "user_id": u, "deadline_ms": 5000})
        assert status == 200, body
        assert body["experiment"] == "fw", body
        want = expected_variant(exp, u)
        assert body["variant"] == want, (u, body["variant"], want)
        assert body["plan"] == ("home_light" if want == "light" else "feed")
        seen[u] = want
    counts = {v: sum(1 for x in seen.values() if x == v) for v in ("control", "heavy", "light")}
    assert abs(counts["heavy"] - 500) < 120 and abs(counts["light"] - 400) < 110, counts
    text = rankd.metrics()
    for v, n in counts.items():
        assert metric_value(text, "rankd_experiment_requests_total", experiment="fw", variant=v) == n
    # The variant plan's own per-plan metrics count its requests.
    assert metric_value(text, "rankd_rank_requests_total", plan="home_light") == counts["light"]
    status, _, body = rankd.request("GET", "/experiments")
    assert status == 200 and json.loads(body)["experiments"][0]["name"] == "fw"
    # Other plans are untouched.
    status, body = ask(conn, {"plan": "rerank", "user_id": 3})
    assert status == 200 and "experiment" not in body and "variant" not in body
    sample = list(range(1, 201))
    reloads = metric_value(rankd.metrics(), "rankd_plan_reloads_total", result="ok")
    rankd.signal(signal.SIGHUP)
    wait_until(lambda: metric_value(rankd.metrics(), "rankd_plan_reloads_total", result="ok")
               > reloads, what="the reload")
    assert variants_of(rankd, sample) == {u: seen[u] for u in sample}, "stable across a reload"
    assert rankd.stop() == 0
    again = Rankd(d, redis=data_redis()).wait_ready()
    assert variants_of(again, sample) == {u: seen[u] for u in sample}, "stable across a restart"
    assert again.stop() == 0


def test_raising_the_last_weight_under_traffic_moves_only_control():
    exp = experiment()
    d = folder([exp])
    rankd = Rankd(d, redis=data_redis(), extra_args=["--watch-plans-ms", "50"]).wait_ready()
    users = list(range(1, 401))
    before = variants_of(rankd, users)
    bad = []
    conn = rankd.conn(timeout=30)
    user = [0]

    def one():
        user[0] = user[0] % 400 + 1
        status, body = ask(conn, {"plan": "feed", "user_id": user[0], "deadline_ms": 5000})
        if status != 200 or body.get("variant") not in ("control", "heavy", "light"):
            bad.append((status, body))
    with Traffic(one, "/rank traffic") as traffic:
        for weight in (2600, 3000, 3500):  # edited under traffic, each reload seen
            raised = experiment(variants=[exp["variants"][0], dict(exp["variants"][1], weight=weight)])
            write_experiments(d, [raised])
            wait_until(lambda: json.loads(rankd.request("GET", "/experiments")[2])
                       ["experiments"][0]["variants"][1]["weight"] == weight, what="the reload")
            traffic.wait_steps(1)  # requests answered under this weight
    assert not bad, bad[:3]
    after = variants_of(rankd, users)
    moved = [u for u in users if before[u] != after[u]]
    assert moved, "some users move"
    for u in moved:
        assert before[u] == "control" and after[u] == "light", (u, before[u], after[u])
        assert after[u] == expected_variant(raised, u)
    assert rankd.stop() == 0


def test_forced_variants():
    exp = experiment()
    d = folder([exp])
    allowed = Rankd(d, redis=data_redis(), extra_args=["--allow-forced-variants"]).wait_ready()
    refused = Rankd(d, redis=data_redis()).wait_ready()
    user = next(u for u in range(1, 500) if expected_variant(exp, u) == "control")
    conn = allowed.conn()
    for v in ("heavy", "light", "control"):
        status, body = ask(conn, {"plan": "feed", "user_id": user}, {"X-Rankd-Variant": f"fw={v}"})
        assert status == 200 and body["variant"] == v, body
    for header, words in [("fw=nope", "no variant 'nope'"), ("zz=heavy", "no experiment 'zz'"),
                          ("garbage", "EXPERIMENT=VARIANT")]:
        status, body = ask(conn, {"plan": "feed", "user_id": user}, {"X-Rankd-Variant": header})
        assert status == 400 and words in body["error"]["message"], (header, body)
    status, body = ask(refused.conn(), {"plan": "feed", "user_id": user},
                       {"X-Rankd-Variant": "fw=heavy"})
    assert status == 200 and body["variant"] == "control", "ignored without the flag"
    status, body = ask(refused.conn(), {"plan": "feed", "user_id": user},
                       {"X-Rankd-Variant": "fw=nope"})
    assert status == 200
    refused.wait_for_tick()
    assert metric_value(refused.metrics(), "rankd_experiment_forced_ignored_total") == 2
    assert allowed.stop() == 0 and refused.stop() == 0


def test_params_window_and_served_log():
    logdir = temp_dir("rankd-exp-log-")
    path = os.path.join(logdir, "served.jsonl")
    feed = patient("feed")
    feed["log"] = {"sample": 1.0, "sink": "f"}
    light = patient("home_light")
    light["log"] = {"sample": 1.0, "sink": "f"}
    past = experiment(name="old", plan="rerank", end_ms=int(time.time() * 1000) - 1000,
                      variants=[{"name": "x", "plan": "rerank", "weight": 10000}])
    d = plans_dir({"feed": feed, "home_light": light, "rerank": patient("rerank")})
    write_experiments(d, [experiment(), past])
    rankd = Rankd(d, redis=data_redis(), extra_args=[
        "--allow-forced-variants", "--served-log", f"f=file://{path}?max_mb=16&keep=1"]).wait_ready()
    conn = rankd.conn()
    # The request's params are checked against the requested plan, whatever runs them.
    status, body = ask(conn, {"plan": "feed", "user_id": 5, "params": {"nope": 1}})
    assert status == 422 and "nope" in body["error"]["message"], body
    status, body = ask(conn, {"plan": "feed", "user_id": 5, "params": {"limit": 900}})
    assert status == 422, body
    # home_light does not declare country: dropped for it; the variant's params apply.
    status, body = ask(conn, {"plan": "feed", "user_id": 5, "params": {"country": "DE", "limit": 7}},
                       {"X-Rankd-Variant": "fw=light"})
    assert status == 200 and body["plan"] == "home_light" and body["count"] <= 7, body
    # Outside its window an experiment does not apply.
    status, body = ask(conn, {"plan": "rerank", "user_id": 5})
    assert status == 200 and "experiment" not in body
    status, heavy = ask(conn, {"plan": "feed", "user_id": 6}, {"X-Rankd-Variant": "fw=heavy"})
    status, control = ask(conn, {"plan": "feed", "user_id": 6}, {"X-Rankd-Variant": "fw=control"})
    assert heavy["variant"] == "heavy" and control["variant"] == "control"
    wait_until(lambda: len(open(path).read().splitlines()) == 3 if os.path.exists(path) else False,
               what="3 records")
    recs = {r["served_id"]: r for r in map(json.loads, open(path).read().splitlines())}
    h = recs[heavy["served_id"]]
    assert (h["experiment"], h["variant"], h["forced"], h["plan"]) == ("fw", "heavy", True, "feed")
    assert h["params"]["weight"] == 0.9, "the variant's override"
    c = recs[control["served_id"]]
    assert (c["experiment"], c["variant"], c["forced"]) == ("fw", "control", True)
    assert rankd.stop() == 0


def strip(body):
    body = dict(body)
    body.pop("took_us", None)
    return body


def test_shadows_never_change_the_answer():
    logdir = temp_dir("rankd-exp-log-")
    path = os.path.join(logdir, "served.jsonl")
    rerank = patient("rerank")
    rerank["log"] = {"sample": 1.0, "sink": "f"}
    with_shadow = plans_dir({"feed": patient("feed"), "home_light": patient("home_light"),
                             "rerank": rerank})
    write_experiments(with_shadow, [experiment(
        shadow=[{"plan": "rerank", "percent": 100, "compare_top": 10}])])
    plain = folder([experiment()])
    a = Rankd(with_shadow, redis=data_redis(), extra_args=[
        "--served-log", f"f=file://{path}?max_mb=16&keep=1"]).wait_ready()
    b = Rankd(plain, redis=data_redis()).wait_ready()
    ca, cb = a.conn(timeout=30), b.conn(timeout=30)
    for u in range(1, 41):
        req = {"plan": "feed", "user_id": u, "deadline_ms": 5000}
        sa, ba = ask(ca, req)
        sb, bb = ask(cb, req)
        assert sa == sb == 200 and strip(ba) == strip(bb), (u, ba, bb)

    def ran():
        return metric_value(a.metrics(), "rankd_shadow_runs_total", experiment="fw", plan="rerank",
                            outcome="ok") == 40
    wait_until(ran, what="40 shadow runs")
    text = a.metrics()
    assert metric_value(text, "rankd_shadow_overlap_at_k_count", experiment="fw", plan="rerank") > 0
    assert metric_value(text, "rankd_shadow_duration_seconds_count", experiment="fw", plan="rerank") == 40
    assert metric_value(text, "rankd_rank_requests_total", plan="rerank") in (None, 0), \
        "shadows are not requests"
    wait_until(lambda: os.path.exists(path) and len(open(path).read().splitlines()) == 40,
               what="40 shadow records")
    for line in open(path).read().splitlines():
        r = json.loads(line)
        assert r["shadow"] is True and r["plan"] == "rerank" and r["experiment"] == "fw"
        assert r["items"] and all(not it["served"] for it in r["items"])
    assert a.stop() == 0 and b.stop() == 0


def test_shadows_shed_and_cancelled_under_overload():
    slow = simple_plan("slow", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 5}},
        {"node_id": "cpu", "op": "busy_cpu", "inputs": ["src"], "params": {"duration_ms": 3000}}],
        "cpu")
    sleepy = simple_plan("sleepy", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 5}},
        {"node_id": "z", "op": "sleep", "inputs": ["src"], "params": {"duration_ms": 300}}], "z")
    d = plans_dir({"slow": slow, "sleepy": sleepy})
    write_experiments(d, [{"name": "e", "plan": "sleepy", "salt": "s", "variants": [],
                           "shadow": [{"plan": "slow", "percent": 100}]}])
    rankd = Rankd(d, extra_args=["--max-inflight", "4", "--cpu-threads", "2",
                                 "--deadline-ms", "10000"])  # no Redis: never "ready"
    # One request alone: its shadow starts (busy for 3 s on a CPU worker).
    status, _, body = rankd.rank({"plan": "sleepy", "user_id": 1})
    assert status == 200 and body["variant"] == "control", body
    # Then 4 at once: past half of --max-inflight the running shadow is cancelled, and
    # the new requests' shadows are shed.
    results = []

    def one():
        results.append(rankd.rank({"plan": "sleepy", "user_id": 2})[0])
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 4, results

    def counted(outcome):
        return metric_value(rankd.metrics(), "rankd_shadow_runs_total", experiment="e",
                            plan="slow", outcome=outcome) or 0
    wait_until(lambda: counted("cancelled") == 1, what="the running shadow cancelled")
    wait_until(lambda: counted("shed") >= 1, what="shadows shed")
    # Shadows of the last ones to answer may have started (the shard was no longer busy).
    wait_until(lambda: counted("ok") + counted("cancelled") + counted("shed") == 5, timeout=20,
               what="every shadow accounted for")
    assert rankd.stop() == 0


def test_load_errors_name_the_experiment_and_field():
    base = experiment()
    cases = [
        ([experiment(variants=[dict(base["variants"][0], weight=6000),
                               dict(base["variants"][1], weight=5000)])], "over the 10000"),
        ([base, dict(base, plan="rerank")], "duplicate experiment name"),
        ([base, dict(base, name="other")], "one experiment per plan"),
        ([experiment(variants=[dict(base["variants"][0], plan="nope")])], "variants[0].plan: unknown plan 'nope'"),
        ([experiment(shadow=[{"plan": "nope", "percent": 5}])], "shadow[0].plan: unknown plan 'nope'"),
        ([experiment(variants=[dict(base["variants"][0], params={"weight": "x"})])], "params.weight"),
        ([experiment(variants=[dict(base["variants"][0], params={"limit": 9999})])], "params.limit"),
        ([experiment(variants=[dict(base["variants"][0], name="control")])], "'control' is reserved"),
        ([experiment(variants=[base["variants"][0], base["variants"][0]])], "duplicate variant"),
        ([experiment(shadow=[{"plan": "rerank", "percent": 101}])], "shadow[0].percent"),
        ([experiment(start_ms=10, end_ms=5)], "end_ms"),
    ]
    for experiments, words in cases:
        d = folder(experiments)
        out = subprocess.run([RANKD, "check-plans", "--plans", d, "--enable-test-ops"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 1, (words, out.stdout)
        assert "experiments.json" in out.stderr and words in out.stderr, (words, out.stderr)
        if words != "duplicate experiment name":
            assert "'fw'" in out.stderr or "'other'" in out.stderr, out.stderr
    # A bad edit is rejected whole at a reload: the previous experiments keep serving.
    d = folder([base])
    rankd = Rankd(d, redis=data_redis()).wait_ready()
    write_experiments(d, [experiment(variants=[dict(base["variants"][0], plan="nope")])])
    rankd.signal(signal.SIGHUP)
    wait_until(lambda: metric_value(rankd.metrics(), "rankd_plan_reloads_total", result="error") == 1,
               what="the reload rejected")
    assert rankd.rank({"plan": "feed", "user_id": 1})[2]["experiment"] == "fw"
    assert rankd.stop() == 0


if __name__ == "__main__":
    run_tests([
        ("buckets match the formula and stick across reload and restart",
         test_buckets_match_the_formula_and_stick),
        ("raising the last weight under traffic moves users only out of control",
         test_raising_the_last_weight_under_traffic_moves_only_control),
        ("forced variants, allowed and refused", test_forced_variants),
        ("params, the time window and the served log", test_params_window_and_served_log),
        ("shadows never change the answer; measured and logged", test_shadows_never_change_the_answer),
        ("shadows shed and cancelled under overload", test_shadows_shed_and_cancelled_under_overload),
        ("load errors name the experiment and the field", test_load_errors_name_the_experiment_and_field),
    ])
