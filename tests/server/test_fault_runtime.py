"""Runtime faults against a real rankd process: plan reloads under traffic, a flood of
CPU work whose clients give up, SIGTERM under load, and timers of long deadlines. Each
test checks what a client and /metrics can see; the ASan build runs it too (a
use-after-free aborts the process, which the tests notice)."""
import http.client
import json
import os
import random
import re
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (Rankd, metric_value, run_tests, simple_plan, sleep_plan, temp_dir,  # noqa: E402
                     wait_until, write_plan)

# Sanitizer builds run 2-5x slower: scale the amounts of work, not the assertions.
SLOW = 3 if "asan" in os.environ.get("RANKD_BUILD_ROOT", "") else 1


def plans_folder(plans):
    d = temp_dir("rankd-fault-plans-")
    for name, plan in plans.items():
        write_plan(d, name, plan)
    return d


def busy_plan(name, ms, optional=False):
    node = {"node_id": "burn", "op": "busy_cpu", "inputs": ["src"], "params": {"duration_ms": ms}}
    if optional:
        node["optional"] = True
    return simple_plan(name, [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}}, node], "burn")


def stay_v2():
    """The surviving plan, changed: one more node (a new node series appears)."""
    p = sleep_plan("stay", 20)
    p["nodes"].append({"node_id": "t", "op": "take", "inputs": ["s"], "params": {"count": 2}})
    p["output"] = {"node": "t"}
    return p


def post_rank(conn, body, headers=None):
    conn.request("POST", "/rank", body=json.dumps(body),
                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    r = conn.getresponse()
    data = r.read()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def test_reload_storm_keeps_requests_and_metrics():
    # Two folder contents: "stay" in both (changed between them), "gone" only in A,
    # "fresh" only in B.
    a = {"stay": sleep_plan("stay", 20), "gone": sleep_plan("gone", 20)}
    b = {"stay": stay_v2(), "fresh": sleep_plan("fresh", 1)}
    d = plans_folder(a)
    s = Rankd(d, shards=2)
    stop = threading.Event()
    answered = {"stay": 0}
    bad = []
    lock = threading.Lock()

    def client(i):
        conn = s.conn(timeout=20)
        rng = random.Random(i)
        while not stop.is_set():
            plan = "stay" if i % 4 else rng.choice(["gone", "fresh"])
            try:
                # A deadline far past any scheduling delay: this test is about
                # reloads, and 64 clients on 2 busy cores can wait past 200 ms.
                status, _, data = post_rank(conn, {"plan": plan, "user_id": i, "deadline_ms": 10000})
                json.loads(data)  # a complete, well-formed answer
            except Exception as e:  # noqa: BLE001 - any failure to answer is the bug
                with lock:
                    bad.append(f"{plan}: {e!r}")
                conn.close()
                conn = s.conn(timeout=20)
                continue
            ok = status == 200 if plan == "stay" else status in (200, 404)
            with lock:
                if plan == "stay":
                    answered["stay"] += 1
                if not ok:
                    bad.append(f"{plan}: status {status} {data[:200]!r}")
        conn.close()

    samples = []

    def scraper():
        while not stop.is_set():
            samples.append(metric_value(s.metrics(), "rankd_rank_requests_total", plan="stay") or 0)
            time.sleep(0.1)  # the sampling period, not a wait

    threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
    threads.append(threading.Thread(target=scraper))
    for t in threads:
        t.start()
    flip, end = 0, time.monotonic() + 5
    try:
        while time.monotonic() < end and s.proc.poll() is None:
            contents = b if flip % 2 == 0 else a
            for name in ("stay", "gone", "fresh"):
                path = os.path.join(d, f"{name}.plan.json")
                if name in contents:
                    write_plan(d, name, contents[name])
                elif os.path.exists(path):
                    os.remove(path)
            s.signal(signal.SIGHUP)
            flip += 1
            time.sleep(0.02)  # the storm's pace (the stimulus), not a wait
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert s.proc.poll() is None, f"rankd died during the reload storm:\n{s.stderr()[-3000:]}"
    assert not bad, f"{len(bad)} requests without a good answer, e.g. {bad[:5]}"
    assert answered["stay"] > 100
    # Counters of the surviving name never went back, and counted every request.
    assert all(x <= y for x, y in zip(samples, samples[1:])), samples
    wait_until(lambda: metric_value(s.metrics(), "rankd_rank_requests_total", plan="stay")
               == answered["stay"], what="every 'stay' request counted once")
    # End on folder B: "gone" was removed, and its series go once its requests ended.
    for name in ("stay", "fresh"):
        write_plan(d, name, b[name])
    if os.path.exists(os.path.join(d, "gone.plan.json")):
        os.remove(os.path.join(d, "gone.plan.json"))
    s.signal(signal.SIGHUP)
    wait_until(lambda: 'plan="gone"' not in s.metrics() and 'node="t"' in s.metrics(),
               what="the removed plan's series gone, the changed plan's new node there")
    assert metric_value(s.metrics(), "rankd_rank_requests_total", plan="stay") == answered["stay"]
    assert s.stop() == 0


def test_cpu_flood_is_bounded_and_stops():
    d = plans_folder({"burn": busy_plan("burn", 20), "burn_opt": busy_plan("burn_opt", 20, optional=True)})
    s = Rankd(d, shards=1, extra_args=["--cpu-threads", "1", "--cpu-queue-max", "4"])
    stop = threading.Event()
    statuses, retry_after, bad = {}, [], []
    lock = threading.Lock()

    def client(i):
        conn = s.conn(timeout=20)
        rng = random.Random(i)
        while not stop.is_set():
            plan = "burn_opt" if i == 0 else "burn"
            try:
                status, headers, data = post_rank(
                    conn, {"plan": plan, "user_id": i, "deadline_ms": rng.randint(1, 5)})
                body = json.loads(data)
            except Exception as e:  # noqa: BLE001
                with lock:
                    bad.append(repr(e))
                conn.close()
                conn = s.conn(timeout=20)
                continue
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 503:
                    retry_after.append(headers.get("retry-after"))
                    if body.get("error", {}).get("code") != "unavailable":
                        bad.append(f"503 with {body}")
                elif status not in (200, 504):
                    bad.append(f"{status} {body}")
        conn.close()

    def rejected():
        with lock:
            return statuses.get(503, 0)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: rejected() >= 20, timeout=60, what="the CPU queue full (20 answers 503)")
    finally:
        stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not bad, bad[:5]
    assert statuses.get(503), f"the CPU queue never filled: {statuses}"
    assert all(r == "1" for r in retry_after), set(retry_after)

    # Once the clients stop, abandoned jobs are skipped or stop at their next check: all
    # work ends within a second (20 ms jobs queued without bound used to keep completing
    # for as long as the flood had lasted). A request counts as in flight until its
    # work, abandoned or not, has stopped.
    def late():
        return metric_value(s.metrics(), "rankd_late_completions_total") or 0
    wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 0, timeout=1.0 * SLOW,
               what="the abandoned CPU work stopped")
    s.wait_for_tick()  # every late completion so far is published
    before = late()
    s.wait_for_tick()
    assert late() == before, "CPU work is still completing after every request's work stopped"
    text = s.metrics()
    assert metric_value(text, "rankd_cpu_queue_rejects_total") > 0
    assert metric_value(text, "rankd_cpu_jobs_cancelled_total") > 0
    assert metric_value(text, "rankd_inflight_requests") == 0
    # The optional node degrades rather than failing its request.
    status, _, body = s.rank({"plan": "burn_opt", "user_id": 1})
    assert status == 200, body
    assert s.stop() == 0


