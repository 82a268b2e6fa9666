#!/usr/bin/env python3
"""What a counters write and read cost Redis (docs/events.md, "Measured"). First with one
field per bucket: a Lua script (one EVALSHA per key) against a read-before-write without
Lua (HMGET the key's "_lo"/"_hi", then HINCRBY the buckets, HSET the marks, PEXPIRE, and
HKEYS + HDEL when a bucket aged out: two or three round trips), a read of the demo
configuration's windows (HMGET of 48 buckets per key) and MEMORY USAGE of a full key; then
rankd's layout, a ring of binary bucket slots (src/events/counter_write.cc's script, one
call per key and one per 64 keys; a read is an HMGET of the blocks of a day's buckets).

Every key starts full: the demo family (bucket_s 3600, keep_s 604800: 169 buckets of each
of 2 types, 340 fields with the marks). A round writes 2 increments to every key, at the
newest bucket ("steady": nothing ages out) or one bucket later each round ("aging": each
write drops the oldest bucket, the scan path). Redis's CPU is the server's own
used_cpu_user + used_cpu_sys (INFO) over the rounds, per key written, and the command
time of INFO commandstats. A measurement, not a benchmark: small, bounded, run niced.

    nice -n 19 /usr/bin/python3 bench/counter_write_cost.py [--keys 2000] [--rounds 5]
"""
import argparse
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))
from harness import Redis, resp_command  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
BUCKET, KEEP = 3600, 604800
TYPES = ("click", "impression")
NOW0 = 1764590400  # a bucket start


def script_text():
    # The template of counter_write.cc made for 2 types, as CounterScriptFor(2) makes it.
    src = open(os.path.join(ROOT, "src", "events", "counter_write.cc")).read()
    text = re.search(r'R"lua\((.*?)\)lua"', src, re.S).group(1)
    for k, v in (("@X@", "x1, x2"), ("@A@", "a1, a2"), ("@SUM@", "a1 + x1, a2 + x2"), ("@D@", "dd")):
        text = text.replace(k, v)
    return text


# One field per bucket ("<type>:<bucket start>"), the layout measured before the ring.
PER_BUCKET_SCRIPT = """local key = KEYS[1]
local keep = tonumber(ARGV[2])
local marks = redis.call('HMGET', key, '_lo', '_hi')
local lo, hi = tonumber(marks[1]), tonumber(marks[2])
local top = tonumber(ARGV[3])
if hi and hi > top then top = hi end
local function bucket(f) return tonumber(string.match(f, ':(%-?%d+)$')) end
for i = 5, #ARGV, 2 do
  local b = bucket(ARGV[i])
  if b > top then top = b end
end
local cutoff = top - keep
local low = lo
for i = 5, #ARGV, 2 do
  local b = bucket(ARGV[i])
  if b >= cutoff then
    redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1])
    if low == nil or b < low then low = b end
  end
end
if low ~= nil and low < cutoff then
  low = nil
  local old = {}
  for _, f in ipairs(redis.call('HKEYS', key)) do
    local b = bucket(f)
    if b ~= nil then
      if b < cutoff then old[#old + 1] = f elseif low == nil or b < low then low = b end
    end
  end
  for i = 1, #old, 1000 do redis.call('HDEL', key, unpack(old, i, math.min(i + 999, #old))) end
end
if low ~= lo or top ~= hi then redis.call('HSET', key, '_lo', low, '_hi', top) end
redis.call('PEXPIRE', key, ARGV[1])
return 0
"""


class Conn:
    """One connection, pipelined: send many, read all."""

    def __init__(self, redis):
        self.redis = redis
        self.sock = redis._connect()
        self.f = self.sock.makefile("rb")

    def many(self, commands):
        out = []
        for i in range(0, len(commands), 200):
            chunk = commands[i:i + 200]
            self.sock.sendall(b"".join(resp_command(*c) for c in chunk))
            out += [self.redis._read(self.f) for _ in chunk]
        for r in out:
            if isinstance(r, Exception):
                raise r
        return out


def cpu(conn):
    info = conn.many([("INFO", "cpu")])[0]
    vals = dict(line.split(":") for line in info.splitlines() if ":" in line)
    return float(vals["used_cpu_user"]) + float(vals["used_cpu_sys"])


