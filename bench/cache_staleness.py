"""How stale a cached answer can be: the time from a write's acknowledgement by Redis to
the first answer of rankd that shows it, on a rankd whose cache holds the key.

Per probe: HSET item:<id> likes <v> on a raw RESP socket (t0 = the +reply read), then
POST /rank of a plan that reads that item's `likes` through the cache, again and again on
one keep-alive connection, until the answer shows v (t1). staleness = t1 - t0. One probe
request alone costs a round trip to rankd, so the floor of the figure is that round trip
(also printed: `probe_rtt`, the median time of a probe request that hits the cache).

Usage: cache_staleness.py --rankd HOST:PORT --redis HOST:PORT --plan NAME --items N
       --probes K   (prints one JSON line per figure, ops/bench style)
"""
import argparse
import http.client
import json
import random
import socket
import statistics
import sys
import time


class Resp:
    """A minimal RESP2 client: enough for HSET and its integer reply."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def command(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        line, self.buf = self.buf.split(b"\r\n", 1)
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--redis", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--items", type=int, required=True)
    ap.add_argument("--probes", type=int, default=300)
    ap.add_argument("--machine", default="")
    a = ap.parse_args()
    host, port = a.rankd.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    rhost, rport = a.redis.rsplit(":", 1)
    redis = Resp(rhost, int(rport))
    body = json.dumps({"plan": a.plan, "user_id": 1, "deadline_ms": 5000})

    def likes():
        conn.request("POST", "/rank", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"/rank answered {r.status}: {data[:200]!r}")
        return {it["id"]: it.get("likes") for it in json.loads(data)["items"]}

    for _ in range(3):  # warm: every item cached
        likes()
    rtts = []
    for _ in range(50):
        t = time.perf_counter()
        likes()
        rtts.append((time.perf_counter() - t) * 1000)
    stale = []
    polls = []
    rng = random.Random(1)
    version = 10_000_000
    for _ in range(a.probes):
        item = rng.randrange(1, a.items + 1)
        version += 1
        redis.command("HSET", f"item:{item}", "likes", version)
        t0 = time.perf_counter()
        n = 0
        while True:
            n += 1
            if likes().get(item) == version:
                break
            if time.perf_counter() - t0 > 5:
                raise RuntimeError(f"item {item}: likes {version} not seen after 5 s")
        stale.append((time.perf_counter() - t0) * 1000)
        polls.append(n)
        time.sleep(rng.uniform(0.005, 0.02))  # the next write lands at a random moment
    stale.sort()

    def line(name, value, unit, **extra):
        d = {"name": name, "value": round(value, 3), "unit": unit, "probes": a.probes,
             "machine": a.machine}
        d.update(extra)
        print(json.dumps(d), flush=True)

    line("cache_staleness_p50", statistics.median(stale), "ms")
    line("cache_staleness_p99", stale[min(len(stale) - 1, int(len(stale) * 0.99))], "ms")
    line("cache_staleness_max", stale[-1], "ms")
    line("cache_probe_rtt_p50", statistics.median(rtts), "ms",
         note="one probe request served from the cache: the floor of the staleness figures")
    line("cache_staleness_polls_mean", statistics.mean(polls), "requests",
         note="probe requests until the write showed (1 = the first answer after the ack had it)")
    line("cache_stale_answers", sum(n - 1 for n in polls), "answers",
         note="answers to requests sent after a write's ack that still showed the old value")


if __name__ == "__main__":
    sys.exit(main())
