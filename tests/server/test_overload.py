"""Overload control against a real rankd (docs/operations.md, "Overload"): the adaptive
admission limit under a CPU flood, refusals that are immediate and counted, deadline
refusals, priorities, the quality factor, and Redis slowed down under steady load.
Each test asserts what clients and /metrics see, never how fast anything was."""
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, Redis, demo_data, metric_value, plans_dir,  # noqa: E402
                     proc_status_kib, run_tests, simple_plan, sleep_plan, temp_dir, wait_until,
                     write_plan)


def folder(plans):
    d = temp_dir("rankd-overload-plans-")
    for name, plan in plans.items():
        write_plan(d, name, plan)
    return d


def busy_plan(name, ms):
    return simple_plan(name, [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}},
        {"node_id": "burn", "op": "busy_cpu", "inputs": ["src"], "params": {"duration_ms": ms}}],
        "burn")


def quality_plan(name, sleep_ms, target_ms, count=100, count_param=False):
    """fixed_source(count) -> sleep: the quality block scales the source's count."""
    p = simple_plan(name, [
        {"node_id": "src", "op": "fixed_source", "inputs": [],
         "params": {"count": {"param": "n"} if count_param else count}},
        {"node_id": "s", "op": "sleep", "inputs": ["src"], "params": {"duration_ms": sleep_ms}}],
        "s", params={"n": {"type": "i64", "default": count, "min": 1, "max": 1000}}
        if count_param else None)
    p["quality"] = {"target_p95_ms": target_ms, "min": 0.3,
                    "scale": [{"node": "src", "param": "count"}]}
    return p


