"""The floods of issue #44's HTTP bounds (docs/operations.md, "HTTP budgets and
origins"), measured by rankd's RSS from /proc: unfinished heads of tiny headers,
unfinished heads inside the input budget, and bodies one byte short inside it. Plain
build only (sanitizers add their own memory); about 20 s. The same bounds' behaviour is
tested in every build by test_abuse_http.py.
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (Rankd, call, one_write_request, metric_value, plans_dir, proc_status_kib,  # noqa: E402
                     run_tests, wait_until)
from test_body_budget import open_bodies, push, raise_open_file_limit  # noqa: E402

KIB = 1024
MIB = 1024 * KIB


def rejects(rankd, reason):
    return metric_value(rankd.metrics(), "rankd_http_rejects_total", reason=reason) or 0.0


def open_heads(port, count, head):
    """`count` connections, each sending `head` (a request head without its end) as far
    as rankd takes it. Returns [socket, bytes left] as open_bodies does."""
    conns = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * KIB)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        conns.append([s, memoryview(head)])
    return conns


def timed_healthz(port):
    t0 = time.monotonic()
    status, _, _ = call(port, "GET", "/healthz", timeout=5)
    return status, time.monotonic() - t0


def rss_kib(rankd):
    return proc_status_kib(rankd.proc.pid, "VmRSS")


def quiet_rankd(**kw):
    """A rankd for a flood: RSS as it runs (meson's MALLOC_PERTURB_ would touch every
    allocation; test_body_budget.py says why)."""
    os.environ.pop("MALLOC_PERTURB_", None)
    return Rankd(plans_dir(), **kw)


def close_all(conns):
    for c in conns:
        c[0].close()


# --- bounds in every build -----------------------------------------------------------

def test_2000_heads_of_4000_empty_headers():
    """--shards 2, default flags: 2,000 connections each sending an unfinished head of
    4,000 empty headers ("a:" lines, 16 KiB) keep rankd under 256 MB of RSS, and /healthz
    on a new connection answers within 1 s meanwhile. Each head is refused at its 101st
    line (431), not kept."""
    count = 2000
    raise_open_file_limit(count + 512)
    rankd = quiet_rankd(shards=2)
    try:
        head = b"GET /plans HTTP/1.1\r\nHost: localhost\r\n" + b"a:\r\n" * 4000
        assert len(head) <= 16 * KIB
        conns = open_heads(rankd.port, count, head)
        push(conns, quiet_for=0.3)
        status, took = timed_healthz(rankd.port)
        wait_until(lambda: rejects(rankd, "too_many_headers") >= count, timeout=20,
                   what="every head refused")
        hwm = proc_status_kib(rankd.proc.pid, "VmHWM")
        print(f"     {count} heads of 4,000 headers: VmHWM {hwm // 1024} MiB, "
              f"/healthz {took * 1000:.0f} ms", flush=True)
        assert status == 200 and took < 1, (status, took)
        assert hwm * KIB < 256e6, f"rankd peak RSS {hwm // 1024} MiB is over 256 MB"
        close_all(conns)
    finally:
        rankd.stop()


def test_1000_unfinished_heads_inside_the_input_budget():
    """One shard, --max-buffered-input-bytes 1 MiB: 1,000 connections each holding an
    unfinished head of 100 headers (~16 KiB) grow rankd's RSS by less than 48 MB. A
    parsed head counts against the budget; past it, connections in the middle of a head
    stop reading."""
    count = 1000
    raise_open_file_limit(count + 512)
    rankd = quiet_rankd(extra_args=["--max-buffered-input-bytes", str(MIB)])
    try:
        assert call(rankd.port, "GET", "/plans")[0] == 200
        before = rss_kib(rankd)
        line = b"X-Header-Field-Name: " + b"v" * 135 + b"\r\n"  # 158 bytes
        head = b"GET /plans HTTP/1.1\r\nHost: localhost\r\n" + line * 99
        assert 15 * KIB < len(head) <= 16 * KIB
        conns = open_heads(rankd.port, count, head)
        push(conns, quiet_for=0.3)
        rankd.wait_for_tick()
        grown = rss_kib(rankd) - before
        text = rankd.metrics()
        held = metric_value(text, "rankd_http_buffered_input_bytes")
        hits = metric_value(text, "rankd_http_limit_hits_total", limit="shard_input")
        status, took = timed_healthz(rankd.port)
        print(f"     {count} heads of 100 headers: RSS +{grown / 1024:.1f} MiB, budget holds "
              f"{held / MIB:.2f} MiB, /healthz {took * 1000:.0f} ms", flush=True)
        assert grown * KIB < 48e6, f"RSS grew by {grown // 1024} MiB"
        # The budget, the oldest head past it (16 KiB), and per connection read past it a
        # short read (4 KiB) as parsed headers (two strings each: ~9 KiB).
        assert MIB <= held <= MIB + 16 * KIB + count * 12 * KIB, held  # heads are counted
        assert hits >= count // 2, hits
        assert status == 200 and took < 1, (status, took)
        close_all(conns)
    finally:
        rankd.stop()


def test_1000_bodies_one_byte_short_inside_the_input_budget():
    """One shard, --max-buffered-input-bytes 1 MiB: 1,000 connections each holding
    64 KiB - 1 of a 64 KiB body grow rankd's RSS by less than 48 MB. Over the budget
    only the oldest body reads on, however little of the others is missing."""
    count, length = 1000, 64 * KIB
    raise_open_file_limit(count + 512)
    rankd = quiet_rankd(extra_args=["--max-buffered-input-bytes", str(MIB)])
    try:
        assert call(rankd.port, "GET", "/plans")[0] == 200
        before = rss_kib(rankd)
        conns = open_bodies(rankd.port, count, length, length - 1)
        sent = push(conns, quiet_for=0.3)
        rankd.wait_for_tick()
        grown = rss_kib(rankd) - before
        held = metric_value(rankd.metrics(), "rankd_http_buffered_input_bytes")
        # A request that comes whole in one read is still served meanwhile: head and body
        # in one write (http.client writes them apart, which may arrive as two reads).
        status, answer = one_write_request(rankd.port, "POST", "/rank",
                                           {"plan": "no_such_plan", "user_id": 1})
        print(f"     {count} bodies 1 byte short: sent {sent // MIB} MiB, RSS "
              f"+{grown / 1024:.1f} MiB, budget holds {held / MIB:.2f} MiB", flush=True)
        assert grown * KIB < 48e6, f"RSS grew by {grown // 1024} MiB"
        assert held <= MIB + length + count * 8 * KIB, held
        assert status == 404 and b"unknown_plan" in answer, (status, answer[:200])
        close_all(conns)
    finally:
        rankd.stop()


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