def command_usec(conn):
    info = conn.many([("INFO", "commandstats")])[0]
    total = 0
    for line in info.splitlines():
        m = re.match(r"cmdstat_(\w+):calls=\d+,usec=(\d+)", line)
        if m and m.group(1) not in ("info", "config", "flushall", "config|resetstat"):
            total += int(m.group(2))
    return total


def fill(conn, keys):
    """Every key full, one field at a time as writes make it (one HSET of all the fields
    would leave it a listpack past hash-max-listpack-entries; writes convert it)."""
    conn.many([("FLUSHALL",)])
    cmds = []
    for k in range(keys):
        for t in TYPES:
            for b in range(NOW0 - KEEP, NOW0 + 1, BUCKET):
                cmds.append(("HINCRBY", f"cnt:item:{k}", f"{t}:{b}", str(1 + (b // BUCKET) % 7)))
        cmds.append(("HSET", f"cnt:item:{k}", "_lo", str(NOW0 - KEEP), "_hi", str(NOW0)))
        cmds.append(("PEXPIRE", f"cnt:item:{k}", str(KEEP * 1000)))
    conn.many(cmds)
    return conn.many([("OBJECT", "ENCODING", "cnt:item:0")])[0]


RING = KEEP // BUCKET + 1  # CounterRing::slots
WIDTH = 4 + 8 * len(TYPES)  # CounterRing::slot_bytes


def ring_ops(now_b):
    # A key's increments, one slot's bytes a bucket (bucket index u32, then each type's
    # amount f64, LE):
    # click 1, impression 3.
    return struct.pack("<Idd", now_b // BUCKET, 1, 3)


def ring_round(conn, sha, keys, now_b, per_call):
    calls = []
    for first in range(0, keys, per_call):
        ks = range(first, min(keys, first + per_call))
        calls.append(("EVALSHA", sha, str(len(ks)), *[f"cnt:item:{k}" for k in ks],
                      str(KEEP * 1000), str(RING), str(WIDTH), *[ring_ops(now_b) for k in ks]))
    conn.many(calls)


def fill_ring(conn, sha, keys):
    """Every key full in rankd's layout: every bucket of the ring written."""
    conn.many([("FLUSHALL",)])
    for b in range(NOW0 - KEEP, NOW0 + 1, BUCKET):
        ring_round(conn, sha, keys, b, 64)
    return conn.many([("OBJECT", "ENCODING", "cnt:item:0")])[0]


def lua_round(conn, sha, keys, now_b):
    """The script of one field per bucket that the ring replaced: HINCRBY each, then drop
    the fields older than the window (HKEYS + Lua when the oldest aged out)."""
    conn.many([("EVALSHA", sha, "1", f"cnt:item:{k}", str(KEEP * 1000), str(KEEP), str(now_b),
                "2", f"click:{now_b}", "1", f"impression:{now_b}", "3") for k in range(keys)])


def rbw_round(conn, keys, now_b):
    names = [f"cnt:item:{k}" for k in range(keys)]
    marks = conn.many([("HMGET", n, "_lo", "_hi") for n in names])
    second, scan = [], []
    for n, (lo, hi) in zip(names, marks):
        top = max(now_b, int(hi or 0))
        cutoff = top - KEEP
        second += [("HINCRBY", n, f"click:{now_b}", "1"), ("HINCRBY", n, f"impression:{now_b}", "3")]
        if lo is not None and int(lo) < cutoff:
            second.append(("HKEYS", n))
            scan.append((n, cutoff, len(second) - 1))
            second.append(("HSET", n, "_lo", str(cutoff), "_hi", str(top)))
        elif hi is None or int(hi) != top:
            second.append(("HSET", n, "_hi", str(top)))
        second.append(("PEXPIRE", n, str(KEEP * 1000)))
    replies = conn.many(second)
    third = []
    for n, cutoff, at in scan:
        old = [f for f in replies[at] if ":" in f and int(f.rsplit(":", 1)[1]) < cutoff]
        if old:
            third.append(("HDEL", n, *old))
    if third:
        conn.many(third)


def measure(conn, keys, rounds, write):
    conn.many([("CONFIG", "RESETSTAT")])
    c0 = cpu(conn)
    for r in range(rounds):
        write(r)
    c1 = cpu(conn)
    return (c1 - c0) / (keys * rounds) * 1e6, command_usec(conn) / (keys * rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    redis = Redis()
    conn = Conn(redis)
    sha = conn.many([("SCRIPT", "LOAD", PER_BUCKET_SCRIPT)])[0]
    ring_sha = conn.many([("SCRIPT", "LOAD", script_text())])[0]
    print(f"redis-server {conn.many([('INFO', 'server')])[0].split('redis_version:')[1].split()[0]}, "
          f"{a.keys} keys x {a.rounds} rounds, 2 increments a write, full demo keys "
          f"({2 * (KEEP // BUCKET + 1)} buckets)")
    rows = []
    for name, write in (
            ("lua steady", lambda r: lua_round(conn, sha, a.keys, NOW0)),
            ("lua aging", lambda r: lua_round(conn, sha, a.keys, NOW0 + (r + 1) * BUCKET)),
            ("read-before-write steady", lambda r: rbw_round(conn, a.keys, NOW0)),
            ("read-before-write aging", lambda r: rbw_round(conn, a.keys, NOW0 + (r + 1) * BUCKET))):
        fill(conn, a.keys)
        rows.append((name,) + measure(conn, a.keys, a.rounds, write))
    for name, per_call in (("ring, a call per key", 1), ("ring, a call per 64 keys", 64)):
        fill_ring(conn, ring_sha, a.keys)
        rows.append((f"{name} steady",) + measure(
            conn, a.keys, a.rounds, lambda r: ring_round(conn, ring_sha, a.keys, NOW0, per_call)))
        rows.append((f"{name} aging",) + measure(
            conn, a.keys, a.rounds,
            lambda r: ring_round(conn, ring_sha, a.keys, NOW0 + (r + 1) * BUCKET, per_call)))
    for name, cpu_us, cmd_us in rows:
        print(f"{name:28s} redis cpu {cpu_us:6.1f} us/key-write   command time {cmd_us:6.1f} us")
    print(f"encoding of a full key: {fill(conn, a.keys)}")
    print(f"MEMORY USAGE of a full key: {conn.many([('MEMORY', 'USAGE', 'cnt:item:0', 'SAMPLES', '0')])[0]} bytes")
    window = [f"{t}:{NOW0 - k * BUCKET}" for t in TYPES for k in range(24)]
    conn.many([("CONFIG", "RESETSTAT")])
    c0 = cpu(conn)
    for _ in range(a.rounds):
        conn.many([("HMGET", f"cnt:item:{k}", *window) for k in range(a.keys)])
    c1 = cpu(conn)
    print(f"read: HMGET of {len(window)} buckets: redis cpu "
          f"{(c1 - c0) / (a.keys * a.rounds) * 1e6:.1f} us/key, command time "
          f"{command_usec(conn) / (a.keys * a.rounds):.1f} us")
    print(f"ring: encoding {fill_ring(conn, ring_sha, a.keys)}, HLEN "
          f"{conn.many([('HLEN', 'cnt:item:0')])[0]}, MEMORY USAGE "
          f"{conn.many([('MEMORY', 'USAGE', 'cnt:item:0', 'SAMPLES', '0')])[0]} bytes")
    fields = sorted({str(((b // BUCKET) % RING) // 8) for b in range(NOW0 - 23 * BUCKET, NOW0 + 1, BUCKET)})
    conn.many([("CONFIG", "RESETSTAT")])
    c0 = cpu(conn)
    for _ in range(a.rounds):
        conn.many([("HMGET", f"cnt:item:{k}", *fields) for k in range(a.keys)])
    c1 = cpu(conn)
    print(f"read: ring HMGET of {len(fields)} fields: redis cpu "
          f"{(c1 - c0) / (a.keys * a.rounds) * 1e6:.1f} us/key, command time "
          f"{command_usec(conn) / (a.keys * a.rounds):.1f} us")
    redis.stop()


if __name__ == "__main__":
    main()
