"""Fault tests of the HTTP limits (docs/operations.md, "HTTP limits"): a real rankd on
loopback pushed past each bound by misbehaving clients. Every test asserts that memory
stays bounded (rankd's VmHWM from /proc), that the limit's metric counts the hits, and
that rankd still serves afterwards. Every wait is bounded; nothing asserts on speed.
"""
import os
import re
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (Rankd, free_port, metric_value, plans_dir, proc_status_kib, run_tests,  # noqa: E402
                     simple_plan, wait_until)

MIB = 1024 * 1024

# Under ASan, freed memory waits in a quarantine (256 MiB by default) and would count as
# RSS: keep it small so that the memory bounds below mean the same in every build.
os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16"

PLANS = {
    # ~600 KB of JSON per answer: a big response for the slow-reader tests.
    "big": simple_plan("big", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 20000}}], "src"),
}
PLANS_DIR = plans_dir(PLANS)



def limit_hits(rankd, limit):
    return metric_value(rankd.metrics(), "rankd_http_limit_hits_total", limit=limit) or 0.0


def healthz_fresh(rankd):
    status, _, body = rankd.request("GET", "/healthz", timeout=10)
    assert status == 200, (status, body)


def connect(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def flood(port, request, conns, seconds, read=True):
    """`conns` connections each write `request` pipelined as fast as rankd takes it,
    reading (and counting) the answers when `read`. Returns the bytes read."""
    stop = time.monotonic() + seconds
    got = [0] * conns
    burst = request * 16

    def one(i):
        s = connect(port)
        s.setblocking(False)
        pending = b""
        try:
            while time.monotonic() < stop:
                r, w, _ = select.select([s] if read else [], [s], [], 0.05)
                try:
                    if w:
                        if not pending:
                            pending = burst
                        pending = pending[s.send(pending):]
                    if r:
                        d = s.recv(1 << 20)
                        if not d:
                            return
                        got[i] += len(d)
                except BlockingIOError:
                    pass
        except OSError:
            return
        finally:
            s.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 10)
    return sum(got)


# --- (a) the pipelining flood -------------------------------------------------------

def test_pipelined_metrics_flood_keeps_memory_bounded():
    rankd = Rankd(PLANS_DIR)
    try:
        req = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"a" * 12 * 1024 + b"\r\n\r\n"
        result = []
        t = threading.Thread(target=lambda: result.append(flood(rankd.port, req, conns=8, seconds=10)))
        t.start()
        # Sample points within the 10 s flood (the stimulus), not waits for an event.
        time.sleep(3)
        warm = proc_status_kib(rankd.proc.pid, "VmRSS")
        time.sleep(5)
        # What the shard holds of the flood's input, mid-flood: each connection at most
        # its unparsed-input bound (16 x 16 KiB) plus one read.
        held = metric_value(rankd.metrics(), "rankd_http_buffered_input_bytes")
        assert held is not None and held <= 8 * (256 + 64) * 1024, f"shard holds {held} bytes of input"
        t.join(30)
        hwm = proc_status_kib(rankd.proc.pid, "VmHWM")
        print(f"     flood: read {result[0] // MIB} MiB of answers, rankd VmRSS {warm // 1024} MiB "
              f"after 3 s, VmHWM {hwm // 1024} MiB", flush=True)
        assert result[0] > 0, "the flood got no answers at all"
        assert hwm < 256 * 1024, f"rankd peak RSS {hwm // 1024} MiB >= 256 MiB"
        # Bounded means flat once the queues are full, however fast this machine is
        # (before the fix RSS grew with every byte the flood sent).
        assert hwm - warm < 16 * 1024, f"RSS kept growing: {warm // 1024} -> {hwm // 1024} MiB"
        healthz_fresh(rankd)
    finally:
        rankd.stop()


# --- (b) slow readers past the shard's output budget -----------------------------

def rank_request(plan, rid="", close=False):
    body = b'{"plan":"%s","user_id":1}' % plan.encode()
    extra = b"X-Request-Id: %s\r\n" % rid.encode() if rid else b""
    if close:
        extra += b"Connection: close\r\n"
    return (b"POST /rank HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: %d\r\n\r\n%s"
            % (extra, len(body), body))


