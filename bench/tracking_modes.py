"""Redis cost of client-side-cache tracking, default mode vs BCAST+PREFIX (question 7 of
docs/tracking-notes.md). For each mode it starts a fresh redis-server on a free loopback
port (no persistence), loads 20,000 `item:N` hashes and 2,000 `media:N` lists, and runs
two "shards", each a subscriber connection (SUBSCRIBE __redis__:invalidate) plus a data
connection whose tracking is redirected to it. Each data connection first reads every key
once (so default mode tracks them all), then both read random keys (HMGET item:N with 4
fields, LRANGE media:N 0 19) at --reads per second in all, while a writer does
--item-writes HSET item:N/s and --media-writes LPUSH media:N/s. Over the measured
--seconds it reports Redis's CPU (INFO used_cpu_user+used_cpu_sys delta), used_memory
(minus that of the same data with tracking off), tracking_total_keys/items/prefixes and
the invalidation messages and keys each subscriber received.
Mode "off" is the baseline: the same load with no tracking.
Run: /usr/bin/python3 bench/tracking_modes.py --seconds 30"""
import argparse
import random
import threading
import time

from resp2raw import Conn, Server

INV = "__redis__:invalidate"
PREFIXES = ["item:", "media:", "user:", "follow:", "recs:"]
FIELDS = ["author", "likes", "age_s", "category", "country", "quality", "nsfw"]


def info(c, section):
    out = {}
    for line in c.cmd("INFO", section).decode().split("\r\n"):
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


def load(port, items, media):
    c = Conn(port)
    batch = []
    for n in range(items):
        batch.append(["HSET", f"item:{n}", "author", n % 5000, "likes", n, "age_s", 3600,
                      "category", "music", "country", "FR", "quality", "0.5", "nsfw", 0])
    for n in range(media):
        batch.append(["RPUSH", f"media:{n}", *range(n * 20, n * 20 + 20)])
    for j in range(0, len(batch), 1000):
        c.send_many(batch[j:j + 1000])
        for _ in batch[j:j + 1000]:
            c.read()
    c.close()