class Client(threading.Thread):
    """Sends /rank requests on one keep-alive connection until `stop` is set, recording
    (monotonic send time, status, seconds) per answer; a failed exchange is recorded with
    status 0 and reconnects. Exceptions other than socket ones fail the test via `error`."""

    def __init__(self, port, body, stop, gap=0.0):
        super().__init__(daemon=True)
        self.port, self.body, self.stop, self.gap = port, json.dumps(body), stop, gap
        self.answers = []
        self.error = None

    def run(self):
        try:
            conn = None
            while not self.stop.is_set():
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                t0 = time.monotonic()
                try:
                    conn.request("POST", "/rank", body=self.body,
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    self.answers.append((t0, r.status, time.monotonic() - t0))
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except (OSError, http.client.HTTPException):
                    self.answers.append((t0, 0, time.monotonic() - t0))
                    conn.close()
                    conn = None
                if self.gap:
                    time.sleep(self.gap)
            if conn:
                conn.close()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e


def run_clients(port, body, n, seconds, gap=0.0):
    stop = threading.Event()
    clients = [Client(port, body, stop, gap) for _ in range(n)]
    for c in clients:
        c.start()
    time.sleep(seconds)
    stop.set()
    for c in clients:
        c.join(timeout=15)
        assert not c.is_alive(), "a client thread did not stop"
        assert c.error is None, f"client thread failed: {c.error!r}"
    return [a for c in clients for a in c.answers]


def test_cpu_flood_adapts_the_limit_and_refuses_fast():
    # One CPU worker and 5 ms of CPU per request: 48 clients queue 240 ms of work, 40% of
    # their 600 ms deadline. The adaptive limit must come down from its start (128) below
    # the 48 clients, refuse the excess at once with 503 + Retry-After, and keep serving.
    # (The server's --deadline-ms, which sets when the CPU queue turns LIFO, stays long.)
    r = Rankd(folder({"busy": busy_plan("busy", 5)}), shards=1,
              extra_args=["--cpu-threads", "1", "--deadline-ms", "10000"])
    answers = run_clients(r.port, {"plan": "busy", "user_id": 1, "deadline_ms": 600}, 48, 4.0)
    ok = sum(1 for a in answers if a[1] == 200)
    refused = sum(1 for a in answers if a[1] == 503)
    late = sum(1 for a in answers if a[1] == 504)
    others = [a[1] for a in answers if a[1] not in (200, 503, 504)]
    assert ok > 50, f"only {ok} answers 200 of {len(answers)}"
    assert refused > 0, f"no refusal among {len(answers)} answers"
    assert not others, f"unexpected statuses {sorted(set(others))}"
    # Admitted work is served in time: a 504 is the rare job the CPU queue's adaptive
    # LIFO left behind a backlog until its deadline.
    assert late <= 0.05 * (ok + late), f"{late} answers 504 for {ok} 200"
    status, headers, body = r.rank({"plan": "busy", "user_id": 1})
    assert status == 200, body
    text = r.metrics()
    limit = metric_value(text, "rankd_admission_limit", shard=0)
    assert limit is not None and 4 <= limit < 48, f"limit {limit} did not adapt below 48"
    counted = metric_value(text, "rankd_admission_refusals_total", reason="limit")
    assert counted >= refused, f"{refused} refusals seen, {counted} counted"
    n = metric_value(text, "rankd_admission_refusal_seconds_count", shard=0)
    assert n >= refused, f"refusal times: {n} observed for {refused} refusals"
    r.stop()


def test_closed_loop_within_deadlines_is_not_refused():
    # 24 clients that each send again as soon as they are answered (wrk's way) keep a
    # queue of ~120 ms of CPU work: far over the no-load latency, far under their 10 s
    # deadline. Nothing is refused: the queue costs none of them anything.
    r = Rankd(folder({"busy": busy_plan("busy", 5)}), shards=1,
              extra_args=["--cpu-threads", "1", "--deadline-ms", "10000"])
    answers = run_clients(r.port, {"plan": "busy", "user_id": 1}, 24, 3.0)
    statuses = [a[1] for a in answers]
    assert len(statuses) > 100, f"only {len(statuses)} answers: the load did not run"
    assert statuses.count(200) == len(statuses), \
        f"not all 200: {sorted((s, statuses.count(s)) for s in set(statuses))}"
    text = r.metrics()
    assert metric_value(text, "rankd_admission_refusals_total", reason="limit") in (None, 0)
    assert metric_value(text, "rankd_admission_limit", shard=0) >= 24
    r.stop()


def test_refusal_says_why_and_retry_after():
    # --admission fixed --max-inflight 1: a request while another runs is refused.
    r = Rankd(folder({"slow": sleep_plan("slow", 400)}),
              extra_args=["--admission", "fixed", "--max-inflight", "1", "--deadline-ms", "5000"])
    got = {}

    def slow():
        got["slow"] = r.rank({"plan": "slow", "user_id": 1})

    t = threading.Thread(target=slow)
    t.start()
    wait_until(lambda: metric_value(r.metrics(), "rankd_inflight_requests") == 1,
               what="the slow request to run")
    status, headers, body = r.rank({"plan": "slow", "user_id": 2})
    t.join()
    assert got["slow"][0] == 200
    assert status == 503 and headers.get("retry-after") == "1", (status, headers)
    assert body["error"]["code"] == "unavailable"
    assert "admission limit" in body["error"]["message"], body
    assert metric_value(r.metrics(), "rankd_admission_limit") == 1
    r.stop()


def test_deadline_refusal():
    # 60 answers of a 30 ms plan: its median time to a 2xx is about 30 ms. A request
    # that leaves it 10 ms cannot finish and is refused before it runs; one with time
    # enough runs.
    r = Rankd(folder({"slow": sleep_plan("slow", 30)}))
    for _ in range(60):
        assert r.rank({"plan": "slow", "user_id": 1})[0] == 200
    status, headers, body = r.rank({"plan": "slow", "user_id": 1, "deadline_ms": 10})
    assert status == 503 and headers.get("retry-after") == "1", (status, body)
    assert "deadline" in body["error"]["message"], body
    assert r.rank({"plan": "slow", "user_id": 1, "deadline_ms": 1000})[0] == 200
    text = r.metrics()
    assert metric_value(text, "rankd_admission_refusals_total", reason="deadline") == 1
    assert metric_value(text, "rankd_deadline_exceeded_total", plan="slow") in (None, 0)
    r.stop()


def test_priority():
    plans = folder({"slow": sleep_plan("slow", 600)})
    # Without --allow-priority the field is checked, ignored and counted.
    r = Rankd(plans, extra_args=["--deadline-ms", "5000"])
    assert r.rank({"plan": "slow", "user_id": 1, "priority": "urgent"})[0] == 400
    status, _, body = r.rank({"plan": "slow", "user_id": 1, "priority": 3})
    assert status == 400 and "priority" in body["error"]["message"], body
    assert r.rank({"plan": "slow", "user_id": 1, "priority": "sheddable"})[0] == 200
    assert metric_value(r.metrics(), "rankd_priority_ignored_total") == 1
    r.stop()
    # Limit 4 (fixed): sheddable up to 2 running, default up to 4, critical up to 4 (1.5x
    # capped at --max-inflight).
    r = Rankd(plans, extra_args=["--admission", "fixed", "--max-inflight", "4",
                                 "--allow-priority", "--deadline-ms", "5000"])
    results = []
    running = [threading.Thread(target=lambda: results.append(
        r.rank({"plan": "slow", "user_id": 1})[0])) for _ in range(2)]
    for t in running:
        t.start()
    wait_until(lambda: metric_value(r.metrics(), "rankd_inflight_requests") == 2,
               what="two requests to run")
    status, _, body = r.rank({"plan": "slow", "user_id": 1, "priority": "sheddable"})
    assert status == 503 and "sheddable" in body["error"]["message"], body
    assert r.rank({"plan": "slow", "user_id": 1, "priority": "critical"})[0] == 200
    for t in running:
        t.join()
    assert results == [200, 200]
    text = r.metrics()
    assert metric_value(text, "rankd_admission_refusals_total", reason="limit",
                        priority="sheddable") == 1
    assert metric_value(text, "rankd_admission_refusals_total", priority="critical") == 0
    r.stop()


def test_quality_bends_and_recovers():
    # A 20 ms plan with a 5 ms p95 target: q falls to its min (0.3) and the source's
    # count with it (100 -> 30); a count the request gives is never scaled.
    plans = folder({"q": quality_plan("q", 20, 5), "slow": sleep_plan("slow", 1),
                    "qp": quality_plan("qp", 20, 5, count_param=True)})
    r = Rankd(plans)
    status, _, body = r.rank({"plan": "q", "user_id": 1})
    assert status == 200 and body["quality"] == 1 and body["count"] == 100, body

    def last_of(n, body):
        # q moves once per tick with 10 new answers: each poll sends a few.
        for _ in range(n - 1):
            r.rank(body)
        return r.rank(body)

    def bent():
        s, _, b = last_of(3, {"plan": "q", "user_id": 1})
        return s == 200 and b["quality"] == 0.3
    wait_until(bent, timeout=20, what="quality to fall to its min")
    status, _, body = r.rank({"plan": "q", "user_id": 1})
    assert body["count"] == 30, body
    assert metric_value(r.metrics(), "rankd_plan_quality", plan="q") == 0.3

    def bent_p():
        s, _, b = last_of(3, {"plan": "qp", "user_id": 1})
        return s == 200 and b["quality"] == 0.3
    wait_until(bent_p, timeout=20, what="quality of qp to fall")
    assert r.rank({"plan": "qp", "user_id": 1})[2]["count"] == 30  # the default: scaled
    given = r.rank({"plan": "qp", "user_id": 1, "params": {"n": 100}})[2]
    assert given["count"] == 100 and given["quality"] == 0.3, given
    # A plan without the block answers without "quality".
    assert "quality" not in r.rank({"plan": "slow", "user_id": 1})[2]
    # Reloaded with a target it meets, the plan keeps its q (same name) and climbs back.
    reloads = metric_value(r.metrics(), "rankd_plan_reloads_total", result="ok")
    write_plan(plans, "q", quality_plan("q", 1, 1000))
    r.signal(signal.SIGHUP)
    wait_until(lambda: metric_value(r.metrics(), "rankd_plan_reloads_total", result="ok")
               > reloads, what="the reload")

    def recovered():
        s, _, b = last_of(20, {"plan": "q", "user_id": 1})
        return s == 200 and b["quality"] == 1 and b["count"] == 100
    wait_until(recovered, timeout=30, what="quality to climb back to 1")
    r.stop()


def test_quality_block_load_errors():
    base = quality_plan("bad", 1, 5)
    cases = [
        ({"target_p95_ms": 0, "scale": base["quality"]["scale"]}, "quality.target_p95_ms"),
        ({"target_p95_ms": 5, "min": 2, "scale": base["quality"]["scale"]}, "quality.min"),
        ({"target_p95_ms": 5, "scale": []}, "quality.scale"),
        ({"target_p95_ms": 5, "scale": [{"node": "nope", "param": "count"}]},
         "unknown node 'nope'"),
        ({"target_p95_ms": 5, "scale": [{"node": "src", "param": "size"}]},
         "has no param 'size'"),
        ({"target_p95_ms": 5, "scale": [{"node": "s", "param": "duration_ms"}] * 2},
         "listed twice"),
        ({"target_p95_ms": 5, "scale": base["quality"]["scale"], "speed": 1},
         "unknown field 'speed'"),
    ]
    for block, want in cases:
        p = dict(base, quality=block)
        d = folder({"bad": p})
        out = subprocess.run([RANKD, "check-plans", "--plans", d, "--enable-test-ops"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode != 0, f"{block} loaded"
        assert want in out.stderr and "bad.plan.json" in out.stderr, (want, out.stderr)


def test_redis_slowdown_sheds_and_recovers():
    # Steady load on the demo feed; Redis paused for 2 s (CLIENT PAUSE) twice. rankd
    # sheds quickly (refusals or 504s, never a hang), keeps its memory bounded and is back
    # to at least 0.9 of its earlier goodput within 5 s of Redis answering again.
    redis = Redis()
    demo_data(redis, 200)
    r = Rankd(plans_dir(), redis=redis, shards=2)
    r.wait_ready()
    body = {"plan": "home_light", "user_id": 7, "deadline_ms": 250}
    stop = threading.Event()
    clients = [Client(r.port, body, stop, gap=0.01) for _ in range(12)]
    for c in clients:
        c.start()
    time.sleep(3)
    rss_before = proc_status_kib(r.proc.pid, "VmRSS")
    pauses = []
    for _ in range(2):
        t_pause = time.monotonic()
        redis.execute("CLIENT", "PAUSE", "2000", "ALL")
        time.sleep(2.0)
        pauses.append((t_pause, t_pause + 2.0))
        rss_during = proc_status_kib(r.proc.pid, "VmRSS")
        assert rss_during - rss_before < 64 * 1024, (rss_before, rss_during)
        time.sleep(6)
    stop.set()
    for c in clients:
        c.join(timeout=15)
        assert not c.is_alive() and c.error is None, c.error
    answers = sorted(a for c in clients for a in c.answers)
    statuses = {a[1] for a in answers}
    assert statuses <= {200, 503, 504}, statuses

    def goodput(t0, t1):
        return sum(1 for a in answers if t0 <= a[0] < t1 and a[1] == 200) / (t1 - t0)
    before = goodput(answers[0][0] + 1.0, pauses[0][0])
    assert before > 50, f"goodput before the pause {before:.0f}/s: the load did not run"
    for start, end in pauses:
        during = [a for a in answers if start + 0.3 <= a[0] < end - 0.3]
        assert during and all(a[2] < 2.0 for a in during), "a request hung during the pause"
        assert any(a[1] != 200 for a in during), "nothing was shed while Redis was paused"
        # Back within 5 s: some 0.5 s window after the pause has 0.9 of the goodput, and
        # every later window keeps it until the next phase.
        windows = [(end + k * 0.5, end + k * 0.5 + 0.5) for k in range(10)]
        back = [w for w in windows if goodput(*w) >= 0.9 * before]
        assert back, (f"goodput {before:.0f}/s before; after the pause: "
                      f"{[round(goodput(*w)) for w in windows]}")
    text = r.metrics()
    assert metric_value(text, "rankd_admission_refusals_total") is not None
    r.stop()
    redis.stop()


def test_expired_redis_batches_are_never_written():
    # One Redis connection, paused: the first request's 5,000 HMGETs fill the
    # connection's pipeline (4,096 commands), so the next requests' batches wait for it and
    # their deadline passes before they are written. They answer 504 and are counted as
    # unsent; once Redis answers again, rankd serves.
    redis = Redis()
    plan = simple_plan("wide", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 5000}},
        {"node_id": "h", "op": "features", "inputs": ["src"],
         "params": {"endpoint": "redis_default", "fields": ["likes"]}}], "h")
    r = Rankd(folder({"wide": plan}), redis=redis,
              extra_args=["--redis-conns", "1", "--admission", "fixed"])
    r.wait_ready()
    assert r.rank({"plan": "wide", "user_id": 1})[0] == 200
    redis.execute("CLIENT", "PAUSE", "1500", "ALL")
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        r.rank({"plan": "wide", "user_id": 1, "deadline_ms": 300})[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [504] * 4, results
    wait_until(lambda: r.rank({"plan": "wide", "user_id": 1})[0] == 200, timeout=20,
               what="rankd to serve once Redis answers")
    unsent = metric_value(r.metrics(), "rankd_redis_batches_unsent_total",
                          endpoint="redis_default")
    assert unsent >= 2, unsent
    r.stop()
    redis.stop()


if __name__ == "__main__":
    run_tests([
        ("cpu_flood_adapts_the_limit_and_refuses_fast", test_cpu_flood_adapts_the_limit_and_refuses_fast),
        ("closed_loop_within_deadlines_is_not_refused", test_closed_loop_within_deadlines_is_not_refused),
        ("refusal_says_why_and_retry_after", test_refusal_says_why_and_retry_after),
        ("deadline_refusal", test_deadline_refusal),
        ("priority", test_priority),
        ("quality_bends_and_recovers", test_quality_bends_and_recovers),
        ("quality_block_load_errors", test_quality_block_load_errors),
        ("redis_slowdown_sheds_and_recovers", test_redis_slowdown_sheds_and_recovers),
        ("expired_redis_batches_are_never_written", test_expired_redis_batches_are_never_written),
    ])