def closed_by_server(socks, answers, stall, cap=180):
    """For each socket, whether the server closed it (EOF or reset) before all its
    `answers` arrived. Reads everything: a closed socket's last bytes still come first.
    Fails when no byte arrives on any of them for `stall` seconds (the server stopped
    serving them), or after `cap` seconds in all: a slow build that keeps answering
    (TSan on a busy machine makes ~600 KB answers slowly) is not a stall."""
    start = time.monotonic()
    last_byte = start
    closed = [False] * len(socks)
    done = [False] * len(socks)
    count = [0] * len(socks)
    tail = [b""] * len(socks)
    for s in socks:
        s.setblocking(False)
    while not all(done):
        now = time.monotonic()
        assert now - last_byte < stall, \
            f"no byte from any of them for {stall}s, neither closed nor fully answered: {count}"
        assert now - start < cap, f"neither closed nor fully answered within {cap}s: {count}"
        r, _, _ = select.select([s for s, d in zip(socks, done) if not d], [], [], 0.05)
        for i, s in enumerate(socks):
            if s not in r:
                continue
            try:
                d = s.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            last_byte = time.monotonic()
            if not d:
                closed[i] = done[i] = True
                continue
            chunk = tail[i] + d
            count[i] += chunk.count(b"HTTP/1.1 ")
            tail[i] = chunk[-8:]
            if count[i] >= answers:
                done[i] = True
    print(f"     read every answer or close in {time.monotonic() - start:.1f}s", flush=True)
    return closed


def test_slow_readers_past_the_unsent_budget_are_closed_slowest_first():
    rankd = Rankd(PLANS_DIR, extra_args=["--max-unsent-bytes", str(4 * MIB)])
    slow = []
    try:
        # Each slow client asks for 16 big answers and never reads; they stall one after
        # the other, so the first one opened has waited longest.
        for i in range(12):
            s = connect(rankd.port, rcvbuf=4096)
            s.sendall(rank_request("big") * 16)
            slow.append(s)
            time.sleep(0.15)  # the stimulus: clients that stall at different times
        # A fast client keeps being served meanwhile.
        fast = rankd.conn()
        for _ in range(20):
            fast.request("POST", "/rank", body='{"plan":"big","user_id":1}')
            r = fast.getresponse()
            r.read()
            assert r.status == 200, r.status
        fast.close()
        wait_until(lambda: limit_hits(rankd, "shard_unsent") > 0, timeout=10,
                   what="a slow reader closed for the unsent budget")
        rankd.wait_for_tick()  # every close so far is counted
        before = int(limit_hits(rankd, "shard_unsent"))
        # Reading them all (below) lets the survivors run ahead and stall anew, which may
        # close more of them, in any order: only the closes counted before say who went first.
        closed = closed_by_server(slow, 16, stall=20)
        print(f"     closed slow readers (in opening order): {closed}; {before} closes counted "
              "before reading", flush=True)
        assert 0 < before < len(slow), before
        assert all(closed[:before]), f"not the {before} slowest (first opened) closed: {closed}"
        healthz_fresh(rankd)
        hwm = proc_status_kib(rankd.proc.pid, "VmHWM")
        assert hwm < 256 * 1024, f"rankd peak RSS {hwm // 1024} MiB"
    finally:
        for s in slow:
            s.close()
        rankd.stop()


# --- (c) pipeline depth and the shard's input budget -------------------------------

def test_pipeline_depth_and_shard_input_bounds_keep_answers_in_order():
    budget = 64 * 1024
    rankd = Rankd(PLANS_DIR, extra_args=["--max-pipeline-depth", "2",
                                         "--max-buffered-input-bytes", str(budget)])
    try:
        rss0 = proc_status_kib(rankd.proc.pid, "VmRSS")
        n = 12
        pad = b"p" * 15000  # near the 16 KiB head limit: 180 KB of requests per connection
        conns = []
        for c in range(8):
            ids = [f"c{c}-{i}" for i in range(n)]
            data = b"".join(b"POST /rank HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: %s\r\nX-Pad: %s\r\n"
                            b"Content-Length: 26\r\n\r\n{\"plan\":\"big\",\"user_id\":1}"
                            % (rid.encode(), pad) for rid in ids)
            s = connect(rankd.port, rcvbuf=8192)
            s.setblocking(False)
            conns.append({"s": s, "out": memoryview(data), "in": bytearray(), "ids": ids})

        def pump(read):
            for e in conns:
                try:
                    if e["out"]:
                        e["out"] = e["out"][e["s"].send(e["out"]):]
                except BlockingIOError:
                    pass
            if read:
                r, _, _ = select.select([e["s"] for e in conns], [], [], 0.05)
                for e in conns:
                    if e["s"] in r:
                        try:
                            e["in"] += e["s"].recv(1 << 20)
                        except BlockingIOError:
                            pass
            else:
                time.sleep(0.01)  # pacing of the writer, not a wait

        # Write without reading: rankd must stop parsing and reading, not buffer it all.
        # Write until every bound has been hit at least once (a sanitizer build reaches
        # them later than a plain one), then look at what the shard holds.
        limits = ("connection_input", "pipeline_depth", "shard_input")
        end = time.monotonic() + 30
        while True:
            pause = time.monotonic() + 0.5
            while time.monotonic() < pause:
                pump(read=False)
            rankd.wait_for_tick()
            text = rankd.metrics()
            hit = [metric_value(text, "rankd_http_limit_hits_total", limit=lim) or 0 for lim in limits]
            if all(hit) or time.monotonic() > end:
                break
        held = metric_value(text, "rankd_http_buffered_input_bytes")
        # Each connection may overshoot the shard budget by one read while it can parse.
        assert held <= budget + 8 * 64 * 1024, f"shard holds {held} bytes of input"
        grown = proc_status_kib(rankd.proc.pid, "VmRSS") - rss0
        assert grown < 64 * 1024, f"RSS grew {grown // 1024} MiB while reads should have stopped"
        for limit in limits:
            assert metric_value(text, "rankd_http_limit_hits_total", limit=limit) > 0, limit
        # Now read everything: every answer comes, in request order.
        def answered(e):
            return e["in"].count(b"\r\nX-Request-Id: ") >= n
        end = time.monotonic() + 40
        while time.monotonic() < end and not all(answered(e) for e in conns):
            pump(read=True)
        for e in conns:
            got = re.findall(rb"\r\nX-Request-Id: ([^\r]*)\r\n", bytes(e["in"]))
            got = [g.decode() for g in got]
            assert got == e["ids"], f"answers out of order or missing: {got} != {e['ids']}"
            assert e["in"].count(b"HTTP/1.1 200 OK\r\n") == n
            e["s"].close()
        healthz_fresh(rankd)
    finally:
        rankd.stop()


