"""Request bodies inside the shard's input budget (docs/operations.md,
"Security"): body bytes read but not yet handed on count against
--max-buffered-input-bytes, nothing is allocated ahead of them (the input buffers'
allocations, rankd_http_input_allocated_bytes, stay within the bytes held plus a
connection's kept buffer and one block), connections reading a
body stop reading while the shard is over its budget, and a body that never completes
ends with 408. A real rankd on loopback, clients on raw sockets.
"""
import json
import os
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (SANITIZED, Rankd, Redis, demo_data, metric_value, one_write_request,  # noqa: E402
                     plans_dir, proc_status_kib, run_tests, wait_until)

KIB = 1024
MIB = 1024 * KIB


def raise_open_file_limit(need):
    """This process holds every client socket: lift its soft limit (rankd, its child,
    inherits it and raises its own to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise AssertionError(f"ulimit -Hn is {hard}: this test needs {need} open files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def body_head(path, length, close=False):
    return (b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n%s"
            b"Content-Length: %d\r\n\r\n"
            % (path.encode(), b"Connection: close\r\n" if close else b"", length))


def open_bodies(port, count, length, send):
    """`count` connections, each sending a head announcing `length` body bytes and then
    `send` of them, as far as rankd takes them. Returns [socket, bytes left to send]."""
    conns = []
    data = body_head("/rank", length) + b"x" * send
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # What rankd does not read waits in the kernel: keep this side's share small.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * KIB)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        conns.append([s, memoryview(data)])
    return conns


def push(conns, quiet_for=0.5, at_most=20):
    """Sends what each connection has left until nothing more goes for `quiet_for`
    seconds (rankd stopped reading; the kernel's buffers are full). Returns bytes sent."""
    sent = 0
    last = time.monotonic()
    end = last + at_most
    while time.monotonic() - last < quiet_for and time.monotonic() < end:
        moved = False
        for c in conns:
            if not c[1]:
                continue
            try:
                n = c[0].send(c[1][:256 * KIB])
            except BlockingIOError:
                continue
            c[1] = c[1][n:]
            sent += n
            moved = True
        if moved:
            last = time.monotonic()
        else:
            time.sleep(0.01)  # pacing of the writer, not a wait for an event
    return sent


def read_answers(socks, timeout):
    """Reads each socket to its end (rankd closes after its answer). Returns the status
    line of each ("" when the connection closed without one)."""
    bufs = {s: b"" for s in socks}
    done = {}
    end = time.monotonic() + timeout
    while bufs and time.monotonic() < end:
        for s in list(bufs):
            try:
                d = s.recv(64 * KIB)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if d:
                bufs[s] += d
                continue
            done[s] = bufs.pop(s)
        time.sleep(0.01)
    assert not bufs, f"{len(bufs)} connections neither answered nor closed within {timeout} s"
    return [done[s].split(b"\r\n", 1)[0].decode() for s in socks]


def buffered_input(rankd):
    return metric_value(rankd.metrics(), "rankd_http_buffered_input_bytes") or 0.0


def total(text, name):
    """A per-shard gauge summed over the shards; it must be there."""
    v = metric_value(text, name)
    assert v is not None, f"no {name} in /metrics"
    return v


# What a connection may have allocated past the bytes it holds: its input buffer's kept
# capacity (16 KiB, kept between requests) and the last, partly filled body block
# (16 KiB).
PER_CONN_SLACK = 32 * KIB + 512


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def test_600_unfinished_bodies_stay_inside_the_budget():
    """The bound: with --shards 2 and otherwise default flags, 600 connections
    each holding a 1 MiB body 8 KiB short of complete keep rankd under 256 MB of RSS,
    while /healthz and a small /rank on new connections answer within 1 s. Then each of
    the 600 gets its 408 at the read timeout and the budget is free again. Plain build
    only: it measures RSS (sanitizers add their own memory) and takes about 12 s."""
    if SANITIZED:
        print("     skipped: RSS bound, plain build only", flush=True)
        return
    count, length = 600, MIB
    raise_open_file_limit(count + 512)
    # meson test sets glibc's MALLOC_PERTURB_, which fills every allocation and so makes
    # resident memory that rankd reserved but has not used yet: measured with it, the
    # peak moved between 160 and 247 MiB run to run. The RSS bound is about rankd as it
    # runs; an allocation ahead of the bytes, which RSS shows only once touched, is
    # caught by rankd_http_input_allocated_bytes below.
    os.environ.pop("MALLOC_PERTURB_", None)
    redis = Redis()
    demo_data(redis, 20)
    rankd = Rankd(plans_dir(), redis=redis, shards=2).wait_ready()
    try:
        conns = open_bodies(rankd.port, count, length, length - 8 * KIB)
        started = time.monotonic()  # the read timeout runs from each request's first byte
        sent = push(conns)
        rss = proc_status_kib(rankd.proc.pid, "VmRSS")
        (status, _, _), healthz_s = timed(lambda: rankd.request("GET", "/healthz", timeout=5))
        assert status == 200, status
        # In one write: past the budget a shard serves a request that came whole in one read.
        (status, answer), rank_s = timed(lambda: one_write_request(
            rankd.port, "POST", "/rank", {"plan": "feed", "user_id": 1}))
        assert status == 200, (status, answer)
        text = rankd.metrics()
        held = total(text, "rankd_http_buffered_input_bytes")
        allocated = total(text, "rankd_http_input_allocated_bytes")
        hits = metric_value(text, "rankd_http_limit_hits_total", limit="shard_input")
        hwm = proc_status_kib(rankd.proc.pid, "VmHWM")
        print(f"     {count} bodies: sent {sent // MIB} MiB, rankd holds {held / MIB:.1f} MiB "
              f"({allocated / MIB:.1f} MiB allocated), "
              f"VmRSS {rss // 1024} MiB, VmHWM {hwm // 1024} MiB; /healthz {healthz_s * 1000:.0f} ms, "
              f"/rank {rank_s * 1000:.0f} ms", flush=True)
        assert hwm * KIB < 256e6, f"rankd peak RSS {hwm // 1024} MiB is over 256 MB"
        # Two shards of 64 MiB, each with its oldest body past it (1 MiB at most), and per
        # connection one short read (4 KiB) past it and a block (16 KiB) not yet filled.
        assert held <= 2 * (64 + 1) * MIB + count * 20 * KIB, f"rankd holds {held} bytes of input"
        # Nothing allocated ahead of the bytes: a body reserved at its Content-Length would
        # show 600 MiB here whether or not its pages were ever touched.
        assert held <= allocated <= held + count * PER_CONN_SLACK, \
            f"the input buffers allocated {allocated} bytes for {held} held"
        assert hits >= count // 2, f"only {hits} connections stopped for the shard's budget"
        assert healthz_s < 1 and rank_s < 1, (healthz_s, rank_s)
        # Nobody finishes: each gets 408 at --read-timeout-ms (10 s), and closes.
        lines = read_answers([c[0] for c in conns], timeout=30 - (time.monotonic() - started))
        assert all(line.startswith("HTTP/1.1 408 ") for line in lines), \
            {line: lines.count(line) for line in set(lines)}
        wait_until(lambda: buffered_input(rankd) < 64 * KIB, what="the input budget freed")
        for c in conns:
            c[0].close()
    finally:
        rankd.stop()


def test_stalled_bodies_get_408_and_a_waiting_one_finishes_after_them():
    """One shard with the smallest budget (64 KiB) and a 3 s read timeout. Two clients
    each send 512 KiB of a 1 MiB body and stall: the older body may read past the budget
    (one body at a time always completes), the other stops at it; both get 408 at the
    read timeout, and what they held goes back. A third client, whose 200 KiB body came
    meanwhile, waits (stopped as well) and completes once they are gone."""
    budget, timeout_ms = 64 * KIB, 3000
    rankd = Rankd(plans_dir(), extra_args=["--max-buffered-input-bytes", str(budget),
                                           "--read-timeout-ms", str(timeout_ms)])
    try:
        stalled = open_bodies(rankd.port, 1, MIB, 512 * KIB)
        push(stalled)
        stalled += open_bodies(rankd.port, 1, MIB, 512 * KIB)
        push(stalled)
        rankd.wait_for_tick()
        text = rankd.metrics()
        held = metric_value(text, "rankd_http_buffered_input_bytes")
        # The older body whole (512 KiB), the other one read (64 KiB) and a block (16 KiB)
        # at most.
        assert 512 * KIB <= held <= 512 * KIB + 80 * KIB, f"shard holds {held} bytes"
        # Two bodies announcing 1 MiB each: their buffers follow the bytes, not the
        # announced length.
        allocated = total(text, "rankd_http_input_allocated_bytes")
        assert held <= allocated <= held + 2 * PER_CONN_SLACK, \
            f"the input buffers allocated {allocated} bytes for {held} held"
        assert metric_value(text, "rankd_http_limit_hits_total", limit="shard_input") >= 1

        time.sleep(timeout_ms / 2000)  # a point within the stalled ones' read time
        pad = "p" * (200 * KIB)
        body = json.dumps({"plan": "no_such_plan", "user_id": 1, "pad": pad}).encode()
        waiting = socket.create_connection(("127.0.0.1", rankd.port), timeout=10)
        result = {}

        def second():
            waiting.sendall(body_head("/rank", len(body), close=True) + body)
            result["answer"] = waiting.makefile("rb").read()

        t = threading.Thread(target=second)
        t.start()

        answers = read_answers([c[0] for c in stalled], timeout=10)
        assert all(a.startswith("HTTP/1.1 408 ") for a in answers), answers
        for c in stalled:
            c[0].close()
        t.join(10)
        assert not t.is_alive(), "the waiting request got no answer"
        # Its body arrived whole once the budget had room: the route answered it.
        got = result["answer"]
        assert got.startswith(b"HTTP/1.1 404 "), got[:200]
        assert b'"unknown_plan"' in got, got[:300]
        waiting.close()
        wait_until(lambda: buffered_input(rankd) == 0, what="the input budget freed")
        assert metric_value(rankd.metrics(), "rankd_http_rejects_total", reason="read_timeout") == 2
    finally:
        rankd.stop()


if __name__ == "__main__":
    run_tests([
        ("600 unfinished bodies stay inside the budget",
         test_600_unfinished_bodies_stay_inside_the_budget),
        ("stalled bodies get 408 and a waiting one finishes after them",
         test_stalled_bodies_get_408_and_a_waiting_one_finishes_after_them),
    ])
