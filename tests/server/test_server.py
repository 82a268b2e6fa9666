"""rankd serve end to end: a real rankd process (and redis-server) on loopback,
spoken to with http.client and raw sockets. Covers docs/api.md's routes, every error code,
connection behaviour, overload, drain, reload and shards."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, Redis, SharedServer, check_exit, free_port, listening_ports, metric_value, plans_dir,  # noqa: E402
                     run_tests, simple_plan, sleep_plan, temp_path, wait_until, write_plan)

TEST_PLANS = {
    "slow": sleep_plan("slow", 300),
    "slow_optional": sleep_plan("slow_optional", 300, optional=True, timeout_ms=20),
    "bounded": simple_plan("bounded", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 50}},
        {"node_id": "t", "op": "take", "inputs": ["src"], "params": {"count": {"param": "n"}}}],
        "t", params={"n": {"type": "i64", "default": 5, "min": 1, "max": 20}}),
    "failing": simple_plan("failing", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}},
        {"node_id": "boom", "op": "sleep", "inputs": ["src"],
         "params": {"duration_ms": 1, "fail_after_sleep": True}}], "boom"),
    "viewer_only": simple_plan("viewer_only", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "redis_default"}}], "v"),
    # ids 1..60, score = id; author 0 for ids 1..50, else id - 50: one author with most rows.
    "diverse": simple_plan("diverse", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 60}},
        {"node_id": "a", "op": "vm", "inputs": ["src"], "params": {"out_key": "author", "expr": "author"}},
        {"node_id": "o", "op": "sort", "inputs": ["a"], "params": {"key": "score"}},
        {"node_id": "div", "op": "diversify", "inputs": ["o"],
         "params": {"key": "author", "score": "score", "out_key": "div", "decay": {"param": "decay"}}},
        {"node_id": "cap", "op": "cap", "inputs": ["div"],
         "params": {"key": "author", "max": 2, "window": {"param": "window"}, "defer": True}},
        {"node_id": "t", "op": "take", "inputs": ["cap"], "params": {"count": 40}}], "t",
        params={"decay": {"type": "f64", "default": 0.5}, "window": {"type": "i64", "default": 5}},
        expr_table={"author": {"op": "max", "args": [
            {"op": "-", "args": [{"key": "id"}, {"const": 50}]}, {"const": 0}]}},
        columns=["id", "author", "div"]),
}


server = SharedServer(TEST_PLANS)


def raw(port, data, timeout=5.0, read_until_close=True):
    """Sends bytes on a fresh connection and returns what comes back until the server
    closes (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if not read_until_close and out.count(b"\r\n\r\n") and b"Content-Length" in out:
                break
        return out
    finally:
        s.close()


def assert_error(status, body, want_status, want_code):
    assert status == want_status, (status, body)
    assert body["error"]["code"] == want_code, body
    assert body["error"]["message"], body


def still_serves():
    status, _, body = server().rank({"plan": "fixed_rank", "user_id": 1})
    assert status == 200, (status, body)


# --- POST /rank -----------------------------------------------------------------

def test_rank_fixed_plan():
    status, headers, body = server().rank({"plan": "fixed_rank", "user_id": 7})
    assert status == 200, body
    assert body["plan"] == "fixed_rank" and body["user_id"] == 7
    assert body["count"] == 20 and len(body["items"]) == 20
    assert body["items"][0] == {"id": 100, "score": 300}, body["items"][0]
    scores = [it["score"] for it in body["items"]]
    assert scores == sorted(scores, reverse=True)
    assert body["degraded"] == [] and "nodes" not in body
    assert headers["content-type"].startswith("application/json")
    assert re.fullmatch(r"total;dur=\d+\.\d{3}", headers["server-timing"]), headers["server-timing"]
    assert headers.get("x-request-id")


def test_rank_explain_nodes():
    status, _, body = server().rank({"plan": "fixed_rank", "user_id": 1, "explain": True})
    assert status == 200
    ids = [n["node_id"] for n in body["nodes"]]
    assert set(ids) == {"fixed_source", "vm", "sort", "take"}
    for n in body["nodes"]:
        assert n["status"] == "ok" and n["took_us"] >= 0 and n["start_us"] >= 0


def test_rank_diversify_and_cap():
    """The "diverse" plan through a real server against the rules written out here: the k-th
    row of an author keeps 0.25 + 0.75 * decay^k of its score, rows sorted by that; then at
    most 2 rows of an author in any `window` rows, the others deferred to the end."""
    def want(decay, window):
        rows = [(i, max(i - 50, 0), float(i)) for i in range(60, 0, -1)]  # sorted by score
        discount, power = [], 1.0  # decay^k as a running product, as docs/plan.md says
        for _ in rows:
            discount.append(0.25 + 0.75 * power)
            power *= decay
        seen = {}
        div = []
        for id_, author, score in rows:
            k = seen.get(author, 0)
            seen[author] = k + 1
            div.append((id_, author, score * discount[k]))
        div.sort(key=lambda r: -r[2])  # stable
        kept, deferred = [], []
        for r in div:
            recent = kept[len(kept) - (window - 1):] if window > 1 else []
            (kept if sum(x[1] == r[1] for x in recent) < 2 else deferred).append(r)
        return [{"id": i, "author": a, "div": d} for i, a, d in (kept + deferred)[:40]]

    for decay, window in [(0.5, 5), (1.0, 5), (0.0, 1), (0.3, 60)]:
        status, _, body = server().rank({"plan": "diverse", "user_id": 1, "explain": True,
                                         "params": {"decay": decay, "window": window}})
        assert status == 200, body
        assert body["items"] == want(decay, window), (decay, window, body["items"])
        rows = {n["node_id"]: (n.get("rows_in"), n["rows"]) for n in body["nodes"]}
        assert rows == {"src": (None, 60), "a": (60, 60), "o": (60, 60), "div": (60, 60),
                        "cap": (60, 60), "t": (60, 40)}, rows
    # Out of the op's bounds at request time: 422 naming the node and its parameter.
    status, _, body = server().rank({"plan": "diverse", "user_id": 1, "params": {"decay": 1.5}})
    assert_error(status, body, 422, "invalid_param")
    assert "node 'div' param 'decay'" in body["error"]["message"], body


def test_request_id_echoed():
    _, headers, _ = server().request("POST", "/rank", {"plan": "fixed_simple", "user_id": 1},
                                     headers={"X-Request-Id": "abc-123"})
    assert headers["x-request-id"] == "abc-123"


def test_param_within_and_out_of_bounds():
    status, _, body = server().rank({"plan": "bounded", "user_id": 1, "params": {"n": 7}})
    assert status == 200 and body["count"] == 7
    status, _, body = server().rank({"plan": "bounded", "user_id": 1, "params": {"n": 99}})
    assert_error(status, body, 422, "invalid_param")
    assert "n" in body["error"]["message"]
    status, _, body = server().rank({"plan": "bounded", "user_id": 1, "params": {"nope": 1}})
    assert_error(status, body, 422, "invalid_param")
    still_serves()


def test_optional_node_degraded():
    status, _, body = server().rank({"plan": "slow_optional", "user_id": 1})
    assert status == 200, body
    assert body["degraded"] == ["s"] and body["items"] == []


# --- the error table ---------------------------------------------------------------

def test_bad_request_invalid_json_and_fields():
    s = server()
    for payload in ["{not json", "[]", json.dumps({"user_id": 1}), json.dumps({"plan": "fixed_rank"}),
                    json.dumps({"plan": "fixed_rank", "user_id": -1}),
                    json.dumps({"plan": "fixed_rank", "user_id": "x"}),
                    json.dumps({"plan": "fixed_rank", "user_id": 1, "deadline_ms": 0})]:
        status, _, data = s.request("POST", "/rank", payload)
        assert_error(status, json.loads(data), 400, "bad_request")
    still_serves()


def test_not_found_and_unknown_plan():
    status, _, data = server().request("GET", "/nope")
    assert_error(status, json.loads(data), 404, "not_found")
    status, _, body = server().rank({"plan": "no_such_plan", "user_id": 1})
    assert_error(status, body, 404, "unknown_plan")
    assert "no_such_plan" in body["error"]["message"]
    status, _, data = server().request("GET", "/plans/no_such_plan")
    assert_error(status, json.loads(data), 404, "unknown_plan")
    still_serves()


def test_method_not_allowed():
    status, headers, data = server().request("GET", "/rank")
    assert_error(status, json.loads(data), 405, "method_not_allowed")
    assert headers["allow"] == "POST"
    status, headers, data = server().request("POST", "/healthz", "{}")
    assert_error(status, json.loads(data), 405, "method_not_allowed")
    assert "GET" in headers["allow"]
    still_serves()


def test_payload_too_large():
    big = json.dumps({"plan": "fixed_rank", "user_id": 1, "pad": "x" * (2 << 20)})
    out = raw(server().port, b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % len(big)
              + big.encode())
    assert out.startswith(b"HTTP/1.1 413"), out[:100]
    assert b'"payload_too_large"' in out
    still_serves()


def test_headers_too_large():
    head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (20 * 1024) + b"\r\n\r\n"
    out = raw(server().port, head)
    assert out.startswith(b"HTTP/1.1 431"), out[:100]
    assert b'"headers_too_large"' in out
    still_serves()


def test_request_timeout_slowloris():
    s = Rankd(plans_dir(), extra_args=["--read-timeout-ms", "300"])
    try:
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        sock.sendall(b"POST /rank HTTP/1.1\r\nHost: localhost\r\n")
        for _ in range(3):
            time.sleep(0.15)  # the stimulus: a client that really is this slow
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
        data = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        sock.close()
        assert data.startswith(b"HTTP/1.1 408"), data[:100]
        assert b'"request_timeout"' in data
        status, _, _ = s.request("GET", "/healthz")
        assert status == 200
    finally:
        assert s.stop() == 0


def test_backend_error_wrong_type():
    server()
    server.redis.execute("SET", "user:424242", "not a hash")
    status, _, body = server().rank({"plan": "viewer_only", "user_id": 424242})
    assert_error(status, body, 502, "backend_error")
    # The key and Redis's own text go to the log, not to the client (operations.md).
    assert "HGETALL" in body["error"]["message"] and "redis_default" in body["error"]["message"], body
    assert "user:424242" not in body["error"]["message"], body
    assert "WRONGTYPE" not in body["error"]["message"], body
    wait_until(lambda: "user:424242" in server().stderr(), timeout=5, what="the key in the log")
    still_serves()


def test_internal_error_500_names_the_node_and_the_server_serves_on():
    s = server()
    status, headers, body = s.rank({"plan": "failing", "user_id": 1})
    assert_error(status, body, 500, "internal")
    assert "boom" in body["error"]["message"], body
    assert headers.get("x-request-id")
    still_serves()


def test_deadline_exceeded():
    status, _, body = server().rank({"plan": "slow", "user_id": 1, "deadline_ms": 30})
    assert_error(status, body, 504, "deadline_exceeded")
    still_serves()


def test_unavailable_when_redis_down():
    s = Rankd(plans_dir(TEST_PLANS))  # its Redis endpoint has nothing listening
    try:
        status, _, body = s.rank({"plan": "viewer_only", "user_id": 1})
        assert_error(status, body, 503, "unavailable")
        status, headers, data = s.request("GET", "/readyz")
        assert status == 503 and "retry-after" in headers, (status, data)
        status, _, body = s.rank({"plan": "fixed_rank", "user_id": 1})
        assert status == 200
    finally:
        assert s.stop() == 0


def test_overload_503_retry_after():
    redis = Redis()
    s = Rankd(plans_dir(TEST_PLANS), redis=redis, extra_args=["--max-inflight", "1", "--deadline-ms", "10000"])
    try:
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, what="rankd connected to Redis")
        # The one slot is held by a request whose Redis read waits until the test lets
        # it go.
        redis.suspend()
        first = []
        holder = threading.Thread(target=lambda: first.append(s.rank({"plan": "viewer_only", "user_id": 1})))
        holder.start()
        try:
            wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 1,
                       what="the first request in flight")
            for _ in range(3):
                status, headers, body = s.rank({"plan": "fixed_rank", "user_id": 1})
                assert_error(status, body, 503, "unavailable")
                assert headers["retry-after"] == "1"
        finally:
            redis.resume()
            holder.join(10)
        assert first and first[0][0] == 200, first
        assert s.rank({"plan": "fixed_rank", "user_id": 1})[0] == 200  # the slot is free again
    finally:
        assert s.stop() == 0


