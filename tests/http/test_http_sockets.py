#!/usr/bin/env python3
"""Socket tests of src/http against http_test_server (python3 standard library only).

Usage: test_http_sockets.py PATH/TO/http_test_server [unittest args]

Every test talks HTTP over real loopback sockets; every wait is bounded by a socket
timeout; nothing asserts on speed.
"""
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import wait_until  # noqa: E402

SERVER_BIN = None
IO_TIMEOUT = 10.0


class Server:
    """One http_test_server process on a free loopback port."""

    def __init__(self, **opts):
        # Port 0: the kernel picks a port no other socket holds. A port chosen here and
        # passed in could be handed to a concurrent test too, and SO_REUSEPORT would
        # then let both servers share it.
        args = [SERVER_BIN, "--port", "0"]
        for k, v in opts.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=sys.stderr)
        line = self._readline(IO_TIMEOUT)
        if not line or not line.startswith("listening "):
            self.proc.kill()
            raise RuntimeError("server did not start: %r" % line)
        self.port = int(line.split()[1])

    def _readline(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        return self.proc.stdout.readline().decode().strip()

    def stop(self, expect_drained=True):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(IO_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        out = self.proc.stdout.read().decode()
        self.proc.stdout.close()
        if expect_drained:
            assert rc == 0, "server exited with %r" % rc
            assert "drained" in out, out
        return rc

    def connect(self, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(IO_TIMEOUT)
        s.connect(("127.0.0.1", self.port))
        return s

    def client(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=IO_TIMEOUT)

    def get_json(self, path, headers=None):
        c = self.client()
        try:
            c.request("GET", path, headers=headers or {})
            r = c.getresponse()
            return r.status, r, json.loads(r.read())
        finally:
            c.close()

    def stats(self):
        return self.get_json("/stats")[2]


class Response:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body)


class Reader:
    """Reads HTTP/1.1 responses off a raw socket (Content-Length framing only)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        _, status, reason = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(int(status), reason, headers, body)

    def closed(self):
        """True once the peer has closed (EOF or reset); False if data arrives instead."""
        try:
            if self.buf:
                return False
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        if data:
            self.buf += data
            return False
        return True


def request(method, path, headers=(), body=b"", version="1.1"):
    lines = ["%s %s HTTP/%s" % (method, path, version), "Host: test"]
    lines += ["%s: %s" % h for h in headers]
    if body and not any(h[0].lower() in ("content-length", "transfer-encoding") for h in headers):
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange(server, raw):
    """Sends raw bytes on a new connection, returns (first response, closed afterwards)."""
    s = server.connect()
    try:
        s.sendall(raw)
        r = Reader(s)
        resp = r.response()
        return resp, r.closed()
    finally:
        s.close()


MAIN = None


def setUpModule():
    global MAIN
    MAIN = Server(read_timeout_ms=1000, idle_timeout_ms=1500, max_body_bytes=65536)


def tearDownModule():
    MAIN.stop()


class KeepAliveTest(unittest.TestCase):
    def test_http11_reuses_the_connection(self):
        before = MAIN.stats()["accepted"]
        c = MAIN.client()
        socks = set()
        for i in range(5):
            c.request("POST", "/echo", body=b"n%d" % i, headers={"Content-Type": "text/plain"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.read(), b"n%d" % i)
            self.assertEqual(r.getheader("Connection"), "keep-alive")
            self.assertEqual(r.getheader("Content-Type"), "text/plain")
            socks.add(id(c.sock))
        c.close()
        self.assertEqual(len(socks), 1)
        # One connection for the five requests (plus the /stats connections themselves).
        self.assertEqual(MAIN.stats()["accepted"] - before, 2)

    def test_http10_closes_by_default(self):
        resp, closed = exchange(MAIN, request("GET", "/info", version="1.0"))
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.header("connection"), "close")
        self.assertFalse(resp.json()["keep_alive"])
        self.assertTrue(closed)

    def test_http10_keep_alive_on_request(self):
        s = MAIN.connect()
        r = Reader(s)
        for _ in range(2):
            s.sendall(request("GET", "/info", [("Connection", "keep-alive")], version="1.0"))
            resp = r.response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.header("connection"), "keep-alive")
            self.assertEqual(resp.json()["http"], "1.0")
        s.close()

    def test_http11_connection_close_is_honoured(self):
        resp, closed = exchange(MAIN, request("GET", "/info", [("Connection", "close")]))
        self.assertEqual(resp.header("connection"), "close")
        self.assertTrue(closed)

    def test_head_has_length_but_no_body(self):
        s = MAIN.connect()
        s.sendall(request("HEAD", "/big?kb=1") + request("GET", "/info"))
        r = Reader(s)
        # Reader would read the body by Content-Length: read the head by hand.
        while b"\r\n\r\n" not in r.buf:
            r._fill()
        head, r.buf = r.buf.split(b"\r\n\r\n", 1)
        self.assertIn(b"Content-Length: 1024", head)
        self.assertEqual(r.response().json()["method"], "GET")
        s.close()


class PipeliningTest(unittest.TestCase):
    def test_responses_in_request_order_even_when_the_first_is_slow(self):
        s = MAIN.connect()
        s.sendall(request("GET", "/sleep?ms=300", [("X-Request-Id", "p1")]) +
                  request("POST", "/echo", [("X-Request-Id", "p2")], b"two") +
                  request("GET", "/info", [("X-Request-Id", "p3")]) +
                  request("GET", "/sleep?ms=1", [("X-Request-Id", "p4")]))
        r = Reader(s)
        got = [r.response() for _ in range(4)]
        self.assertEqual([g.header("x-request-id") for g in got], ["p1", "p2", "p3", "p4"])
        self.assertEqual(got[0].json(), {"slept_ms": 300})
        self.assertEqual(got[1].body, b"two")
        self.assertEqual(got[2].json()["request_id"], "p3")
        s.close()

    def test_pipelined_requests_split_at_odd_boundaries(self):
        raw = b"".join(request("POST", "/echo", [("X-Request-Id", "s%d" % i)], b"b%d" % i)
                       for i in range(6))
        s = MAIN.connect()
        for i in range(0, len(raw), 7):
            s.sendall(raw[i:i + 7])
        r = Reader(s)
        for i in range(6):
            resp = r.response()
            self.assertEqual(resp.body, b"b%d" % i)
            self.assertEqual(resp.header("x-request-id"), "s%d" % i)
        s.close()


class TurnBudgetTest(unittest.TestCase):
    """Input read after a loop turn used its budget waits for the next turn (parks)."""

    def test_with_a_zero_budget_every_request_is_still_answered_in_order(self):
        # Budget 0: nearly every read parks, and each turn admits one step. Many
        # connections with pipelined requests and bodies must all come out right.
        srv = Server(turn_budget_us=0)
        try:
            socks = [srv.connect() for _ in range(12)]
            for n, s in enumerate(socks):
                s.sendall(b"".join(
                    request("POST", "/echo", [("X-Request-Id", "c%d-%d" % (n, i))],
                            b"body %d %d" % (n, i)) for i in range(5)))
            for n, s in enumerate(socks):
                r = Reader(s)
                for i in range(5):
                    resp = r.response()
                    self.assertEqual(resp.status, 200)
                    self.assertEqual(resp.header("x-request-id"), "c%d-%d" % (n, i))
                    self.assertEqual(resp.body, b"body %d %d" % (n, i))
                s.close()
            self.assertGreater(srv.stats()["parked_reads"], 0)
        finally:
            srv.stop()

    def test_busy_handlers_park_the_other_connections_and_all_are_served(self):
        # Each request keeps the loop busy for 2 ms, eight times the default budget:
        # connections ready in the same turn wait for later turns, none is lost.
        srv = Server()
        try:
            socks = [srv.connect() for _ in range(8)]
            for _ in range(3):
                for s in socks:
                    s.sendall(request("GET", "/spin?us=2000"))
                for s in socks:
                    resp = Reader(s).response()
                    self.assertEqual((resp.status, resp.body), (200, b"spun"))
            for s in socks:
                s.close()
            self.assertGreater(srv.stats()["parked_reads"], 0)
        finally:
            srv.stop()


class BodyTest(unittest.TestCase):
    def test_chunked_body_with_trailer(self):
        s = MAIN.connect()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n")
        s.sendall(b"6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n")
        s.sendall(request("GET", "/info"))
        r = Reader(s)
        self.assertEqual(r.response().body, b"hello world")
        self.assertEqual(r.response().status, 200)  # the next request still parses
        s.close()

    def test_expect_100_continue(self):
        s = MAIN.connect()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        r = Reader(s)
        interim = r.response()
        self.assertEqual(interim.status, 100)
        s.sendall(b"hello")
        final = r.response()
        self.assertEqual(final.status, 200)
        self.assertEqual(final.body, b"hello")
        s.close()

    def test_expect_100_continue_with_too_large_body_is_refused_at_once(self):
        resp, closed = exchange(MAIN, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n"
                                      b"Expect: 100-continue\r\n\r\n")
        self.assertEqual(resp.status, 413)
        self.assertEqual(resp.json()["error"]["code"], "payload_too_large")
        self.assertTrue(closed)

    def test_oversized_body_413(self):
        s = MAIN.connect()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n")
        s.sendall(b"x" * 200000)
        r = Reader(s)
        resp = r.response()
        self.assertEqual(resp.status, 413)
        self.assertEqual(resp.header("connection"), "close")
        self.assertEqual(resp.header("content-type"), "application/json")
        self.assertEqual(resp.json()["error"]["code"], "payload_too_large")
        self.assertTrue(r.closed())
        s.close()

    def test_oversized_chunked_body_413(self):
        s = MAIN.connect()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (16384, b"y" * 16384)
        try:
            for _ in range(8):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = Reader(s)
        resp = r.response()
        self.assertEqual(resp.status, 413)
        self.assertEqual(resp.json()["error"]["code"], "payload_too_large")
        s.close()

    def test_body_at_the_limit_is_accepted(self):
        c = MAIN.client()
        c.request("POST", "/echo", body=b"z" * 65536)
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(len(r.read()), 65536)
        c.close()

    def test_eof_in_the_middle_of_a_body(self):
        s = MAIN.connect()
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        s.shutdown(socket.SHUT_WR)
        r = Reader(s)
        resp = r.response()
        self.assertEqual(resp.status, 400)
        self.assertTrue(r.closed())
        s.close()


class HeadLimitTest(unittest.TestCase):
    def test_oversized_head_431(self):
        resp, closed = exchange(MAIN, request("GET", "/info", [("X-Big", "a" * 20000)]))
        self.assertEqual(resp.status, 431)
        self.assertEqual(resp.json()["error"]["code"], "headers_too_large")
        self.assertEqual(resp.header("connection"), "close")
        self.assertTrue(closed)

    def test_many_small_headers_431(self):
        headers = [("X-H%d" % i, "v" * 40) for i in range(400)]
        resp, closed = exchange(MAIN, request("GET", "/info", headers))
        self.assertEqual(resp.status, 431)
        self.assertTrue(closed)

    def test_head_just_under_the_limit_is_fine(self):
        resp, _ = exchange(MAIN, request("GET", "/info", [("X-Big", "a" * 15000)]))
        self.assertEqual(resp.status, 200)


class SmugglingTest(unittest.TestCase):
    CASES = {
        "cl_and_te": b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "te_and_cl": b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                     b"Content-Length: 5\r\n\r\n0\r\n\r\n",
        "duplicate_cl": b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                        b"Content-Length: 5\r\n\r\nhello",
        "bare_cr": b"GET /info HTTP/1.1\r\nHost: t\r\nX-A: b\rTransfer-Encoding: chunked\r\n\r\n",
        "bare_cr_request_line": b"GET /info HTTP/1.1\rHost: t\r\n\r\n",
        "folded": b"GET /info HTTP/1.1\r\nHost: t\r\nX-A: b\r\n c\r\n\r\n",
        "folded_tab": b"GET /info HTTP/1.1\r\nHost: t\r\nX-A: b\r\n\tc\r\n\r\n",
        "bare_cr_in_trailer": b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                              b"1\r\na\r\n0\r\nX-T: a\rb\r\n\r\n",
        "garbage": b"HELLO WORLD\r\n\r\n",
        "bad_chunk_size": b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"zz\r\nhello\r\n0\r\n\r\n",
    }
    KINDS = {"cl_and_te": "cl_and_te", "te_and_cl": "cl_and_te",
             "duplicate_cl": "duplicate_cl", "bare_cr": "bare_cr",
             "bare_cr_request_line": "bare_cr", "folded": "folded_header",
             "folded_tab": "folded_header", "bare_cr_in_trailer": "bare_cr",
             "garbage": "malformed", "bad_chunk_size": "malformed"}

    def test_each_attempt_gets_400_and_close_and_the_server_keeps_serving(self):
        for name, raw in self.CASES.items():
            with self.subTest(name):
                before = MAIN.stats()["rejects"][self.KINDS[name]]
                # Follow each attempt with a smuggled second request: it must never be answered.
                resp, closed = exchange(MAIN, raw + request("GET", "/info?smuggled=1"))
                self.assertEqual(resp.status, 400)
                body = resp.json()
                self.assertEqual(body["error"]["code"], "bad_request")
                self.assertTrue(body["error"]["message"])
                self.assertEqual(resp.header("connection"), "close")
                self.assertEqual(resp.header("content-type"), "application/json")
                self.assertTrue(resp.header("x-request-id"))
                self.assertTrue(closed, "connection left open after " + name)
                self.assertEqual(MAIN.stats()["rejects"][self.KINDS[name]], before + 1)
                status, _, info = MAIN.get_json("/info")  # others still served
                self.assertEqual(status, 200)

    def test_a_bad_connection_does_not_disturb_a_concurrent_one(self):
        good = MAIN.connect()
        good.sendall(request("GET", "/sleep?ms=200"))
        exchange(MAIN, self.CASES["bare_cr"])
        r = Reader(good)
        self.assertEqual(r.response().status, 200)
        good.sendall(request("GET", "/info"))
        self.assertEqual(r.response().status, 200)
        good.close()


class TimeoutTest(unittest.TestCase):
    def test_slowloris_head_gets_408_and_close(self):
        s = MAIN.connect()
        s.sendall(b"GET /info HTTP/1.1\r\n")
        r = Reader(s)
        s.settimeout(0.2)
        deadline = time.monotonic() + IO_TIMEOUT
        while not r.buf and time.monotonic() < deadline:
            try:
                s.sendall(b"X-Slow: a\r\n")  # progress, but never the end of the head
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                data = s.recv(65536)
                if not data:
                    break
                r.buf += data
            except socket.timeout:
                pass
        s.settimeout(IO_TIMEOUT)
        resp = r.response()
        self.assertEqual(resp.status, 408)
        self.assertEqual(resp.json()["error"]["code"], "request_timeout")
        self.assertEqual(resp.header("connection"), "close")
        self.assertTrue(r.closed())
        s.close()

    def test_slow_body_gets_408(self):
        resp, closed = exchange(MAIN, b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        self.assertEqual(resp.status, 408)
        self.assertTrue(closed)

    def test_idle_keep_alive_connection_is_closed(self):
        before = MAIN.stats()["idle_timeouts"]
        s = MAIN.connect()
        s.sendall(request("GET", "/info"))
        r = Reader(s)
        self.assertEqual(r.response().status, 200)
        self.assertTrue(r.closed())  # bounded by IO_TIMEOUT; the server's idle time is 1.5 s
        s.close()
        self.assertGreaterEqual(MAIN.stats()["idle_timeouts"], before + 1)

    def test_idle_time_counts_from_the_last_response(self):
        # Idle timeout 1.5 s. A second request at 1.0 s restarts it: the connection is
        # still open at 2.0 s (the first idle period would have ended at 1.5 s).
        s = MAIN.connect()
        r = Reader(s)
        t0 = time.monotonic()
        s.sendall(request("GET", "/info"))
        self.assertEqual(r.response().status, 200)
        # The stimulus is time itself: a client idle for 1.0 s, then for 1.0 s again.
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
        s.sendall(request("GET", "/info"))
        self.assertEqual(r.response().status, 200)
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
        s.sendall(request("GET", "/info"))
        self.assertEqual(r.response().status, 200)
        self.assertTrue(r.closed())
        s.close()

    def test_slow_handler_is_not_a_read_timeout(self):
        status, _, body = MAIN.get_json("/sleep?ms=1300")
        self.assertEqual(status, 200)


class RequestIdTest(unittest.TestCase):
    def test_echoed_when_valid(self):
        status, r, body = MAIN.get_json("/info", {"X-Request-Id": "abc-123"})
        self.assertEqual(r.getheader("X-Request-Id"), "abc-123")
        self.assertEqual(body["request_id"], "abc-123")

    def test_128_characters_are_echoed(self):
        rid = "r" * 128
        status, r, body = MAIN.get_json("/info", {"X-Request-Id": rid})
        self.assertEqual(r.getheader("X-Request-Id"), rid)

    def test_generated_when_missing_unique_and_exposed(self):
        ids = set()
        for _ in range(5):
            status, r, body = MAIN.get_json("/info")
            rid = r.getheader("X-Request-Id")
            self.assertTrue(rid)
            self.assertEqual(body["request_id"], rid)
            ids.add(rid)
        self.assertEqual(len(ids), 5)

    def test_too_long_or_non_printable_ids_are_replaced(self):
        for bad in [b"r" * 129, b"caf\xc3\xa9", b"a\tb"]:
            with self.subTest(bad):
                resp, _ = exchange(MAIN, b"GET /info HTTP/1.1\r\nHost: t\r\nX-Request-Id: " + bad +
                                   b"\r\nConnection: close\r\n\r\n")
                self.assertEqual(resp.status, 200)
                rid = resp.header("x-request-id")
                self.assertTrue(rid)
                self.assertNotEqual(rid.encode("latin-1"), bad)
                self.assertEqual(resp.json()["request_id"], rid)

    def test_error_responses_carry_the_id(self):
        resp, _ = exchange(MAIN, b"GET /info HTTP/1.1\r\nX-Request-Id: e-1\r\nX-A: b\r\n c\r\n\r\n")
        self.assertEqual(resp.status, 400)
        self.assertEqual(resp.header("x-request-id"), "e-1")
        status, r, body = MAIN.get_json("/nope", {"X-Request-Id": "e-2"})
        self.assertEqual(status, 404)
        self.assertEqual(r.getheader("X-Request-Id"), "e-2")
        self.assertEqual(body["error"]["code"], "not_found")


class HandlerContractTest(unittest.TestCase):
    def test_dropped_responder_answers_500(self):
        status, r, body = MAIN.get_json("/drop")
        self.assertEqual(status, 500)
        self.assertEqual(body["error"]["code"], "internal")

    def test_answer_after_the_client_left_is_harmless(self):
        for _ in range(3):
            s = MAIN.connect()
            s.sendall(request("GET", "/sleep?ms=150"))
            s.close()
        # The late answers happen (they must be no-ops) once every /sleep has answered.
        wait_until(lambda: MAIN.stats()["sleeping"] == 0, what="the three late answers")
        status, _, _ = MAIN.get_json("/info")
        self.assertEqual(status, 200)


class BackpressureTest(unittest.TestCase):
    def test_a_client_that_does_not_read_stops_its_own_reads(self):
        n = 32
        before = MAIN.stats()["big_served"]
        s = MAIN.connect(rcvbuf=65536)
        s.sendall(b"".join(request("GET", "/big?kb=1024", [("X-Request-Id", "b%d" % i)])
                           for i in range(n)))
        # It must stop after a few. No event marks "would have run ahead", so the stimulus
        # is time: a second in which a server without backpressure makes all 32 MiB.
        served = 0
        for _ in range(10):
            time.sleep(0.1)
            served = MAIN.stats()["big_served"] - before
        self.assertLess(served, 12, "server produced %d MiB for a client that reads nothing" % served)
        r = Reader(s)
        for i in range(n):
            resp = r.response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.header("x-request-id"), "b%d" % i)
            self.assertEqual(len(resp.body), 1024 * 1024)
        s.close()
        self.assertEqual(MAIN.stats()["big_served"] - before, n)


class MaxConnectionsTest(unittest.TestCase):
    def test_accepting_pauses_at_the_cap_and_resumes(self):
        srv = Server(max_connections=2)
        try:
            a, b = srv.connect(), srv.connect()
            ra, rb = Reader(a), Reader(b)
            for s, r in ((a, ra), (b, rb)):
                s.sendall(request("GET", "/info"))
                self.assertEqual(r.response().status, 200)
            c = srv.connect()  # the kernel completes the handshake; we do not accept
            c.sendall(request("GET", "/info"))
            c.settimeout(0.5)
            with self.assertRaises(socket.timeout):
                c.recv(1)
            c.settimeout(IO_TIMEOUT)
            a.close()
            rc = Reader(c)
            self.assertEqual(rc.response().status, 200)
            b.sendall(request("GET", "/stats"))
            st = rb.response().json()
            self.assertGreaterEqual(st["accept_paused"], 1)
            self.assertEqual(st["open"], 2)
            b.close()
            c.close()
        finally:
            srv.stop()


class DrainTest(unittest.TestCase):
    def test_drain_finishes_requests_closes_idle_and_exits(self):
        srv = Server(drain_timeout_ms=5000)
        idle = srv.connect()
        ri = Reader(idle)
        idle.sendall(request("GET", "/info"))
        self.assertEqual(ri.response().status, 200)
        busy = srv.connect()
        rb = Reader(busy)
        busy.sendall(request("GET", "/sleep?ms=700"))
        # The request has been read (its handler waits) before the drain starts.
        wait_until(lambda: srv.stats()["sleeping"] == 1, what="the /sleep request to be read")
        srv.proc.send_signal(signal.SIGTERM)
        self.assertTrue(ri.closed())  # idle: closed at once
        resp = rb.response()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.header("connection"), "close")
        self.assertTrue(rb.closed())
        idle.close()
        busy.close()
        self.assertEqual(srv.stop(), 0)
        with self.assertRaises(ConnectionRefusedError):
            srv.connect().close()

    def test_drain_timeout_closes_hard(self):
        srv = Server(drain_timeout_ms=300)
        busy = srv.connect()
        busy.sendall(request("GET", "/sleep?ms=5000"))
        wait_until(lambda: srv.stats()["sleeping"] == 1, what="the /sleep request to be read")
        srv.proc.send_signal(signal.SIGTERM)
        self.assertTrue(Reader(busy).closed())
        busy.close()
        self.assertEqual(srv.stop(), 0)


class PortCheckTest(unittest.TestCase):
    def test_a_taken_port_is_refused_with_a_clear_error(self):
        p = subprocess.run([SERVER_BIN, "--port", str(MAIN.port)], capture_output=True,
                           timeout=IO_TIMEOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"already in use", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    SERVER_BIN = os.path.abspath(sys.argv[1])
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)