def read_response(sock):
    """(bytes received, complete?) of one HTTP/1.1 response with Content-Length."""
    data = b""
    while True:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            m = re.search(rb"(?i)content-length:\s*(\d+)", data[:head_end])
            if m and len(data) >= head_end + 4 + int(m.group(1)):
                return data, True
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            chunk = b""
        if not chunk:
            return data, False
        data += chunk


def test_sigterm_under_load_answers_or_drops_cleanly():
    d = plans_folder({"nap": sleep_plan("nap", 20)})
    log_path = os.path.join(d, "access.log")
    s = Rankd(d, shards=2, extra_args=["--access-log", "--drain-timeout-ms", "5000"],
              stdout_path=log_path)
    stop = threading.Event()
    complete, dropped, partial = [], [], []
    lock = threading.Lock()

    def client(i):
        n = 0
        while not stop.is_set():
            try:
                sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            except OSError:
                return  # the listener is closed: nothing was sent
            with sock:
                while not stop.is_set():
                    rid = f"c{i}-{n}"
                    n += 1
                    body = json.dumps({"plan": "nap", "user_id": i}).encode()
                    req = (b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                           b"X-Request-Id: " + rid.encode() + b"\r\nContent-Length: " +
                           str(len(body)).encode() + b"\r\n\r\n" + body)
                    try:
                        sock.sendall(req)
                    except OSError:
                        with lock:
                            dropped.append((rid, b""))
                        break
                    data, ok = read_response(sock)
                    with lock:
                        (complete if ok else dropped if not data else partial).append((rid, data))
                    if not ok or b"connection: close" in data.lower():
                        break

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    def answered():
        with lock:
            return len(complete)

    for t in threads:
        t.start()
    wait_until(lambda: answered() > 50, timeout=30, what="50 answers before SIGTERM")
    s.signal(signal.SIGTERM)
    code = s.wait_exit(timeout=30)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert code == 0, f"exit {code}:\n{s.stderr()[-3000:]}"
    assert not partial, f"responses cut short: {[r for r, _ in partial[:5]]}"
    assert len(complete) > 50
    with open(log_path) as f:
        logged = {json.loads(line)["request_id"] for line in f if line.strip()}
    for rid, data in complete:
        assert data.startswith(b"HTTP/1.1 200"), data[:100]
        assert rid in logged, f"answered request {rid} missing from the access log"
    for rid, _ in dropped:
        assert rid not in logged, f"request {rid} was logged but its connection got no bytes"


def test_cancelled_timers_do_not_linger():
    d = plans_folder({"quick": sleep_plan("quick", 1)})
    s = Rankd(d, shards=1)
    n = 400 // SLOW

    def client(k):
        conn = s.conn()
        for _ in range(k):
            status, _, data = post_rank(conn, {"plan": "quick", "user_id": 1, "deadline_ms": 60000})
            assert status == 200, data
        conn.close()
    threads = [threading.Thread(target=client, args=(n // 8,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    s.wait_for_tick()  # the gauge is published by the tick
    timers = metric_value(s.metrics(), "rankd_loop_timers")
    # The tick's own timer and a few of Redis's; each request's 60 s race timer was
    # cancelled when the sleep won, and must not linger for 60 s.
    assert timers is not None and timers < 20, f"{timers} timers after {n} requests"
    assert s.stop() == 0


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items())
               if name.startswith("test_") and callable(fn)])
