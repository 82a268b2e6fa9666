"""Bad input, generated: a real rankd (and a real redis-server with demo data) gets
thousands of mutated /rank bodies, mutated /events bodies (the demo schema's event types)
and mutated raw HTTP requests from a seeded generator.
Every answer must be a well-formed response (a JSON error body naming what was wrong
for a 4xx), the server must never crash, and it must serve a good request after every
batch. Bounded in count and time; the seed is printed so that a failure can be replayed
(RANKD_FUZZ_SEED). Under ASan+UBSan this is where memory errors would show."""
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import SharedServer, run_tests  # noqa: E402

SEED = int(os.environ.get("RANKD_FUZZ_SEED", "20261126"))
BODIES = int(os.environ.get("RANKD_FUZZ_BODIES", "4000"))
RAW = int(os.environ.get("RANKD_FUZZ_RAW", "2000"))
EVENT_BODIES = int(os.environ.get("RANKD_FUZZ_EVENT_BODIES", "1500"))
ERROR_CODES = {"bad_request", "bad_event", "unknown_plan", "invalid_param", "not_found",
               "method_not_allowed", "payload_too_large", "headers_too_large", "request_timeout",
               "unavailable", "deadline_exceeded", "backend_error", "internal", "invalid_cursor",
               "cursor_expired"}


server = SharedServer(shards=2, seed_users=50)


def still_serves(s):
    status, _, body = s.rank({"plan": "fixed_rank", "user_id": 1})
    assert status == 200 and body["count"] == 20, (status, body)
    assert s.proc.poll() is None, s.stderr()


# --- /rank bodies --------------------------------------------------------------------

PLANS = ["feed", "fixed_rank", "diamond", "viewer_filter", "complex_dag", "nope", ""]
WEIRD = [None, True, False, 0, -1, 1.5, 1e308, -1e308, 2**63, -(2**63) - 1, 2**64, "", "x" * 300,
         "1", "\u00e9\u4e2d\U0001f600", [], {}, [1, 2], {"a": {"b": {"c": 1}}}, "NaN", 0.0, -0.0]
KEYS = ["plan", "user_id", "params", "deadline_ms", "explain", "extra", "", "PLAN", "page_size",
        "cursor"]
PARAMS = ["weight", "limit", "n", "min_likes", "fanout", "nope", ""]


def random_body(rng):
    """A JSON value shaped like a /rank request, with random parts wrong."""
    body = {"plan": rng.choice(PLANS), "user_id": rng.choice([1, 2, 17, 49, rng.randrange(-5, 10**6)])}
    for _ in range(rng.randrange(0, 4)):
        key = rng.choice(KEYS)
        if key == "params":
            body["params"] = {rng.choice(PARAMS): rng.choice(WEIRD + [rng.uniform(-1e3, 1e3)])
                              for _ in range(rng.randrange(0, 4))}
        elif key == "deadline_ms":
            body[key] = rng.choice([1, 5, 50, 200, 0, -3, 10**9, 1.5, "100", None])
        elif key == "page_size":
            body[key] = rng.choice([1, 3, 20, 500, 0, 501, -1, 2**63, 1.5, "20", None])
        else:
            body[key] = rng.choice(WEIRD)
    return json.dumps(body).encode()


def mutate_bytes(rng, data):
    """Byte-level damage: flips, cuts, duplications, insertions, deep nesting."""
    data = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        what = rng.randrange(7)
        pos = rng.randrange(len(data) + 1)
        if what == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif what == 1:
            del data[pos:pos + rng.randrange(1, 8)]
        elif what == 2:
            data[pos:pos] = data[pos:pos + rng.randrange(1, 16)] * rng.randrange(1, 4)
        elif what == 3:
            data[pos:pos] = rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\\u",
                                        b"\x00", b"\xff", b"\xc3", b"1e999", b"-", b"null", b" "])
        elif what == 4:
            depth = rng.choice([10, 100, 2000, 20000])
            data[pos:pos] = b"[" * depth + b"]" * (depth if rng.random() < 0.5 else 0)
        elif what == 5:
            data = data[:pos]
        else:
            data[pos:pos] = b'"' + b"a" * rng.choice([1, 1000, 100000]) + b'"'
    return bytes(data)


def check_answer(status, headers, data, what, ok_body):
    """`ok_body(body)`: whether a 200's JSON body is well formed."""
    assert status in (200, 400, 404, 413, 422, 502, 503, 504), (status, what, data[:200])
    body = json.loads(data)  # every answer, error or not, is JSON
    if status != 200:
        assert body["error"]["code"] in ERROR_CODES, (body, what)
        assert body["error"]["message"], (body, what)
    else:
        assert ok_body(body), (body, what)
    assert headers.get("x-request-id"), what


