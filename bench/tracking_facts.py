"""Facts about Redis CLIENT TRACKING with RESP2 + REDIRECT, as rankd will use it: prints
the exact RESP2 of what the subscribed connection receives in each case. Starts its own
redis-server on a free loopback port. Run: /usr/bin/python3 bench/tracking_facts.py"""
import os
import socket
import subprocess
import sys
import tempfile
import time

from resp2raw import Conn, Server

INV = "__redis__:invalidate"


def pair(port, *tracking):
    i = Conn(port)
    iid = i.cmd("CLIENT", "ID")
    assert i.cmd("SUBSCRIBE", INV) == [b"subscribe", INV.encode(), 1]
    d = Conn(port)
    r = d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid, *tracking)
    assert r == "OK", r
    return i, iid, d


def show(title, msgs):
    print(f"  {title}: {len(msgs)} message(s)")
    for v, raw in msgs:
        print(f"    {raw!r}")


def q1(port):
    print("Q1 shapes")
    i, iid, d = pair(port)
    w = Conn(port)
    w.cmd("SET", "k1", "v1")
    d.cmd("GET", "k1")
    w.cmd("SET", "k1", "v2")
    show("SET of one tracked key", i.read_within(0.3))
    for k in ("a", "b", "c"):
        w.cmd("SET", k, "1")
        d.cmd("GET", k)
    d.cmd("GET", "nokey")
    print("  DEL a b c nokey ->", w.cmd("DEL", "a", "b", "c", "nokey"))
    show("multi-key DEL", i.read_within(0.3))
    for k in ("a", "b", "c"):
        d.cmd("GET", k)
    print("  MSET a b c ->", w.cmd("MSET", "a", "2", "b", "2", "c", "2"))
    show("MSET of 3 tracked keys", i.read_within(0.3))
    for k in ("a", "b", "c"):
        d.cmd("GET", k)
    w.send_many([["MULTI"], ["SET", "a", "3"], ["SET", "b", "3"], ["EXEC"]])
    [w.read() for _ in range(4)]
    show("MULTI SET a; SET b; EXEC", i.read_within(0.3))
    d.cmd("GET", "a")
    w.cmd("FLUSHDB")
    show("FLUSHDB (a tracked)", i.read_within(0.3))
    w.cmd("FLUSHALL")
    show("FLUSHALL (nothing tracked now)", i.read_within(0.3))
    w.cmd("FLUSHALL", "ASYNC")
    show("FLUSHALL ASYNC", i.read_within(0.3))
    w.cmd("SELECT", 3)
    w.cmd("FLUSHDB")
    show("FLUSHDB of db 3 (D reads db 0)", i.read_within(0.3))
    w.cmd("SELECT", 0)
    # a client with tracking off, and one whose redirect is a different subscriber
    i2, iid2, d2 = pair(port)
    w.cmd("FLUSHALL")
    show("FLUSHALL seen by a second pair that never read anything", i2.read_within(0.3))
    i.read_within(0.1)

    print("Q1 expiry (SET PX 200, one GET through D, then no access)")
    lat = []
    for n in range(6):
        k = f"exp:{n}"
        t0 = time.monotonic()
        w.cmd("SET", k, "v", "PX", 200)
        d.cmd("GET", k)
        if not i.readable(5):
            lat.append(None)
            continue
        v, raw = i.read()
        lat.append(round((time.monotonic() - t0) * 1000 - 200))
        if n == 0:
            print(f"    {raw!r}")
    print("  ms after the expiry time, no access:", lat)
    w.cmd("SET", "acc", "v", "PX", 200)
    d.cmd("GET", "acc")
    w.cmd("DEBUG", "SET-ACTIVE-EXPIRE", 0)
    time.sleep(0.5)
    got = i.read_within(0.5)
    t0 = time.monotonic()
    print("  active expire off, 1 s later nothing:", got == [], "; GET by another client ->",
          w.cmd("GET", "acc"))
    show("  then (lazy expire on access)", i.read_within(0.3))
    w.cmd("DEBUG", "SET-ACTIVE-EXPIRE", 1)

    print("Q1 expiry with 10,000 other volatile keys (TTL 1 h) in the db")
    w.send_many([["SET", f"vol:{n}", "x", "EX", 3600] for n in range(10000)])
    for _ in range(10000):
        w.read()
    lat = []
    for n in range(2):
        k = f"exp2:{n}"
        t0 = time.monotonic()
        w.cmd("SET", k, "v", "PX", 200)
        d.cmd("GET", k)
        lat.append(round((time.monotonic() - t0) * 1000 - 200) if i.readable(60) else ">60000")
        i.read_within(0.05)
    print("  ms after the expiry time:", lat)
    w.cmd("FLUSHALL")
    i.read_within(0.2)
    i2.read_within(0.2)

    print("Q1 eviction")
    w.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    big = "x" * 100000
    for n in range(5):
        w.cmd("SET", f"big:{n}", big)
        d.cmd("GET", f"big:{n}")
    used = int([l for l in w.cmd("INFO", "memory").decode().split("\r\n")
                if l.startswith("used_memory:")][0].split(":")[1])
    w.cmd("CONFIG", "SET", "maxmemory", used + 150000)
    for n in range(5, 8):
        w.cmd("SET", f"fill:{n}", big)
    show("writes past maxmemory (allkeys-lru)", i.read_within(0.3))
    print("  evicted_keys:", [l for l in w.cmd("INFO", "stats").decode().split("\r\n")
                              if l.startswith("evicted_keys")])
    w.cmd("CONFIG", "SET", "maxmemory", 0)
    w.cmd("FLUSHALL")
    for c in (i, d, w, i2, d2):
        c.close()


