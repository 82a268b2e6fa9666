"""Tracking facts on a Redis Cluster (question 6 of docs/tracking-notes.md): does the source
node invalidate keys it migrates out (redis-cli --cluster reshard), and does a replica
invalidate keys read from it (READONLY) when its master writes them? Needs a running
`ops/cluster up`; pass one node as host:port.
Run: /usr/bin/python3 bench/tracking_cluster.py 127.0.0.1:PORT"""
import subprocess
import sys
import time

from resp2raw import Conn

INV = "__redis__:invalidate"


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def slot_of(key):
    return crc16(key.encode()) % 16384


def pair(port):
    i = Conn(port)
    iid = i.cmd("CLIENT", "ID")
    i.cmd("SUBSCRIBE", INV)
    d = Conn(port)
    d.cmd("READONLY")
    assert d.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", iid) == "OK"
    return i, d


def nodes(port):
    out = {}
    for line in Conn(port).cmd("CLUSTER", "NODES").decode().splitlines():
        f = line.split()
        out[f[0]] = {"port": int(f[1].split(":")[1].split("@")[0]), "flags": f[2],
                     "master": f[3], "slots": f[8:]}
    return out


def main():
    host, port = sys.argv[1].split(":")
    ns = nodes(int(port))
    masters = {k: v for k, v in ns.items() if "master" in v["flags"]}
    src_id, src = sorted(masters.items(), key=lambda kv: kv[1]["port"])[0]
    dst_id, dst = sorted(masters.items(), key=lambda kv: kv[1]["port"])[1]
    first = int(src["slots"][0].split("-")[0])   # reshard moves the source's lowest slots
    keys = []
    n = 0
    while len(keys) < 3:
        k = f"mig:{n}"
        if slot_of(k) == first:
            keys.append(k)
        n += 1
    print(f"Q6a source {src['port']} -> target {dst['port']}, slot {first}, keys {keys}")
    w = Conn(src["port"])
    for k in keys:
        w.cmd("SET", k, "v")
    i, d = pair(src["port"])
    for k in keys:
        d.cmd("GET", k)
    r = subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{src['port']}",
                        "--cluster-from", src_id, "--cluster-to", dst_id, "--cluster-slots", "1",
                        "--cluster-yes"], capture_output=True, text=True, timeout=60)
    print("  reshard exit", r.returncode, "moved:", [l for l in r.stdout.splitlines() if "Moving slot" in l][:3])
    got = i.read_within(0.5)
    print(f"  invalidations on the source's subscriber: {len(got)}")
    for v, raw in got:
        print(f"    {raw!r}")
    print("  D (on source) GET after the move ->", d.cmd("GET", keys[0]))
    # move it back so the cluster is as before
    subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{src['port']}",
                    "--cluster-from", dst_id, "--cluster-to", src_id, "--cluster-slots", "1",
                    "--cluster-yes"], capture_output=True, text=True, timeout=60)

    # Q6b: replica
    rep_id, rep = [(k, v) for k, v in ns.items() if v["master"] == src_id][0]
    key = keys[1]
    rc = Conn(rep["port"])
    end = time.monotonic() + 30
    while time.monotonic() < end:
        info = rc.cmd("INFO", "replication").decode()
        if "master_link_status:up" in info and "master_sync_in_progress:0" in info:
            break
        time.sleep(0.1)
    print("  replica link:", [l for l in info.split() if l.startswith("master_link_status")])
    mw = Conn(src["port"])
    print(f"Q6b replica {rep['port']} of master {src['port']}, key {key} ->",
          mw.cmd("SET", key, "v1"))
    mw.cmd("WAIT", 1, 1000)
    ri, rd = pair(rep["port"])
    print("  READONLY GET on the replica ->", rd.cmd("GET", key))
    t0 = time.monotonic()
    mw.cmd("SET", key, "v2")
    ok = ri.readable(5)
    dt = round((time.monotonic() - t0) * 1000, 1)
    print("  master SET -> invalidation on the replica's subscriber:", ok,
          f"after {dt} ms", ri.read()[1] if ok else "")
    ri.read_within(0.3)
    rd.cmd("GET", key)
    mw.cmd("PEXPIRE", key, 200)
    t0 = time.monotonic()
    ok = ri.readable(5)
    print("  key expiring on the master (PEXPIRE 200 -> invalidates at once: it is a write);",
          ok, ri.read()[1] if ok else "")
    rd.cmd("GET", key)
    t0 = time.monotonic()
    ok = ri.readable(10)
    print(f"  then its expiry: invalidation on the replica after {round((time.monotonic() - t0) * 1000)} ms:",
          ok, ri.read()[1] if ok else "")
    mw.cmd("SET", key, "v3")
    rd.cmd("GET", key)
    mw.cmd("FLUSHALL")
    ok = ri.readable(5)
    print("  FLUSHALL on the master -> on the replica's subscriber:", ri.read()[1] if ok else None)


if __name__ == "__main__":
    main()