def send_mutated(s, path, rng, count, make_body, ok_body):
    """Posts `count` bodies of make_body(rng), most of them damaged (mutate_bytes), on one
    connection (a new one when the server closes it), checking every answer and that
    the server still serves a good request every 250; returns {code or "ok": answers}."""
    conn = s.conn(10)
    seen = {}
    for i in range(count):
        data = make_body(rng)
        if rng.random() < 0.6:
            data = mutate_bytes(rng, data)
        try:
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            status, headers, out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        except (ConnectionError, OSError):
            # The server may close a connection after an error; nothing else is allowed.
            conn.close()
            conn = s.conn(10)
            continue
        check_answer(status, headers, out, data[:200], ok_body)
        code = json.loads(out)["error"]["code"] if status != 200 else "ok"
        seen[code] = seen.get(code, 0) + 1
        if headers.get("connection", "").lower() == "close":
            conn.close()
            conn = s.conn(10)
        if i % 250 == 0:
            still_serves(s)
    conn.close()
    print("  answers:", dict(sorted(seen.items())))
    still_serves(s)
    return seen


def test_mutated_rank_bodies_get_clear_answers():
    s = server()
    rng = random.Random(SEED)
    print(f"  seed {SEED}, {BODIES} bodies")
    seen = send_mutated(s, "/rank", rng, BODIES, random_body, lambda body: isinstance(
        body["items"], list) and body["count"] == len(body["items"]))
    # The generator reaches past the JSON parser: some requests run, some fail checks.
    assert seen.get("ok", 0) > 0 and seen.get("bad_request", 0) > 0, seen
    assert seen.get("invalid_param", 0) + seen.get("unknown_plan", 0) > 0, seen


# --- /events bodies (the demo schema's impression and click) --------------------------

EVENT_TYPES = ["impression", "click", "dwell", ""]
EVENT_KEYS = ["type", "user_id", "item_id", "value", "ts_ms", "served_id", "event_id", "extra"]


def random_events_body(rng):
    """A JSON value shaped like a /events request, with random parts wrong."""
    now = int(time.time() * 1000)
    events = []
    for _ in range(rng.choice([0, 1, 3, 20])):
        ev = {"type": rng.choice(EVENT_TYPES[:2] * 4 + EVENT_TYPES),
              "user_id": rng.randrange(0, 50), "item_id": rng.randrange(0, 10**6)}
        for _ in range(rng.randrange(0, 3)):
            key = rng.choice(EVENT_KEYS)
            if key == "ts_ms":
                ev[key] = rng.choice([now, now - 3600 * 1000, now + 299000, now + 301000,
                                      now - 8 * 86400 * 1000, 0, -1, 2**63, 1.5, "now", None])
            elif key == "served_id":
                ev[key] = rng.choice(["0123456789abcdef" * 2, "0123456789ABCDEF" * 2, "", None, 7])
            else:
                ev[key] = rng.choice(WEIRD)
        events.append(ev)
    return json.dumps({"events": events} if rng.random() < 0.9 else rng.choice(WEIRD)).encode()


def test_mutated_event_bodies_get_clear_answers():
    s = server()
    rng = random.Random(SEED + 2)
    print(f"  seed {SEED + 2}, {EVENT_BODIES} /events bodies")
    seen = send_mutated(s, "/events", rng, EVENT_BODIES, random_events_body,
                        lambda body: isinstance(body.get("accepted"), int))
    # Some are accepted (written to Redis), some fail the schema, some the JSON.
    assert all(seen.get(k, 0) > 0 for k in ("ok", "bad_event", "bad_request")), seen


# --- raw HTTP requests ---------------------------------------------------------------

GOOD_REQUESTS = [
    b"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 34\r\n\r\n"
    b'{"plan":"fixed_rank","user_id":1}\n',
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"GET /plans/feed HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: abc\r\n\r\n",
    b"POST /rank HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'22\r\n{"plan":"fixed_rank","user_id":1}\n\r\n0\r\n\r\n',
    b"GET /metrics HTTP/1.0\r\n\r\n",
]


def exchange_raw(port, data, timeout=5.0):
    """Sends data, half-closes, reads until the server closes. Returns the bytes read."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        try:
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = b""
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
        return got


def test_mutated_raw_requests_never_break_the_server():
    s = server()
    rng = random.Random(SEED + 1)
    print(f"  seed {SEED + 1}, {RAW} raw requests")
    statuses = {}
    for i in range(RAW):
        data = mutate_bytes(rng, rng.choice(GOOD_REQUESTS))
        if rng.random() < 0.3:  # pipelined behind a good one
            data = rng.choice(GOOD_REQUESTS) + data
        got = exchange_raw(s.port, data)
        # Whatever came back is a sequence of HTTP/1.1 responses (or nothing at all,
        # when the bytes never made a request line).
        if got:
            assert got.startswith(b"HTTP/1.1 "), (data[:200], got[:200])
            status = int(got[9:12])
            assert 100 <= status < 600, got[:200]
            statuses[status] = statuses.get(status, 0) + 1
        if i % 100 == 0:
            still_serves(s)
    print("  first statuses:", dict(sorted(statuses.items())))
    assert statuses.get(400, 0) > 0 and statuses.get(200, 0) > 0, statuses
    still_serves(s)


if __name__ == "__main__":
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    run_tests(tests)
