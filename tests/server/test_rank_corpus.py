"""A recorded corpus of requests: every route and every error code of docs/api.md, sent
raw to a real rankd (demo data, experiments, pages, the served log, a token, a metrics
address with the console), each answer compared with the one the server gave when the
corpus was recorded (tests/server/rank_corpus.expected). It keeps the answers
byte-identical through refactorings of the request path (issue #43).

What varies from run to run is normalized before comparing: took_us, served_id, cursors,
X-Request-Id, Server-Timing, the access log's took_us and request ids; the bodies of
/metrics and /console/api/metrics (counters) are left out, their status and headers kept.

RANKD_CORPUS_WRITE=1 rewrites the expected file from the build under test (do it with
the build the answers must stay identical to).
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (Rankd, Redis, demo_data, free_port, plans_dir, run_tests,  # noqa: E402
                     simple_plan, sleep_plan, temp_path, wait_until)

EXPECTED = os.path.join(os.path.dirname(__file__), "rank_corpus.expected")
TOKEN = "corpus-token"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
ORIGIN = "http://app.example"

PLANS = {
    "slow": sleep_plan("slow", 300),
    "failing": simple_plan("failing", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}},
        {"node_id": "boom", "op": "sleep", "inputs": ["src"],
         "params": {"duration_ms": 1, "fail_after_sleep": True}}], "boom"),
    "viewer_only": simple_plan("viewer_only", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "redis_default"}}], "v"),
    "viewer_dead": simple_plan("viewer_dead", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "dead"}}], "v"),
    "many": simple_plan("many", [
        {"node_id": "a", "op": "fixed_source", "inputs": [], "params": {"count": 60}}], "a",
        columns=["id", "score"]),
    "bounded": simple_plan("bounded", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 50}},
        {"node_id": "t", "op": "take", "inputs": ["src"], "params": {"count": {"param": "n"}}}],
        "t", params={"n": {"type": "i64", "default": 5, "min": 1, "max": 20}}),
}

# Every variant and a shadow that always runs: the answers carry experiment and variant.
EXPERIMENTS = {"experiments": [
    {"name": "fw", "plan": "feed", "salt": "fw-salt",
     "variants": [{"name": "heavy", "plan": "feed", "params": {"weight": 0.9}, "weight": 3000},
                  {"name": "light", "plan": "home_light", "weight": 3000}],
     "shadow": [{"plan": "rerank", "percent": 100.0, "compare_top": 10}]},
    {"name": "bx", "plan": "bounded", "salt": "bx-salt",
     "variants": [{"name": "three", "plan": "bounded", "params": {"n": 3}, "weight": 5000}]},
]}


def rank(body, headers="", raw_body=None):
    data = raw_body if raw_body is not None else json.dumps(body)
    return (f"POST /rank HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH}{headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n{data}")


def get(path, headers="", method="GET", auth=True):
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{AUTH if auth else ''}{headers}\r\n"


def corpus():
    """(name, port: "main" | "metrics", request text or a function of the answers so far)."""
    out = []

    def add(name, req, port="main"):
        out.append((name, port, req))

    # /rank: plans, params, explain, user id types, experiments, forced variants, log.
    for user in (1, 2, 3, 7, 11):
        add(f"feed user {user}", rank({"plan": "feed", "user_id": user}))
    add("home_light explain", rank({"plan": "home_light", "user_id": 5, "explain": True}))
    add("feed params", rank({"plan": "feed", "user_id": 4, "params": {"weight": 0.2}}))
    add("bounded params", rank({"plan": "bounded", "user_id": 9, "params": {"n": 7}}))
    add("bounded user 10", rank({"plan": "bounded", "user_id": 10}))
    for plan in ("complex_dag", "diamond", "mixed_pipeline", "parallel_fanout", "rerank",
                 "simple_viewer", "viewer_filter", "feed_quality", "e2e_rank", "fixed_rank",
                 "fixed_simple"):
        add(f"plan {plan}", rank({"plan": plan, "user_id": 6}))
    add("feed forced heavy", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: fw=heavy\r\n"))
    add("feed forced light", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: fw=light, bx=three\r\n"))
    add("feed forced control", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: fw=control\r\n"))
    add("feed forced other", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: bx=three\r\n"))
    add("forced bad pair", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: fw\r\n"))
    add("forced no experiment", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: zz=a\r\n"))
    add("forced no variant", rank({"plan": "feed", "user_id": 1}, "X-Rankd-Variant: fw=zz\r\n"))
    add("forced on no experiment", rank({"plan": "home_light", "user_id": 1}, "X-Rankd-Variant: fw=heavy\r\n"))
    add("feed log", rank({"plan": "feed", "user_id": 8, "log": True}))
    add("feed priority", rank({"plan": "feed", "user_id": 8, "priority": "critical"}))
    add("feed deadline", rank({"plan": "feed", "user_id": 8, "deadline_ms": 5000}))
    add("experiment bad param", rank({"plan": "feed", "user_id": 2, "params": {"weight": "x"}}))
    add("experiment variant param", rank({"plan": "bounded", "user_id": 2, "params": {"n": 30}}))
    # Pages: a chain to its end, a chain with another page size, errors.
    add("page 1", rank({"plan": "many", "user_id": 1, "page_size": 25}))
    for i in (2, 3):
        add(f"page {i}", lambda prev: rank({"plan": "many", "user_id": 1, "cursor": prev["cursor"]}))
    add("feed page 1 explain", rank({"plan": "feed", "user_id": 2, "page_size": 7, "explain": True,
                                     "log": True}))
    add("feed page 2 size 4", lambda prev: rank({"plan": "feed", "user_id": 2, "page_size": 4,
                                                 "cursor": prev["cursor"]}))
    add("feed page of another user", lambda prev: rank({"plan": "feed", "user_id": 3,
                                                        "cursor": prev["cursor"]}))
    add("one page", rank({"plan": "many", "user_id": 1, "page_size": 100}))
    add("page_size 0", rank({"plan": "many", "user_id": 1, "page_size": 0}))
    add("cursor garbage", rank({"plan": "many", "user_id": 1, "cursor": "abc"}))
    add("page 1 to expire", rank({"plan": "many", "user_id": 4, "page_size": 10}))
    add("cursor expired", lambda prev: ("flush pages", rank({"plan": "many", "user_id": 4,
                                                             "cursor": prev["cursor"]})))
    add("variant page", rank({"plan": "feed", "user_id": 1, "page_size": 5},
                             "X-Rankd-Variant: fw=light\r\n"))
    add("variant page 2", lambda prev: rank({"plan": "feed", "user_id": 1, "cursor": prev["cursor"]}))
    # /rank errors.
    add("bad json", rank(None, raw_body="{nope"))
    add("missing plan", rank({"user_id": 1}))
    add("unknown field", rank({"plan": "feed", "user_id": 1, "wat": 1}))
    add("unknown plan", rank({"plan": "nope", "user_id": 1}))
    add("user id type", rank({"plan": "feed", "user_id": "abc"}))
    add("invalid param", rank({"plan": "bounded", "user_id": 1, "params": {"n": 99}}))
    add("unknown param", rank({"plan": "bounded", "user_id": 1, "params": {"zz": 1}}))
    add("deadline exceeded", rank({"plan": "slow", "user_id": 1, "deadline_ms": 30}))
    add("internal", rank({"plan": "failing", "user_id": 1}))
    add("backend error", rank({"plan": "viewer_only", "user_id": 424242}))
    add("unavailable", rank({"plan": "viewer_dead", "user_id": 1}))
    add("bad deadline", rank({"plan": "feed", "user_id": 1, "deadline_ms": -1}))
    add("bad priority", rank({"plan": "feed", "user_id": 1, "priority": "urgent"}))
    # Other routes and their errors.
    add("healthz", get("/healthz"))
    add("healthz head", get("/healthz", method="HEAD"))
    add("readyz", get("/readyz"))
    add("metrics", get("/metrics"))
    add("plans", get("/plans"))
    add("plan", get("/plans/home_light"))
    add("plan unknown", get("/plans/nope"))
    add("schema", get("/schema"))
    add("experiments", get("/experiments"))
    add("console on main", get("/console"))
    add("no route", get("/nope"))
    add("method not allowed", get("/rank"))
    add("method not allowed plans", get("/plans", method="DELETE"))
    add("unauthorized", get("/plans", auth=False))
    add("unauthorized rank", get("/rank", auth=False, method="POST"))
    add("misdirected", "GET /plans HTTP/1.1\r\nHost: evil.example\r\n" + AUTH + "\r\n")
    add("forbidden origin", get("/plans", "Origin: http://evil.example\r\n"))
    add("listed origin", get("/plans", f"Origin: {ORIGIN}\r\n"))
    add("preflight", get("/rank", f"Origin: {ORIGIN}\r\nAccess-Control-Request-Method: POST\r\n",
                         method="OPTIONS", auth=False))
    add("rank listed origin", rank({"plan": "bounded", "user_id": 1}, f"Origin: {ORIGIN}\r\n"))
    add("rank unauthorized", rank({"plan": "bounded", "user_id": 1}).replace(AUTH, ""))
    # Errors the HTTP layer answers before any route.
    add("bad request line", "NOPE\r\n\r\n")
    add("payload too large", "POST /rank HTTP/1.1\r\nHost: 127.0.0.1\r\n" + AUTH +
        "Content-Length: 2000000\r\n\r\n")
    add("headers too large", "GET /plans HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + "a" * 70000 + "\r\n\r\n")
    add("request timeout", "GET /plans HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    # The metrics address, with the console.
    add("m healthz", get("/healthz", auth=False), "metrics")
    add("m readyz", get("/readyz", auth=False), "metrics")
    add("m metrics", get("/metrics", auth=False), "metrics")
    add("m console", get("/console", auth=False), "metrics")
    add("m console index", get("/console/index.html", auth=False), "metrics")
    add("m console missing", get("/console/nope.js", auth=False), "metrics")
    add("m console metrics", get("/console/api/metrics"), "metrics")
    add("m console metrics no token", get("/console/api/metrics", auth=False), "metrics")
    add("m rank", rank({"plan": "bounded", "user_id": 2}), "metrics")
    add("m plans", get("/plans"), "metrics")
    add("m no route", get("/nope", auth=False), "metrics")
    add("main metrics elsewhere", get("/metrics"))
    return out


def exchange(port, text, timeout=5.0):
    """Sends one request on its own connection; returns (status line, headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(text.encode())
        data = b""
        while True:
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                head = data[:head_end].decode()
                length = 0
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.lower() == "content-length":
                        length = int(v)
                if " 204 " in head.split("\r\n")[0] or text.startswith("HEAD "):
                    length = 0
                if len(data) >= head_end + 4 + length:
                    break
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    return lines[0], lines[1:], body


VOLATILE_HEADERS = {"x-request-id", "server-timing", "date"}
VOLATILE_BODIES = {"m metrics", "metrics", "m console metrics", "m console metrics no token"}


def normalize(name, status, headers, body):
    hs = []
    for h in headers:
        k, _, v = h.partition(":")
        if k.lower() in VOLATILE_HEADERS:
            v = " *"
        if k.lower() == "content-length" and name in VOLATILE_BODIES:
            v = " *"
        hs.append(f"{k}:{v}")
    if name in VOLATILE_BODIES:
        text = f"<{len(body) > 0} bytes>"
    else:
        text = body.decode(errors="replace")
        text = re.sub(r'"(took_us|start_us)":\d+', r'"\1":0', text)
        text = re.sub(r'"served_id":"[^"]*"', '"served_id":"*"', text)
        text = re.sub(r'"cursor":"[^"]*"', '"cursor":"*"', text)
        if "took_us" in text or "cursor" in text:  # the body's length varies with them
            hs = [h if not h.lower().startswith("content-length:") else "Content-Length: *" for h in hs]
    return {"name": name, "status": status, "headers": hs, "body": text}


def normalize_access_log(text):
    out = []
    for line in text.splitlines():
        rec = json.loads(line)
        rec["took_us"] = 0
        rec["request_id"] = "*"
        out.append(json.dumps(rec, sort_keys=True))
    return out


def run_corpus():
    redis = Redis()
    demo_data(redis, 50)
    redis.execute("SET", "user:424242", "not a hash")
    d = plans_dir(PLANS)
    with open(os.path.join(d, "experiments.json"), "w") as f:
        json.dump(EXPERIMENTS, f)
    tokens = temp_path("rankd-corpus-tokens-")
    with open(tokens, "w") as f:
        f.write(TOKEN + "\n")
    served = temp_path("rankd-corpus-served-")
    access = temp_path("rankd-corpus-access-")
    mport = free_port()
    srv = Rankd(d, redis=redis, stdout_path=access, extra_args=[
        "--redis", f"dead=redis://127.0.0.1:{free_port()}",
        "--auth-token-file", tokens, "--metrics-host", "127.0.0.1", "--metrics-port", str(mport),
        "--console", "--allowed-origins", ORIGIN, "--allow-forced-variants",
        "--allow-forced-logging", "--allow-priority", "--served-log", f"f=file://{served}?max_mb=16&keep=1",
        "--access-log", "--read-timeout-ms", "400", "--deadline-ms", "5000"])
    answers = []
    prev = {}
    try:
        for name, port, req in corpus():
            if callable(req):
                req = req(prev)
            if isinstance(req, tuple):  # (action, request)
                action, req = req
                assert action == "flush pages"
                for key in redis.execute("KEYS", "rankd:page:*"):
                    redis.execute("DEL", key)
            status, headers, body = exchange(srv.port if port == "main" else mport, req)
            answers.append(normalize(name, status, headers, body))
            if body.startswith(b"{") and status.endswith("200 OK"):
                prev = json.loads(body)
    finally:
        srv.stop()  # the drain writes every access log line before the exit
    with open(access) as f:
        log = normalize_access_log(f.read())
    return {"answers": answers, "access_log": log}


def test_answers_are_those_recorded():
    got = run_corpus()
    if os.environ.get("RANKD_CORPUS_WRITE"):
        with open(EXPECTED, "w") as f:
            json.dump(got, f, indent=1)
            f.write("\n")
        return
    with open(EXPECTED) as f:
        want = json.load(f)
    assert len(got["answers"]) == len(want["answers"]), "the corpus changed: record it again"
    bad = []
    for g, w in zip(got["answers"], want["answers"]):
        if g != w:
            bad.append(f"{w['name']}:\n  want {json.dumps(w)}\n  got  {json.dumps(g)}")
    assert not bad, "answers differ from the recording:\n" + "\n".join(bad)
    assert got["access_log"] == want["access_log"], (
        "access log differs:\n" + "\n".join(f"want {w}\ngot  {g}" for w, g in
                                           zip(want["access_log"], got["access_log"]) if w != g))


if __name__ == "__main__":
    run_tests([("answers are those recorded", test_answers_are_those_recorded)])