# --- other endpoints -----------------------------------------------------------

def test_healthz_readyz_plans():
    s = server()
    status, _, data = s.request("GET", "/healthz")
    assert status == 200 and json.loads(data) == {"status": "ok"}
    wait_until(lambda: s.request("GET", "/readyz")[0] == 200, what="/readyz 200")
    status, _, data = s.request("GET", "/plans")
    plans = json.loads(data)["plans"]
    names = [p["name"] for p in plans]
    assert "fixed_rank" in names and "feed" in names and names == sorted(names)
    feed = next(p for p in plans if p["name"] == "feed")
    assert feed["nodes"] == 12 and "limit" in feed["params"]
    status, _, data = s.request("GET", "/plans/fixed_rank")
    assert status == 200 and json.loads(data)["name"] == "fixed_rank"


def test_metrics_endpoint():
    s = server()
    status, headers, data = s.request("GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    text = data.decode()
    assert "rankd_http_requests_total" in text and "rankd_build_info" in text


# --- connection behaviour -----------------------------------------------------

def test_keep_alive_reuse_and_pipelining():
    s = server()
    c = s.conn()
    for _ in range(3):
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        assert r.status == 200
    c.close()
    body = json.dumps({"plan": "fixed_simple", "user_id": 1}).encode()
    req = b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    pipelined = (b"POST /rank HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: first\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(json.dumps({"plan": "slow", "user_id": 1})), json.dumps({"plan": "slow", "user_id": 1}).encode())
                 + b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: second\r\n\r\n"
                 + req.replace(b"Host: localhost\r\n", b"Host: localhost\r\nX-Request-Id: third\r\nConnection: close\r\n"))
    out = raw(s.port, pipelined)
    ids = [line.split(b": ")[1] for line in out.split(b"\r\n") if line.lower().startswith(b"x-request-id")]
    assert ids == [b"first", b"second", b"third"], out[:400]
    assert out.count(b"HTTP/1.1 ") == 3


def test_http10_closes():
    out = raw(server().port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200") or out.startswith(b"HTTP/1.0 200"), out[:60]


def test_chunked_and_expect_continue():
    body = json.dumps({"plan": "fixed_simple", "user_id": 3}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    out = raw(server().port, b"POST /rank HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
              b"Connection: close\r\n\r\n" + chunked)
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    sock = socket.create_connection(("127.0.0.1", server().port), timeout=5)
    sock.sendall(b"POST /rank HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body))
    first = sock.recv(100)
    assert first.startswith(b"HTTP/1.1 100"), first
    sock.sendall(body)
    rest = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    sock.close()
    assert b"HTTP/1.1 200" in first + rest


def test_smuggling_rejected():
    p = server().port
    for attack in [
        b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"GET /healthz HTTP/1.1\r\nHost: x\rX-Evil: 1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Folded: a\r\n  b\r\n\r\n",
    ]:
        out = raw(p, attack)
        assert out.startswith(b"HTTP/1.1 400"), (attack, out[:120])
        assert out.count(b"HTTP/1.1 ") == 1, out
    still_serves()


# --- lifecycle ------------------------------------------------------------------

def test_reload_keeps_old_on_broken_and_serves_new():
    d = plans_dir()
    s = Rankd(d)
    try:
        status, _, body = s.rank({"plan": "fresh", "user_id": 1})
        assert status == 404
        def reloads(result):
            return metric_value(s.metrics(), "rankd_plan_reloads_total", result=result) or 0
        ok0, err0 = reloads("ok"), reloads("error")
        write_plan(d, "broken", '{"schema_version": 1, "name": "broken", "nodes": [')
        s.signal(signal.SIGHUP)
        wait_until(lambda: reloads("error") == err0 + 1, what="the broken set rejected")
        wait_until(lambda: "broken" in s.stderr(), what="the rejected file named in the log")
        assert reloads("ok") == ok0
        status, _, body = s.rank({"plan": "fixed_rank", "user_id": 1})
        assert status == 200
        os.remove(os.path.join(d, "broken.plan.json"))
        write_plan(d, "fresh", simple_plan("fresh", [
            {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 4}}], "src"))
        s.signal(signal.SIGHUP)
        wait_until(lambda: reloads("ok") == ok0 + 1, what="the fixed set loaded")
        assert reloads("error") == err0 + 1
        status, _, body = s.rank({"plan": "fresh", "user_id": 1})
        assert status == 200 and body["count"] == 4, body
    finally:
        assert s.stop() == 0


def test_drain_finishes_requests_in_flight():
    # 2 s requests: the SIGTERM must land while they run, after the metrics poll saw them
    # (under sanitizers on a busy machine that poll alone can take a few hundred ms).
    plans = dict(TEST_PLANS, slow_2s=sleep_plan("slow_2s", 2000))
    s = Rankd(plans_dir(plans), extra_args=["--deadline-ms", "8000", "--drain-timeout-ms", "8000"])
    results = []

    def one():
        try:
            results.append(s.rank({"plan": "slow_2s", "user_id": 1}))
        except Exception as e:  # noqa: BLE001
            results.append(e)
    threads = [threading.Thread(target=one) for _ in range(5)]
    for t in threads:
        t.start()
    wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 5, what="5 in flight")
    s.signal(signal.SIGTERM)
    for t in threads:
        t.join(10)
    code = s.wait_exit(timeout=10)
    assert code == 0, code
    assert len(results) == 5 and all(not isinstance(r, Exception) and r[0] == 200 for r in results), results
    assert all(r[1].get("connection") == "close" for r in results), [r[1] for r in results]


def test_drain_delay_fails_readiness_and_serves_on_then_drains():
    """--drain-delay-ms: from SIGTERM, /readyz is 503 naming the drain while /rank answers
    200 on kept-alive and new connections; when the delay ends the listener closes, a
    request in flight then still finishes (with Connection: close), and rankd exits 0."""
    delay_s = 1.5
    redis = Redis()
    s = Rankd(plans_dir({"slow_1s": sleep_plan("slow_1s", 1000)}), redis=redis, shards=2,
              extra_args=["--drain-delay-ms", str(int(delay_s * 1000)), "--drain-timeout-ms", "5000",
                          "--deadline-ms", "5000"])
    wait_until(lambda: s.request("GET", "/readyz")[0] == 200, what="/readyz 200")
    kept = s.conn()
    kept.request("POST", "/rank", json.dumps({"plan": "fixed_rank", "user_id": 1}))
    r = kept.getresponse()
    assert r.status == 200 and r.read()
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    wait_until(lambda: s.request("GET", "/readyz")[0] == 503, timeout=1, what="/readyz 503 after SIGTERM")
    status, headers, data = s.request("GET", "/readyz")
    body = json.loads(data)
    assert status == 503 and body["status"] == "not_ready", body
    assert "draining" in body["reasons"] and "--drain-delay-ms" in body["reasons"], body
    assert headers.get("retry-after") == "1", headers
    assert s.request("GET", "/healthz")[0] == 200
    # Serving as before: new connections, and the one kept alive (not closed by the drain).
    answered = 0
    while time.monotonic() - t0 < delay_s - 0.6:
        status, headers, body = s.rank({"plan": "fixed_rank", "user_id": 1})
        assert status == 200 and body["count"] == 20, (status, body)
        assert headers.get("connection") != "close", headers
        answered += 1
    kept.request("POST", "/rank", json.dumps({"plan": "fixed_rank", "user_id": 2}))
    r = kept.getresponse()
    assert r.status == 200 and r.getheader("Connection") != "close" and r.read()
    kept.close()
    assert answered >= 5, answered
    assert s.proc.poll() is None and s.port in listening_ports(s.proc.pid)
    # A request that is still running when the delay ends.
    slow = []
    t = threading.Thread(target=lambda: slow.append(s.rank({"plan": "slow_1s", "user_id": 1})))
    t.start()
    wait_until(lambda: not listening_ports(s.proc.pid), timeout=delay_s + 2, what="the listener closed")
    closed_after = time.monotonic() - t0
    assert closed_after >= delay_s - 0.05, closed_after
    assert t.is_alive(), "the slow request ended before the listener closed: the test proves nothing"
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        raise AssertionError("a new connection was accepted after the drain delay")
    except ConnectionRefusedError:
        pass
    t.join(10)
    assert slow and slow[0][0] == 200 and slow[0][1].get("connection") == "close", slow
    assert s.wait_exit(timeout=10) == 0


def test_drain_delay_second_signal_skips_the_rest():
    redis = Redis()
    s = Rankd(plans_dir(), redis=redis, extra_args=["--drain-delay-ms", "60000"])
    wait_until(lambda: s.request("GET", "/readyz")[0] == 200, what="/readyz 200")
    s.signal(signal.SIGTERM)
    wait_until(lambda: s.request("GET", "/readyz")[0] == 503, timeout=1, what="/readyz 503 after SIGTERM")
    assert s.rank({"plan": "fixed_rank", "user_id": 1})[0] == 200
    t0 = time.monotonic()
    s.signal(signal.SIGINT)
    assert s.wait_exit(timeout=10) == 0
    assert time.monotonic() - t0 < 5


def test_two_shards_both_serve():
    # Each request is a new connection, which SO_REUSEPORT gives one shard's listener by a
    # hash; the harness's Rankd is up once every shard listens (/readyz no longer says
    # "starting"), so 40 requests all to one shard happen once in 2^39 runs.
    s = Rankd(plans_dir(), shards=2)
    try:
        for _ in range(40):
            assert s.rank({"plan": "fixed_simple", "user_id": 1})[0] == 200
        text = s.metrics()
        per_shard = [metric_value(text, "rankd_http_requests_total", route="/rank", shard=i) or 0
                     for i in (0, 1)]
        assert sum(per_shard) == 40, per_shard
        assert all(n > 0 for n in per_shard), per_shard
    finally:
        assert s.stop() == 0


def test_access_log_one_json_line_per_request():
    path = temp_path("rankd-access-")
    s = Rankd(plans_dir(), extra_args=["--access-log"], stdout_path=path)
    try:
        s.request("POST", "/rank", {"plan": "fixed_simple", "user_id": 9}, headers={"X-Request-Id": "al-1"})
        s.request("GET", "/nope", headers={"X-Request-Id": "al-2"})
    finally:
        assert s.stop() == 0
    lines = [json.loads(line) for line in open(path) if line.strip()]
    rank = next(x for x in lines if x["request_id"] == "al-1")
    assert rank["route"] == "/rank" and rank["plan"] == "fixed_simple" and rank["user_id"] == 9
    assert rank["status"] == 200 and rank["took_us"] >= 0 and rank["method"] == "POST"
    other = next(x for x in lines if x["request_id"] == "al-2")
    assert other["route"] == "other" and other["status"] == 404 and "plan" not in other


def test_port_taken_fails_clearly():
    s = server()
    p = subprocess.run([RANKD, "serve", "--host", "127.0.0.1", "--port", str(s.port), "--plans", s.plans,
                        "--enable-test-ops"], capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert str(s.port) in p.stderr, p.stderr



def test_watch_plans_reloads_on_change_and_keeps_the_old_set_on_a_bad_one():
    d = plans_dir()
    s = Rankd(d, extra_args=["--watch-plans-ms", "50"])
    try:
        def plan_status(name):
            return s.request("GET", "/plans/" + name)[0]
        def reloads(result):
            return metric_value(s.metrics(), "rankd_plan_reloads_total", result=result) or 0
        assert plan_status("extra") == 404
        ok0 = reloads("ok")
        write_plan(d, "extra", simple_plan("extra", [
            {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 4}}], "src"))
        wait_until(lambda: plan_status("extra") == 200, what="the new plan loaded by the watcher")
        assert reloads("ok") >= ok0 + 1
        status, _, body = s.rank({"plan": "extra", "user_id": 1})
        assert status == 200 and body["count"] == 4, body
        # A broken file: rejected, the previous set serves on, and it is not retried in a
        # loop (one error until the files change again).
        err0 = reloads("error")
        with open(os.path.join(d, "extra.plan.json"), "w") as f:
            f.write("{ not json")
        wait_until(lambda: reloads("error") == err0 + 1, what="the broken set rejected")
        # The stimulus is time itself: six watch periods pass without a file change, and
        # a watcher that retried the rejected set would count an error on each.
        time.sleep(0.3)
        assert reloads("error") == err0 + 1
        assert s.rank({"plan": "extra", "user_id": 1})[0] == 200
        os.remove(os.path.join(d, "extra.plan.json"))
        wait_until(lambda: plan_status("extra") == 404, what="the removed plan unloaded")
    finally:
        assert s.stop() == 0


def test_ipv6_listen_address_and_a_bad_one():
    s = server()
    p = subprocess.Popen([RANKD, "serve", "--host", "::1", "--port", "0", "--shards", "2",
                          "--plans", s.plans, "--log-level", "warn", "--enable-test-ops"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(listening_ports(p.pid)) == 1, what="rankd listening on [::1]")
        port = listening_ports(p.pid).pop()

        def answers():
            c = http.client.HTTPConnection("::1", port, timeout=5)
            try:
                c.request("POST", "/rank", json.dumps({"plan": "fixed_rank", "user_id": 1}))
                r = c.getresponse()
                return r.status == 200 and json.loads(r.read())["count"] == 20
            finally:
                c.close()
        wait_until(answers, what="rankd answering on [::1]")
    finally:
        p.terminate()
        check_exit("rankd on [::1]", p.wait(20), p.stderr.read())
    bad = subprocess.run([RANKD, "serve", "--host", "not-an-address", "--port", str(free_port()),
                          "--plans", s.plans, "--enable-test-ops"], capture_output=True, text=True,
                         timeout=20)
    assert bad.returncode != 0
    assert "invalid listen address 'not-an-address'" in bad.stderr, bad.stderr


if __name__ == "__main__":
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    run_tests(tests)