def q2(port):
    print("Q2 which reads track the key (a later write by another client invalidates it?)")
    i, iid, d = pair(port)
    w = Conn(port)
    cases = [
        ("GET of a missing key", "missing:1", ["GET", "missing:1"], ["SET", "missing:1", "x"]),
        ("HMGET of a missing key", "missing:2", ["HMGET", "missing:2", "a", "b"], ["HSET", "missing:2", "a", "1"]),
        ("HMGET", "h1", ["HMGET", "h1", "a", "b"], ["HSET", "h1", "a", "2"]),
        ("HGETALL", "h2", ["HGETALL", "h2"], ["HSET", "h2", "a", "2"]),
        ("LRANGE", "l1", ["LRANGE", "l1", 0, -1], ["LPUSH", "l1", "9"]),
        ("LRANGE of a missing list", "l9", ["LRANGE", "l9", 0, -1], ["LPUSH", "l9", "9"]),
        ("PTTL", "p1", ["PTTL", "p1"], ["PEXPIRE", "p1", 100000]),
        ("SMISMEMBER", "s1", ["SMISMEMBER", "s1", "1", "2"], ["SADD", "s1", "2"]),
        ("EXISTS", "e1", ["EXISTS", "e1"], ["SET", "e1", "x"]),
        ("TYPE", "t1", ["TYPE", "t1"], ["SET", "t1", "y"]),
    ]
    w.cmd("HSET", "h1", "a", "1")
    w.cmd("HSET", "h2", "a", "1")
    w.cmd("RPUSH", "l1", "1")
    w.cmd("SET", "p1", "x")
    w.cmd("SADD", "s1", "1")
    w.cmd("SET", "t1", "x")
    for title, key, read, write in cases:
        d.cmd(*read)
        w.cmd(*write)
        got = i.read_within(0.2)
        keys = [v[2] for v, _ in got]
        print(f"  {title:28s} tracked={[key.encode()] in keys}  messages={keys}")
    # one read = one tracking entry; a second write without a new read is not sent again
    d.cmd("GET", "once")
    w.cmd("SET", "once", "1")
    w.cmd("SET", "once", "2")
    print("  two writes after one read ->", [v[2] for v, _ in i.read_within(0.2)])
    # the client's own write (no NOLOOP): invalidation for its own write?
    d.cmd("GET", "own")
    d.cmd("SET", "own", "1")
    print("  D writes a key D tracks (no NOLOOP) ->", [v[2] for v, _ in i.read_within(0.2)])
    w.cmd("FLUSHALL")
    i.read_within(0.2)
    for c in (i, d, w):
        c.close()


