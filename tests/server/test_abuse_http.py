"""HTTP budgets and origins (docs/operations.md, "HTTP budgets and origins"): at most
--max-headers header lines, the header timeout, the metrics address's connection cap,
and cross-site use refused (Origin, Host, CORS). A real rankd on loopback, clients on
raw sockets and http.client. The floods of the same bounds, which measure RSS, are in
test_abuse_floods.py (plain build only). About 5 s.
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (Rankd, call, demo_env, free_port, metric_value, plans_dir,  # noqa: E402
                     run_tests, temp_path)


def rejects(rankd, reason):
    return metric_value(rankd.metrics(), "rankd_http_rejects_total", reason=reason) or 0.0


def timed_healthz(port):
    t0 = time.monotonic()
    status, _, _ = call(port, "GET", "/healthz", timeout=5)
    return status, time.monotonic() - t0


def raw_answer(port, data, timeout=10):
    """Sends `data` on a new connection and reads until rankd closes: the bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                return out
            out += d


def test_header_lines_past_max_headers_get_431():
    rankd = Rankd(plans_dir())
    try:
        def head(n):
            return (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                    b"".join(b"X-H%d: v\r\n" % i for i in range(n - 2)) + b"\r\n")
        assert raw_answer(rankd.port, head(100)).startswith(b"HTTP/1.1 200 ")
        out = raw_answer(rankd.port, head(101))
        assert out.startswith(b"HTTP/1.1 431 ") and b'"headers_too_large"' in out, out[:300]
        assert b"more than 100 header lines" in out, out[:300]
        assert rejects(rankd, "too_many_headers") == 1
    finally:
        rankd.stop()


def test_header_timeout_closes_connections_that_never_ask():
    """--header-timeout-ms 500: a connection that sends nothing, or a head too slowly, is
    closed without an answer and counted; one that asked in time idles on."""
    rankd = Rankd(plans_dir(), extra_args=["--header-timeout-ms", "500"])
    try:
        silent = socket.create_connection(("127.0.0.1", rankd.port), timeout=10)
        slow = socket.create_connection(("127.0.0.1", rankd.port), timeout=10)
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        asked = rankd.conn()
        asked.request("GET", "/healthz")
        assert asked.getresponse().read()
        assert silent.recv(100) == b"", "a silent connection got an answer"
        assert slow.recv(100) == b"", "an unfinished head got an answer"
        assert rejects(rankd, "header_timeout") == 2
        time.sleep(0.8)  # the stimulus: past the header timeout, within the idle timeout
        asked.request("GET", "/healthz")
        assert asked.getresponse().status == 200
        for s in (silent, slow, asked):
            s.close()
    finally:
        rankd.stop()


def test_idle_connections_on_the_metrics_port_make_room_for_probes():
    """The metrics address holds --metrics-max-connections (256) connections; at the cap
    a new one takes the place of the one idle the longest, so 256 idle connections
    leave /healthz answering within 1 s."""
    mport = free_port()
    rankd = Rankd(plans_dir(), extra_args=["--metrics-host", "127.0.0.1", "--metrics-port",
                                           str(mport)])
    try:
        idle = [socket.create_connection(("127.0.0.1", mport), timeout=10) for _ in range(256)]
        # Accepted in order (first come, first served): the first is the idlest.
        status, took = timed_healthz(mport)
        assert status == 200 and took < 1, (status, took)
        assert idle[0].recv(100) == b"", "the idlest connection was not closed"
        idle[1].settimeout(0.2)
        try:
            assert idle[1].recv(100) != b"", "a second connection was closed"
        except socket.timeout:
            pass  # still open, as it should be
        # The scrape's own connection makes room too when the probe's is still open.
        _, _, text = call(mport, "GET", "/metrics")
        evicted = metric_value(text.decode(), "rankd_http_rejects_total", reason="evicted_at_cap")
        assert evicted in (1, 2), evicted
        for s in idle:
            s.close()
    finally:
        rankd.stop()


def request(port, method, path, headers, body=None):
    return call(port, method, path, headers=headers, body=body)