class Shard:
    def __init__(self, port, mode):
        self.inv = Conn(port)
        self.inv_id = self.inv.cmd("CLIENT", "ID")
        assert self.inv.cmd("SUBSCRIBE", INV)[0] == b"subscribe"
        self.data = Conn(port)
        if mode == "default":
            r = self.data.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", self.inv_id)
        elif mode == "bcast":
            args = ["CLIENT", "TRACKING", "ON", "REDIRECT", self.inv_id, "BCAST"]
            for p in PREFIXES:
                args += ["PREFIX", p]
            r = self.data.cmd(*args)
        else:
            r = "OK"
        assert r == "OK", r
        self.messages = 0
        self.keys = 0
        self.flushes = 0
        self.reads = 0
        self.counting = False
        self.stop = False
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self):
        while True:
            try:
                v = self.inv.read()[0]
            except (OSError, EOFError):
                return
            if self.counting:
                self.messages += 1
                if v[2] is None:
                    self.flushes += 1
                else:
                    self.keys += len(v[2])

    def warm(self, items, media):
        cmds = [["HMGET", f"item:{n}", *FIELDS[:4]] for n in range(items)]
        cmds += [["LRANGE", f"media:{n}", 0, 19] for n in range(media)]
        for j in range(0, len(cmds), 1000):
            self.data.send_many(cmds[j:j + 1000])
            for _ in cmds[j:j + 1000]:
                self.data.read()

    def run_reads(self, rate, items, media, rng):
        tick = 0.01
        t = time.monotonic()
        carry = 0.0
        while not self.stop:
            carry += rate * tick
            n = int(carry)
            carry -= n
            cmds = []
            for _ in range(n):
                if rng.random() < 0.9:
                    cmds.append(["HMGET", f"item:{rng.randrange(items)}", *FIELDS[:4]])
                else:
                    cmds.append(["LRANGE", f"media:{rng.randrange(media)}", 0, 19])
            if cmds:
                self.data.send_many(cmds)
                for _ in cmds:
                    self.data.read()
                if self.counting:
                    self.reads += len(cmds)
            t += tick
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def run_writer(port, item_rate, media_rate, items, media, state, rng):
    c = Conn(port)
    tick = 0.01
    t = time.monotonic()
    ci = cm = 0.0
    while not state["stop"]:
        ci += item_rate * tick
        cm += media_rate * tick
        cmds = []
        while ci >= 1:
            ci -= 1
            cmds.append(["HSET", f"item:{rng.randrange(items)}", "likes", rng.randrange(10**6)])
        while cm >= 1:
            cm -= 1
            cmds.append(["LPUSH", f"media:{rng.randrange(media)}", rng.randrange(10**6)])
        if cmds:
            c.send_many(cmds)
            for _ in cmds:
                c.read()
            if state["counting"]:
                state["writes"] += len(cmds)
        t += tick
        delay = t - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def run_mode(mode, a):
    srv = Server()
    try:
        load(srv.port, a.items, a.media)
        mon = Conn(srv.port)
        shards = [Shard(srv.port, mode) for _ in range(a.shards)]
        for s in shards:
            s.warm(a.items, a.media)
        state = {"stop": False, "counting": False, "writes": 0}
        threads = [threading.Thread(target=run_writer, daemon=True,
                                    args=(srv.port, a.item_writes, a.media_writes, a.items,
                                          a.media, state, random.Random(2)))]
        for k, s in enumerate(shards):
            threads.append(threading.Thread(target=s.run_reads, daemon=True,
                                            args=(a.reads / a.shards, a.items, a.media,
                                                  random.Random(10 + k))))
        for t in threads:
            t.start()
        time.sleep(a.settle)
        before = info(mon, "everything")
        t0 = time.monotonic()
        state["counting"] = True
        for s in shards:
            s.counting = True
        time.sleep(a.seconds)
        after = info(mon, "everything")
        state["counting"] = False
        for s in shards:
            s.counting = False
        el = time.monotonic() - t0
        state["stop"] = True
        for s in shards:
            s.stop = True
        for t in threads:
            t.join(timeout=5)

        def cpu(i):
            return float(i["used_cpu_user"]) + float(i["used_cpu_sys"])
        return {
            "mode": mode,
            "seconds": round(el, 1),
            "reads_per_s": round(sum(s.reads for s in shards) / el),
            "writes_per_s": round(state["writes"] / el),
            "cpu_pct": round(100 * (cpu(after) - cpu(before)) / el, 2),
            "used_memory": int(after["used_memory"]),
            "tracking_total_keys": int(after["tracking_total_keys"]),
            "tracking_total_items": int(after["tracking_total_items"]),
            "tracking_total_prefixes": int(after["tracking_total_prefixes"]),
            "inv_msgs_per_s": [round(s.messages / el, 1) for s in shards],
            "inv_keys_per_s": [round(s.keys / el, 1) for s in shards],
            "flush_msgs": [s.flushes for s in shards],
        }
    finally:
        srv.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--settle", type=float, default=2, help="seconds of load before measuring")
    p.add_argument("--reads", type=float, default=3000, help="reads/s over all shards")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--items", type=int, default=20000)
    p.add_argument("--media", type=int, default=2000)
    p.add_argument("--item-writes", type=float, default=200)
    p.add_argument("--media-writes", type=float, default=20)
    p.add_argument("--modes", default="off,default,bcast")
    a = p.parse_args()
    rows = [run_mode(m, a) for m in a.modes.split(",")]
    base = next((r["used_memory"] for r in rows if r["mode"] == "off"), None)
    for r in rows:
        if base is not None:
            r["used_memory_vs_off"] = r["used_memory"] - base
        print(" ".join(f"{k}={v}" for k, v in r.items()), flush=True)


if __name__ == "__main__":
    main()