def q3(port):
    print("Q3 ordering of D's reply vs the invalidation on I")
    i, iid, d = pair(port)
    w = Conn(port)
    # (a) a big reply: D's reply is still being written when the write comes in
    w.cmd("SET", "big", "x" * (32 << 20))
    d.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    d.send("GET", "big")
    time.sleep(0.2)   # Redis ran GET (key now tracked) and wrote what the socket takes
    w.cmd("SET", "big", "y")
    inv = i.readable(2)
    print("  32 MB GET on D not yet read by us; SET by W -> invalidation on I before the"
          " reply is complete:", inv, i.read()[1] if inv else None)
    v, _ = d.read()
    print("  D's reply then completes, the OLD value of", len(v), "bytes")
    # (b) small replies: GET on D and SET on W reach Redis in the same event-loop turn
    log = tempfile.mktemp(prefix="trackexp-strace-")
    st = subprocess.Popen(["strace", "-f", "-e", "trace=write,writev", "-s", "80", "-o", log,
                           "-p", str(PID[0])], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    blocker = Conn(port)
    for n in range(200):
        k = f"o:{n}"
        w.cmd("SET", k, "old")
        blocker.send("DEBUG", "SLEEP", 0.01)
        time.sleep(0.002)   # Redis now sleeps: the next two commands queue in the kernel
        d.send("GET", k)
        w.send("SET", k, "new")
        blocker.read()
        # Both replies are written by the same beforeSleep; which socket got bytes first
        # cannot be seen from here, so ask strace (below); here: whether I is readable at
        # the moment D is (both already are, normally).
        d.read()
        w.read()
        i.read()
    time.sleep(0.5)
    st.terminate()
    st.wait()
    order = []
    for line in open(log):
        if "message" in line:
            order.append("I")
        elif '"$3\\r\\nold' in line:
            order.append("D")
    os.unlink(log)
    pairs = [order[j:j + 2] for j in range(0, len(order) - 1, 2)]
    print("  200 GET(D)/SET(W) pairs run in one event-loop turn; write(2) order seen by"
          " strace: invalidation on I first:", sum(p == ["I", "D"] for p in pairs),
          ", D's reply first:", sum(p == ["D", "I"] for p in pairs), "of", len(pairs))
    for c in (i, d, w, blocker):
        c.close()


def q4q5(port):
    print("Q4 redirect client disconnects")
    i, iid, d = pair(port)
    w = Conn(port)
    d.cmd("GET", "r1")
    print("  CLIENT TRACKINGINFO on D:", d.cmd("CLIENT", "TRACKINGINFO"))
    i.close()
    time.sleep(0.1)
    print("  after I closed, D PING ->", d.cmd("PING"), "; D GET r1 ->", d.cmd("GET", "r1"))
    print("  CLIENT TRACKINGINFO on D:", d.cmd("CLIENT", "TRACKINGINFO"))
    w.cmd("SET", "r1", "x")
    time.sleep(0.1)
    print("  after a write to a tracked key: D PING ->", d.cmd("PING"))
    print("  CLIENT TRACKINGINFO on D:", d.cmd("CLIENT", "TRACKINGINFO"))
    print("  CLIENT INFO flags on D:", [f for f in d.cmd("CLIENT", "INFO").decode().split()
                                        if f.startswith("flags=")])
    d.cmd("GET", "r2")   # tracked while the redirect is broken
    i2 = Conn(port)
    iid2 = i2.cmd("CLIENT", "ID")
    i2.cmd("SUBSCRIBE", INV)
    print("  CLIENT TRACKING ON REDIRECT <new> while on ->",
          d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid2))
    print("  CLIENT TRACKINGINFO on D:", d.cmd("CLIENT", "TRACKINGINFO"))
    w.cmd("SET", "r2", "x")
    show("  write to a key read while broken, now on the new I", i2.read_within(0.3))
    d.cmd("GET", "r3")
    w.cmd("SET", "r3", "x")
    show("  write to a key read after the switch", i2.read_within(0.3))
    # switch a healthy redirect to another one
    i3 = Conn(port)
    iid3 = i3.cmd("CLIENT", "ID")
    i3.cmd("SUBSCRIBE", INV)
    d.cmd("GET", "r4")
    print("  switch healthy redirect i2 -> i3 ->", d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid3))
    w.cmd("SET", "r4", "x")
    print("  write to key read before the switch: i2 got", len(i2.read_within(0.2)),
          ", i3 got", [v[2] for v, _ in i3.read_within(0.2)])
    print("  switch default -> BCAST while on ->",
          d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid3, "BCAST", "PREFIX", "x:"))
    print("  OFF ->", d.cmd("CLIENT", "TRACKING", "OFF"), "; then BCAST ->",
          d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid3, "BCAST", "PREFIX", "x:"))
    print("  BCAST again with another PREFIX while on ->",
          d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid3, "BCAST", "PREFIX", "y:"))
    print("  CLIENT TRACKINGINFO on D:", d.cmd("CLIENT", "TRACKINGINFO"))
    print("  overlapping PREFIX ->", d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid3, "BCAST",
                                          "PREFIX", "x:a"))
    print("Q5 REDIRECT to an id that does not exist ->",
          Conn(port).cmd("CLIENT", "TRACKING", "ON", "REDIRECT", 999999))
    print("   REDIRECT to own id ->", w.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", w.cmd("CLIENT", "ID")))
    print("   REDIRECT to a client that is not subscribed ->",
          Conn(port).cmd("CLIENT", "TRACKING", "ON", "REDIRECT", w.cmd("CLIENT", "ID")))


PID = [0]


def q8(port):
    print("Q8 extra")
    w = Conn(port)
    # redirect to a client that did not SUBSCRIBE, and to one subscribed to another channel
    for sub in (None, "other"):
        t = Conn(port)
        tid = t.cmd("CLIENT", "ID")
        if sub:
            t.cmd("SUBSCRIBE", sub)
        d = Conn(port)
        d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", tid)
        d.cmd("GET", "q8")
        w.cmd("SET", "q8", "x")
        got = t.read_within(0.3)
        print(f"  redirect target subscribed to {sub}: received {[r for _, r in got]}")
        t.close()
        d.close()
    # tracking-table-max-keys: a full table evicts tracked keys with invalidations
    i, iid, d = pair(port)
    w.cmd("CONFIG", "SET", "tracking-table-max-keys", 10)
    for n in range(20):
        d.cmd("GET", f"tt:{n}")
    time.sleep(0.3)
    got = i.read_within(0.3)
    print(f"  tracking-table-max-keys 10, 20 keys read: {len(got)} invalidations without any"
          f" write, e.g. {got[0][1] if got else None!r}; tracking_total_keys=",
          [l for l in w.cmd("INFO", "stats").decode().split() if l.startswith("tracking_total_keys")])
    w.cmd("CONFIG", "SET", "tracking-table-max-keys", 1000000)
    # BCAST on the subscriber itself: REDIRECT to its own id before SUBSCRIBE, no data
    # connection involved; and the same without REDIRECT (RESP2)
    for redirect in (True, False):
        t = Conn(port)
        tid = t.cmd("CLIENT", "ID")
        args = ["CLIENT", "TRACKING", "ON"] + (["REDIRECT", tid] if redirect else [])
        r = t.cmd(*args, "BCAST", "PREFIX", "item:")
        t.cmd("SUBSCRIBE", INV)
        w.cmd("HSET", "item:1", "a", 1)
        print(f"  BCAST on the subscriber itself, {'REDIRECT to own id' if redirect else 'no REDIRECT'}:"
              f" {r}, HSET item:1 -> {[x for _, x in t.read_within(0.3)]}")
        t.close()


def main():
    srv = Server()
    PID[0] = srv.proc.pid
    try:
        print("redis-server", Conn(srv.port).cmd("INFO", "server").decode().split("redis_version:")[1].split()[0])
        for f in (q1, q2, q3, q4q5, q8):
            if len(sys.argv) > 1 and f.__name__ not in sys.argv[1:]:
                continue
            f(srv.port)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