# --- (d) HTTP/1.0 with Transfer-Encoding ----------------------------------------------

def test_http10_with_transfer_encoding_is_400_and_closed():
    rankd = Rankd(PLANS_DIR)
    try:
        s = connect(rankd.port)
        s.sendall(b"POST /rank HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
        s.close()
        assert out.startswith(b"HTTP/1.1 400"), out[:80]
        assert b"Connection: close" in out and b"bad_request" in out, out
        assert out.count(b"HTTP/1.1 ") == 1, "the request behind it was answered"
        wait_until(lambda: metric_value(rankd.metrics(), "rankd_http_rejects_total",
                                        reason="te_http10") == 1,
                   what="the te_http10 reject counted")
    finally:
        rankd.stop()


# --- (e) /metrics flood, and the separate metrics address -------------------------------

def scrape_flood(rankd, scrapers, seconds, during=None):
    """`scrapers` clients scrape /metrics back to back; returns {status: count} and what
    `during()` returned (called once, when as many scrapes as scrapers were answered)."""
    stop = time.monotonic() + seconds
    answers = {}
    lock = threading.Lock()

    def scraper():
        try:
            c = rankd.conn()
            while time.monotonic() < stop:
                c.request("GET", "/metrics")
                r = c.getresponse()
                r.read()
                with lock:
                    answers[r.status] = answers.get(r.status, 0) + 1
                if r.will_close:
                    c.close()
                    c = rankd.conn()
            c.close()
        except OSError:
            pass

    threads = [threading.Thread(target=scraper) for _ in range(scrapers)]
    for t in threads:
        t.start()

    def scraped():
        with lock:
            return sum(answers.values())
    wait_until(lambda: scraped() >= scrapers, timeout=seconds, what="the flood under way")
    got = during() if during else None
    for t in threads:
        t.join(seconds + 20)
    return answers, got


def test_metrics_flood_bounded_and_real_scrape_served():
    rankd = Rankd(PLANS_DIR)
    try:
        answers, (status, _, data) = scrape_flood(rankd, 48, 4, lambda: rankd.request("GET", "/metrics"))
        print(f"     flood answers by status: {answers}", flush=True)
        assert status == 200 and b"rankd_build_info" in data, status
        assert answers.get(200, 0) > 0 and set(answers) == {200}, answers
        hwm = proc_status_kib(rankd.proc.pid, "VmHWM")
        assert hwm < 256 * 1024, f"rankd peak RSS {hwm // 1024} MiB"
    finally:
        rankd.stop()

    # A queue of two: the flood gets 503s past it, counted.
    rankd = Rankd(PLANS_DIR, extra_args=["--max-queued-scrapes", "2"])
    try:
        answers, _ = scrape_flood(rankd, 24, 3)
        print(f"     flood answers by status, queue of 2: {answers}", flush=True)
        assert answers.get(503, 0) > 0 and answers.get(200, 0) > 0, answers
        wait_until(lambda: limit_hits(rankd, "scrape_queue") > 0, what="scrape_queue counted")
    finally:
        rankd.stop()

    mport = free_port()
    rankd = Rankd(PLANS_DIR, extra_args=["--metrics-host", "127.0.0.1", "--metrics-port", str(mport)])
    try:
        status, _, body = rankd.request("GET", "/metrics")
        assert status == 404, (status, body)
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", mport, timeout=10)
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode()
        assert r.status == 200 and "rankd_build_info" in text, (r.status, text[:200])
        c.request("GET", "/rank")
        r = c.getresponse()
        r.read()
        assert r.status == 404, r.status  # the metrics address serves nothing else
        c.close()
    finally:
        rankd.stop()


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