def test_origins_refused_allowed_and_preflighted():
    tokens = temp_path("rankd-tokens-")
    with open(tokens, "w") as f:
        f.write("tok\n")
    redis, plans = demo_env()
    rankd = Rankd(plans, redis=redis, extra_args=[
        "--allowed-origins", "https://app.example", "--allowed-origins", "http://localhost:3000",
        "--auth-token-file", tokens]).wait_ready()
    auth = {"Authorization": "Bearer tok", "Content-Type": "application/json"}
    body = json.dumps({"plan": "home_light", "user_id": 1})
    port = rankd.port
    try:
        # No Origin (curl, servers): served, no CORS header.
        status, headers, _ = request(port, "POST", "/rank", auth, body)
        assert status == 200 and "access-control-allow-origin" not in headers, (status, headers)
        # Another site's page, a sandboxed one, and two Origins: 403.
        for origin in ("https://evil.example", "null", "https://app.example.evil",
                       "http://app.example", "https://app.example:8443"):
            status, headers, answer = request(port, "POST", "/rank", {**auth, "Origin": origin},
                                              body)
            assert status == 403 and json.loads(answer)["error"]["code"] == "forbidden_origin", \
                (origin, status, answer)
            assert "access-control-allow-origin" not in headers, headers
        # A listed origin (scheme and host in any case, its default port written out).
        for origin in ("https://app.example", "HTTPS://App.Example:443", "http://localhost:3000"):
            status, headers, answer = request(port, "POST", "/rank", {**auth, "Origin": origin},
                                              body)
            assert status == 200, (origin, status, answer)
            assert headers.get("access-control-allow-origin") == origin, headers
            assert headers.get("vary") == "Origin", headers
        # Its errors are readable by the page too.
        status, headers, _ = request(port, "POST", "/rank",
                                     {"Origin": "https://app.example"}, body)
        assert status == 401 and headers.get("access-control-allow-origin"), (status, headers)
        # The page's own host (same origin): served, no CORS header.
        status, headers, _ = request(port, "GET", "/plans",
                                     {**auth, "Origin": f"http://127.0.0.1:{port}"})
        assert status == 200 and "access-control-allow-origin" not in headers, (status, headers)
        # Preflight: no token needed (browsers send none), the route's methods.
        pre = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
        status, headers, answer = request(port, "OPTIONS", "/rank", pre)
        assert status == 204 and answer == b"", (status, answer)
        assert headers.get("access-control-allow-origin") == "https://app.example", headers
        assert headers.get("access-control-allow-methods") == "POST", headers
        assert headers.get("access-control-allow-headers") == "Authorization, Content-Type", headers
        assert "content-length" not in headers, headers
        status, _, _ = request(port, "OPTIONS", "/rank", {**pre, "Origin": "https://evil.example"})
        assert status == 403
        status, _, _ = request(port, "OPTIONS", "/rank", {"Origin": "null"})
        assert status == 403
        # OPTIONS without Origin is no preflight: the route's 405.
        assert request(port, "OPTIONS", "/rank", auth)[0] == 405
        # Probes and scrapes are exempt.
        for path in ("/healthz", "/readyz"):
            assert request(port, "GET", path, {"Origin": "https://evil.example"})[0] == 200, path
        text = request(port, "GET", "/metrics", auth)[2].decode()
        assert metric_value(text, "rankd_http_rejects_total", reason="forbidden_origin") == 7
        assert metric_value(text, "rankd_http_requests_total", route="/rank", code="403") == 7
        assert metric_value(text, "rankd_http_requests_total", route="/rank", code="204") == 1
    finally:
        rankd.stop()


def test_host_names_outside_the_list_get_421_but_probes_pass():
    """A loopback rankd answers its loopback names only (DNS rebinding); /healthz,
    /readyz and /metrics take any Host (kubelet sends the pod's IP)."""
    rankd = Rankd(plans_dir())
    listed = Rankd(plans_dir(), extra_args=["--allowed-hosts", "rank.example",
                                            "--allowed-hosts", "[::1]"])
    try:
        for host in ("localhost", f"localhost:{rankd.port}", "127.0.0.1", "LOCALHOST", "[::1]:1"):
            assert request(rankd.port, "GET", "/plans", {"Host": host})[0] == 200, host
        for host in ("evil.example", f"evil.example:{rankd.port}", "localhost.evil.example",
                     "10.0.0.7"):
            status, _, answer = request(rankd.port, "GET", "/plans", {"Host": host})
            assert status == 421, (host, status)
            assert json.loads(answer)["error"]["code"] == "misdirected_request", answer
            for path in ("/healthz", "/readyz", "/metrics"):  # /readyz: 503 without Redis
                assert request(rankd.port, "GET", path, {"Host": host})[0] in (200, 503), \
                    (host, path)
        assert request(rankd.port, "POST", "/rank", {"Host": "evil.example"}, b"{}")[0] == 421
        assert rejects(rankd, "misdirected_host") == 5
        assert request(listed.port, "GET", "/plans", {"Host": "Rank.Example:8080"})[0] == 200
        assert request(listed.port, "GET", "/plans", {"Host": "[::1]:8080"})[0] == 200
        assert request(listed.port, "GET", "/plans", {"Host": "localhost"})[0] == 421
    finally:
        rankd.stop()
        listed.stop()


def test_console_refuses_other_hosts_and_frames():
    mport = free_port()
    rankd = Rankd(plans_dir(), extra_args=["--metrics-host", "127.0.0.1", "--metrics-port",
                                           str(mport), "--console"])
    try:
        status, headers, _ = request(mport, "GET", "/console/", {})
        assert status == 200, status
        assert headers.get("x-frame-options") == "DENY", headers
        csp = headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "base-uri 'none'" in csp, csp
        status, headers, _ = request(mport, "GET", "/console/", {"Host": "evil.example"})
        assert status == 421 and headers.get("x-frame-options") == "DENY", (status, headers)
        assert request(mport, "GET", "/metrics", {"Host": "10.1.2.3:9090"})[0] == 200
        status, _, _ = request(mport, "GET", "/console/api/metrics",
                               {"Origin": "https://evil.example"})
        assert status == 403, status
    finally:
        rankd.stop()


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
