"""The optional API token (docs/operations.md, "Security"): with
--auth-token-file every route but /healthz and /readyz needs `Authorization: Bearer
<token>` (401 unauthorized with WWW-Authenticate otherwise), the metrics address stays
open, SIGHUP re-reads the file (an emptied or unreadable one keeps the old tokens), and
a file with no token stops the start. A real rankd and redis-server.
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, call, demo_env, free_port, metric_value,  # noqa: E402
                     run_tests, temp_path, wait_until)


def redis():
    return demo_env()[0]


def write_tokens(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


RANK = json.dumps({"plan": "feed", "user_id": 1})


def assert_unauthorized(status, headers, body, says):
    assert status == 401, (status, body[:200])
    assert headers.get("www-authenticate") == "Bearer", headers
    err = json.loads(body)["error"]
    assert err["code"] == "unauthorized" and says in err["message"], err


def test_token_on():
    tokens = temp_path("rankd-tokens-")
    write_tokens(tokens, "# API tokens\n\n  tok-one  \ntok_two\n")
    mport = free_port()
    rankd = Rankd(_env_plans(), redis=redis(), extra_args=[
        "--auth-token-file", tokens, "--metrics-host", "127.0.0.1", "--metrics-port", str(mport)])
    try:
        rankd.wait_ready()
        port = rankd.port
        # The right token, either of them, the scheme in any case.
        for h in (bearer("tok-one"), bearer("tok_two"), {"Authorization": "bearer tok-one"}):
            status, _, body = call(port, "POST", "/rank", h, RANK)
            assert status == 200 and json.loads(body)["count"] > 0, (h, status, body[:200])
        # Missing, malformed, wrong: 401 saying which, never echoing the header.
        assert_unauthorized(*call(port, "POST", "/rank", body=RANK), "needs an 'Authorization")
        for h in ("Basic dG9rLW9uZQ==", "Bearer", "Bearer tok-one extra", "tok-one"):
            status, headers, body = call(port, "POST", "/rank", {"Authorization": h}, RANK)
            assert_unauthorized(status, headers, body, "is not 'Bearer <token>'")
        status, headers, body = call(port, "POST", "/rank", bearer("tok-three"), RANK)
        assert_unauthorized(status, headers, body, "not one this server accepts")
        assert b"tok-three" not in body
        # Every route but the probes, a wrong method and an unknown path included.
        for method, path in (("GET", "/plans"), ("GET", "/plans/feed"), ("GET", "/experiments"),
                             ("GET", "/schema"), ("GET", "/metrics"), ("GET", "/rank"),
                             ("GET", "/no/such/path"), ("HEAD", "/plans")):
            status, headers, body = call(port, method, path)
            assert status == 401 and headers.get("www-authenticate") == "Bearer", (path, status)
            status, _, body = call(port, method, path, bearer("tok-one"))
            assert status != 401, (method, path, status, body[:200])
        assert call(port, "GET", "/plans", bearer("tok-one"))[0] == 200
        # /metrics is on the metrics address (404 on the main port, given a token).
        assert call(port, "GET", "/metrics", bearer("tok-one"))[0] == 404
        # The probes stay open, on both addresses; the metrics address asks for nothing.
        for p in (port, mport):
            assert call(p, "GET", "/healthz")[0] == 200
            assert call(p, "GET", "/readyz")[0] == 200
        status, _, body = call(mport, "GET", "/metrics")
        assert status == 200 and b"rankd_build_info" in body, status
        assert call(mport, "GET", "/plans", bearer("tok-one"))[0] == 404  # nothing else there
        text = body.decode()
        assert metric_value(text, "rankd_http_requests_total", route="/rank", code=401) >= 7
        # Every answer a route can give exists from the start: 401 on /healthz cannot.
        assert metric_value(text, "rankd_http_requests_total", route="/schema", method="POST",
                            code=401) is not None
        assert metric_value(text, "rankd_http_requests_total", route="/healthz", code=401) is None
    finally:
        rankd.stop()


def test_token_off():
    rankd = Rankd(_env_plans(), redis=redis()).wait_ready()
    try:
        for h in ({}, bearer("anything"), {"Authorization": "Basic eDp5"}):
            status, _, body = call(rankd.port, "POST", "/rank", h, RANK)
            assert status == 200, (h, status, body[:200])
        assert call(rankd.port, "GET", "/metrics")[0] == 200
        text = rankd.metrics()
        assert metric_value(text, "rankd_http_requests_total", code=401) is None
    finally:
        rankd.stop()


def test_sighup_rereads_the_file():
    tokens = temp_path("rankd-tokens-")
    write_tokens(tokens, "old-token\n")
    rankd = Rankd(_env_plans(), redis=redis(), shards=2,
                  extra_args=["--auth-token-file", tokens, "--log-level", "info"]).wait_ready()
    try:
        def status_with(token):
            return call(rankd.port, "POST", "/rank", bearer(token), RANK)[0]
        assert status_with("old-token") == 200
        write_tokens(tokens, "# rotated\nnew-token\n")
        rankd.signal(signal.SIGHUP)
        # Every shard takes the new set (posted to each loop) soon after the signal.
        wait_until(lambda: all(status_with("new-token") == 200 for _ in range(8)),
                   what="the new token accepted")
        assert status_with("old-token") == 401
        wait_until(lambda: "--auth-token-file: 1 token(s) from" in rankd.stderr(),
                   what="the reload logged")

        # Emptied (only a comment left): the tokens stay, and the log says why.
        write_tokens(tokens, "# nobody\n\n")
        rankd.signal(signal.SIGHUP)
        wait_until(lambda: "keeping the 1 token(s) loaded before" in rankd.stderr(),
                   what="the rejected reload logged")
        assert f"{tokens} holds no token" in rankd.stderr()
        assert status_with("new-token") == 200 and status_with("old-token") == 401

        # Unreadable (gone): the same.
        os.remove(tokens)
        rankd.signal(signal.SIGHUP)
        wait_until(lambda: f"cannot read {tokens}" in rankd.stderr(), what="the missing file logged")
        assert status_with("new-token") == 200
        assert "new-token" not in rankd.stderr() and "old-token" not in rankd.stderr()
    finally:
        rankd.stop()


def test_start_up_errors_name_the_file():
    empty = temp_path("rankd-tokens-")
    write_tokens(empty, "# no token yet\n   \n")
    bad = temp_path("rankd-tokens-")
    write_tokens(bad, "fine-token\nnot a token\n")
    for path, says in ((empty, f"--auth-token-file: {empty} holds no token"),
                       ("/nonexistent/tokens", "--auth-token-file: cannot read /nonexistent/tokens"),
                       (bad, f"--auth-token-file: {bad} line 2: not a token")):
        out = subprocess.run([RANKD, "serve", "--host", "127.0.0.1", "--port", "0", "--shards", "1",
                              "--plans", _env_plans(), "--enable-test-ops",
                              "--auth-token-file", path],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 1, (path, out.returncode, out.stderr)
        assert "start-up failed: " + says in out.stderr, out.stderr


def _env_plans():
    return demo_env()[1]


if __name__ == "__main__":
    run_tests([
        ("token on: right, wrong, missing, malformed; probes and metrics address open",
         test_token_on),
        ("token off: no header needed, none looked at", test_token_off),
        ("SIGHUP re-reads the file; emptied or gone keeps the old tokens", test_sighup_rereads_the_file),
        ("start-up errors name the file", test_start_up_errors_name_the_file),
    ])
