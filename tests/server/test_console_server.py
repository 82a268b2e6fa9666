"""The web console's server side (docs/api.md, "The console"):
`rankd serve --console` serves the files of console/dist/ compiled into rankd, the API
routes the console calls and /console/api/metrics on the metrics address, with the main
port's handlers, limits and token; the main port never serves /console/. A real rankd
and redis-server, over HTTP. About 5 s.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SOURCE_ROOT, Rankd, call, demo_env, free_port,  # noqa: E402
                     metric_value, run_tests, temp_path)

DIST = os.path.join(SOURCE_ROOT, "console", "dist")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".json": "application/json"}
CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'"


def console_rankd(shards=1, extra=None):
    """A rankd with --console on a metrics port: (rankd, metrics port)."""
    redis, plans = demo_env()
    mport = free_port()
    rankd = Rankd(plans, redis=redis, shards=shards, extra_args=[
        "--metrics-host", "127.0.0.1", "--metrics-port", str(mport), "--console"] + (extra or []))
    return rankd.wait_ready(), mport


def dist_files():
    """(relative path, bytes) of every file the console embeds."""
    out = []
    for folder, _, names in os.walk(DIST):
        for name in names:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                out.append((os.path.relpath(full, DIST).replace(os.sep, "/"), f.read()))
    return sorted(out)


def assert_console_headers(headers, what):
    assert headers.get("content-security-policy") == CSP, (what, headers)
    assert headers.get("x-content-type-options") == "nosniff", (what, headers)
    assert headers.get("x-frame-options") == "DENY", (what, headers)


def assert_error(status, body, want_status, want_code, what):
    assert status == want_status, (what, status, body[:200])
    assert json.loads(body)["error"]["code"] == want_code, (what, body[:200])


def test_console_needs_metrics_port():
    out = subprocess.run([RANKD, "serve", "--console", "--port", "0"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "--console" in out.stderr and "--metrics-port" in out.stderr, out.stderr


def test_static_files():
    rankd, mport = console_rankd()
    try:
        files = dist_files()
        assert {"index.html", "app.js", "app.css"} <= {p for p, _ in files}, files
        for rel, data in files:
            status, headers, body = call(mport, "GET", "/console/" + rel)
            assert status == 200 and body == data, (rel, status, body[:200])
            assert headers["content-type"] == TYPES[os.path.splitext(rel)[1]], (rel, headers)
            assert_console_headers(headers, rel)
        # The page itself, and HEAD: the length without the bytes.
        index = dict(files)["index.html"]
        status, headers, body = call(mport, "GET", "/console/")
        assert status == 200 and body == index, status
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert_console_headers(headers, "/console/")
        status, headers, body = call(mport, "HEAD", "/console/app.js")
        assert status == 200 and body == b"", (status, body)
        assert int(headers["content-length"]) == len(dict(files)["app.js"]), headers
        # /console goes to the page.
        status, headers, _ = call(mport, "GET", "/console")
        assert status in (301, 308) and headers["location"] == "/console/", (status, headers)
        assert_console_headers(headers, "/console")
        # Unknown files, paths out of the folder and wrong methods: JSON errors, same headers.
        for path in ("/console/nope.js", "/console/../server/rankd", "/console/app.js/",
                     "/console/%2e%2e/x", "/console/index.html?x=1/../y"):
            status, headers, body = call(mport, "GET", path)
            if path.endswith("?x=1/../y"):  # the query is not part of the path
                assert status == 200, (path, status)
                continue
            assert_error(status, body, 404, "not_found", path)
            assert_console_headers(headers, path)
        status, headers, body = call(mport, "POST", "/console/app.js", body=b"{}")
        assert_error(status, body, 405, "method_not_allowed", "POST /console/app.js")
        assert headers["allow"] == "GET, HEAD" and headers["content-security-policy"] == CSP
        # The main port never serves the console.
        for path in ("/console", "/console/", "/console/app.js", "/console/api/metrics"):
            status, _, body = call(rankd.port, "GET", path)
            assert_error(status, body, 404, "not_found", "main port " + path)
        # Counted under one label for every file.
        text = call(mport, "GET", "/metrics")[2].decode()
        assert metric_value(text, "rankd_http_requests_total", route="/console/{file}",
                            code=200) >= len(files) + 2
        assert metric_value(text, "rankd_http_requests_total", route="/console", code=301) == 1
    finally:
        rankd.stop()


def test_metrics_port_without_console():
    redis, plans = demo_env()
    mport = free_port()
    rankd = Rankd(plans, redis=redis,
                  extra_args=["--metrics-host", "127.0.0.1", "--metrics-port", str(mport)])
    try:
        for path in ("/console", "/console/", "/console/app.js", "/console/api/metrics",
                     "/plans", "/schema", "/experiments"):
            status, headers, body = call(mport, "GET", path)
            assert_error(status, body, 404, "not_found", path)
            assert "content-security-policy" not in headers, (path, headers)
        assert_error(*call(mport, "POST", "/rank", body=b'{"plan":"feed","user_id":1}')[::2],
                     404, "not_found", "/rank")
        assert call(mport, "GET", "/metrics")[0] == 200
        assert call(rankd.port, "GET", "/console/")[0] == 404
    finally:
        rankd.stop()


def test_api_routes_and_limits():
    rankd, mport = console_rankd(extra=["--max-body-bytes", "4096"])
    try:
        # The same handlers: the same bodies on both listeners.
        for path in ("/plans", "/plans/feed", "/schema", "/experiments"):
            main, console = call(rankd.port, "GET", path), call(mport, "GET", path)
            assert main[0] == console[0] == 200 and main[2] == console[2], path
            assert "content-security-policy" not in console[1], path  # not a console route
        assert_error(*call(mport, "GET", "/plans/nope")[::2], 404, "unknown_plan", "/plans/nope")
        rank = json.dumps({"plan": "home_light", "user_id": 1, "explain": True})
        status, _, body = call(mport, "POST", "/rank", body=rank)
        answer = json.loads(body)
        assert status == 200 and answer["count"] > 0 and answer["nodes"], (status, body[:200])
        assert_error(*call(mport, "GET", "/rank")[::2], 405, "method_not_allowed", "GET /rank")
        # A body over --max-body-bytes: refused on both listeners alike.
        big = json.dumps({"plan": "home_light", "user_id": 1, "pad": "x" * 5000})
        for port in (rankd.port, mport):
            status, _, body = call(port, "POST", "/rank", body=big)
            assert_error(status, body, 413, "payload_too_large", f"port {port}")
        # The probes and /metrics stay.
        for path in ("/healthz", "/readyz", "/metrics"):
            assert call(mport, "GET", path)[0] == 200, path
    finally:
        rankd.stop()


def rank_metrics(text, plan):
    """A plan's counters as /metrics shows them, summed over shards, in the console's shape."""
    outcomes = {}
    for line in text.splitlines():
        if line.startswith("rankd_rank_requests_total{") and f'plan="{plan}"' in line:
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            outcomes[outcome] = outcomes.get(outcome, 0) + int(float(line.rsplit(" ", 1)[1]))
    le, counts = [], []
    for line in text.splitlines():
        if (line.startswith("rankd_rank_duration_seconds_bucket{") and f'plan="{plan}"' in line
                and 'shard="0"' in line):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            n = metric_value(text, "rankd_rank_duration_seconds_bucket", plan=plan, le=bound)
            if bound != "+Inf":
                le.append(float(bound) * 1000)
            counts.append(int(n))
    requests = sum(outcomes.values())
    return {"requests": requests, "errors": requests - outcomes.get("ok", 0),
            "outcomes": {k: v for k, v in outcomes.items() if v}, "le": le, "counts": counts}


def test_console_metrics_agree_with_metrics():
    rankd, mport = console_rankd(shards=2)
    try:
        n_ok, n_slow = 12, 3
        for i in range(n_ok):  # on both listeners, over both shards
            port = mport if i % 2 else rankd.port
            status, _, body = call(port, "POST", "/rank",
                                   body=json.dumps({"plan": "home_light", "user_id": i + 1}))
            assert status == 200, body[:200]
        for _ in range(n_slow):  # past its deadline: an error outcome of the plan
            status, _, body = call(mport, "POST", "/rank",
                                   body=json.dumps({"plan": "e2e_slow", "user_id": 1,
                                                    "deadline_ms": 1}))
            assert_error(status, body, 504, "deadline_exceeded", "e2e_slow")
        for port, events in ((rankd.port, [{"type": "click", "user_id": 1, "item_id": i} for i in range(7)]),
                             (mport, [{"type": "impression", "user_id": 2, "item_id": 1}] * 3)):
            status, _, body = call(port, "POST", "/events", body=json.dumps({"events": events}))
            assert status == 200 and json.loads(body) == {"accepted": len(events)}, body
        status, headers, body = call(mport, "GET", "/console/api/metrics")
        assert status == 200 and headers["content-type"] == "application/json", status
        assert_console_headers(headers, "/console/api/metrics")
        got = json.loads(body)
        text = call(mport, "GET", "/metrics")[2].decode()
        assert isinstance(got["now_ms"], int) and got["now_ms"] > 1_600_000_000_000, got["now_ms"]
        # Every loaded plan, zeros included.
        loaded = {p["name"] for p in json.loads(call(mport, "GET", "/plans")[2])["plans"]}
        assert set(got["plans"]) == loaded, (sorted(got["plans"]), sorted(loaded))
        for plan, v in got["plans"].items():
            want = rank_metrics(text, plan)
            d = v["duration_ms"]
            assert len(d["counts"]) == len(d["le"]) + 1, (plan, d)
            assert d["counts"] == sorted(d["counts"]) and d["counts"][-1] == v["requests"], plan
            assert (v["requests"], v["errors"], v["outcomes"]) == \
                (want["requests"], want["errors"], want["outcomes"]), (plan, v, want)
            assert d["counts"] == want["counts"], (plan, d["counts"], want["counts"])
            assert [round(x, 6) for x in d["le"]] == [round(x, 6) for x in want["le"]], plan
        home, slow = got["plans"]["home_light"], got["plans"]["e2e_slow"]
        assert home["requests"] >= n_ok and home["outcomes"].get("ok", 0) >= n_ok, home
        assert slow["errors"] == n_slow and slow["outcomes"] == {"deadline_exceeded": n_slow}, slow
        assert got["plans"]["diamond"]["requests"] == 0, got["plans"]["diamond"]
        assert got["plans"]["diamond"]["outcomes"] == {}
        # POST /events' events, summed over types and shards, as the live view's events/s reads them.
        assert got["events"] == {"accepted": 10, "failed": 0}, got["events"]
        assert metric_value(text, "rankd_events_total", outcome="accepted", type="click") == 7
        assert metric_value(text, "rankd_events_total", outcome="accepted", type="impression") == 3
        assert metric_value(text, "rankd_http_requests_total", route="/console/api/metrics",
                            code=200) == 1
    finally:
        rankd.stop()


def test_token():
    tokens = temp_path("rankd-tokens-")
    with open(tokens, "w") as f:
        f.write("tok-console\n")
    rankd, mport = console_rankd(extra=["--auth-token-file", tokens])
    auth = {"Authorization": "Bearer tok-console"}
    rank = json.dumps({"plan": "home_light", "user_id": 1})
    try:
        for method, path, body in (("GET", "/plans", None),
                                   ("GET", "/plans/feed", None), ("GET", "/schema", None),
                                   ("GET", "/experiments", None), ("POST", "/rank", rank)):
            status, headers, answer = call(mport, method, path, body=body)
            assert_error(status, answer, 401, "unauthorized", path)
            assert headers.get("www-authenticate") == "Bearer", (path, headers)
            if path.startswith("/console/"):
                assert_console_headers(headers, path)
            status, _, answer = call(mport, method, path, headers=auth, body=body)
            assert status == 200, (path, status, answer[:200])
        # The files, the redirect, the probes and the metrics in both forms (one rule:
        # the same counters) need no token there.
        for path in ("/console/", "/console/app.js", "/console", "/metrics", "/healthz",
                     "/console/api/metrics"):
            assert call(mport, "GET", path)[0] in (200, 301), path
        assert_error(*call(mport, "GET", "/console/nope.js")[::2], 404, "not_found", "nope.js")
        # The main port still asks for one first, and has no console.
        assert call(rankd.port, "GET", "/console/")[0] == 401
        assert_error(*call(rankd.port, "GET", "/console/", headers=auth)[::2], 404, "not_found",
                     "main port /console/")
    finally:
        rankd.stop()


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
