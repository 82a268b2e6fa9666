#!/usr/bin/env python3
"""The soak test behind ops/soak: one rankd (2 shards) and one redis-server on free
loopback ports, under bounded mixed traffic for MINUTES minutes, with plan reloads every
few seconds and Redis restarts every few minutes. Prints one status line a minute and a
verdict; exits 0 on PASS, 1 on FAIL.

Fails when:
  - rankd exits before the end, or does not drain cleanly (exit 0) on SIGTERM at the end;
  - a request goes unanswered: it was fully sent and the connection closed, reset or
    stayed silent (RESPONSE_TIMEOUT) before a complete response. Rankd is never
    restarted, and a Redis restart must turn into 503/504 (or 200), never a dropped
    request, so there is no excuse;
  - open fds grow: counted with no client connected and every Redis connection live,
    before the traffic and after it;
  - a 5xx answer that no injected fault explains (FAULT_5XX): only a Redis restart
    does, for the requests in flight during its window;
  - (full mode, runs of 6 minutes or more) RSS at the end exceeds 1.10 x RSS at minute 5.
--short (ops/test) judges everything but RSS.

Standard library only: asyncio raw sockets so that the client decides exactly what goes
on the wire (garbage, partial heads) and sees exactly when a connection drops.
"""
import argparse
import asyncio
import collections
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "support"))
from exit_status import exit_problem  # noqa: E402

RESPONSE_TIMEOUT = 15.0  # > --read-timeout-ms (10 s): every legit answer comes sooner
MAX_BODY = 65536         # rankd's --max-body-bytes here: a cheap oversized body
USERS = 10000            # seeded users (`rankd seed` default, docs/data.md)
RELOAD_EVERY = 3.0       # seconds between SIGHUPs
# The wanted total is ~300 req/s: enough to churn every code path for hours, well under
# what 2 shared cores serve, so latency never drifts into deadlines from load alone.
KEEPALIVE_WORKERS = 8
KEEPALIVE_INTERVAL = 8 / 250   # each worker ~31 req/s -> ~250 req/s of valid traffic
ABUSE_WORKERS = 2
ABUSE_INTERVAL = 2 / 40        # ~40 req/s of bad requests, each on a new connection

# Answers each kind of request may get. Anything else is counted as "unexpected" (and a
# 5xx fails the run unless FAULT_5XX explains it).
EXPECTED = {
    "rank": {200, 503, 504},       # 503/504 while Redis restarts
    "rank_slow": {200, 503, 504},  # the same request, its head dribbled in pieces
    "pipelined": {200, 503, 504},
    "bad_json": {400},
    "no_user": {400},
    "unknown_plan": {404},
    "bad_param": {422},
    "oversized": {413},
    "garbage": {400},
    "metrics": {200},
    "plans": {200},
    "healthz": {200},
    "readyz": {200, 503},           # 503 while Redis is down
    "not_found": {404},
}

# The 5xx answers an injected fault explains, per kind of request: (status, error code;
# /readyz's 503 says "not_ready"). Reloads and bad requests explain none. A Redis restart
# explains these for a request in flight during its window: from just before Redis is
# stopped until rankd's /readyz answers 200 again after Redis is back (it then has a live
# connection to Redis on every shard). Meanwhile a request finds Redis unreachable (503),
# waits for it past its deadline (504), or reads while the restarted Redis still loads
# its RDB and answers -LOADING (502). Any other 5xx, or one outside every window, fails.
_REDIS_DOWN = {(502, "backend_error"), (503, "unavailable"), (504, "deadline_exceeded")}
FAULT_5XX = {"redis_restart": {"rank": _REDIS_DOWN, "rank_slow": _REDIS_DOWN,
                               "pipelined": _REDIS_DOWN, "readyz": {(503, "not_ready")}}}
READY_AFTER_FAULT = 30.0  # seconds rankd may take to be ready again after Redis is back


def log(msg):
    print(msg, flush=True)


def exit_text(rc):
    return f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- HTTP client ------------------------------------------------------------------

class Unanswered(Exception):
    """The connection ended (EOF, reset, timeout) before a complete response."""


async def read_response(reader):
    """One HTTP/1.1 response -> (status, headers dict, body bytes)."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), RESPONSE_TIMEOUT)
    except asyncio.TimeoutError:
        raise Unanswered(f"no response within {RESPONSE_TIMEOUT}s")
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError) as e:
        raise Unanswered(f"{type(e).__name__} before the head")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    try:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await asyncio.wait_for(reader.readline(), RESPONSE_TIMEOUT)).split(b";")[0], 16)
                chunk = await asyncio.wait_for(reader.readexactly(size + 2), RESPONSE_TIMEOUT)
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            n = int(headers.get("content-length", "0"))
            body = await asyncio.wait_for(reader.readexactly(n), RESPONSE_TIMEOUT)
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
        raise Unanswered(f"{type(e).__name__} in the body")
    return status, headers, body


def request_bytes(method, path, body=b"", extra=""):
    if isinstance(body, str):
        body = body.encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}"
    if method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


class Stats:
    def __init__(self):
        self.codes = collections.Counter()        # status -> count, all kinds
        self.by_kind = collections.Counter()      # (kind, status) -> count
        self.unexpected = collections.Counter()   # (kind, status) -> count
        self.unanswered = collections.Counter()   # kind -> count
        self.examples = []                        # the first few unanswered, for the log
        self.abandoned = 0                        # partial heads we closed on purpose
        self.sent = 0
        self.errors_5xx = []                      # (kind, status, code, sent at, answered at)

    def answer(self, kind, status, body=b"", sent_at=None):
        self.codes[status] += 1
        self.by_kind[kind, status] += 1
        if status not in EXPECTED[kind]:
            self.unexpected[kind, status] += 1
        if status >= 500:
            self.errors_5xx.append((kind, status, error_code(body), sent_at, time.monotonic()))


def error_code(body):
    """The error code of an answer's body ({"error": {"code"}}, or /readyz's "status")."""
    try:
        doc = json.loads(body)
        return doc["error"]["code"] if "error" in doc else doc["status"]
    except (ValueError, KeyError, TypeError):
        return "(no error code)"


class FaultWindows:
    """When each injected fault was on: name -> [[start, end or None while on]]."""

    def __init__(self):
        self.windows = collections.defaultdict(list)

    def begin(self, name):
        self.windows[name].append([time.monotonic(), None])

    def end(self, name):
        self.windows[name][-1][1] = time.monotonic()

    def explains(self, kind, status, code, sent_at, answered_at):
        """Whether a fault in FAULT_5XX explains this 5xx: one that names it was on while
        the request was in flight."""
        for name, by_kind in FAULT_5XX.items():
            if (status, code) not in by_kind.get(kind, ()):
                continue
            for start, end in self.windows[name]:
                if (end is None or sent_at <= end) and answered_at >= start:
                    return True
        return False

    def lost(self, kind, why):
        self.unanswered[kind] += 1
        if len(self.examples) < 10:
            self.examples.append(f"{kind}: {why}")


# --- traffic ----------------------------------------------------------------------

class Traffic:
    def __init__(self, port, plans, stats, stop):
        self.port, self.plans, self.stats, self.stop = port, plans, stats, stop

    def valid_rank_body(self):
        plan = random.choice(self.plans)
        body = {"plan": plan["name"], "user_id": random.randrange(USERS)}
        params = {}
        for name, p in plan.get("params", {}).items():
            if random.random() < 0.5:
                continue  # leave some to their defaults
            if p["type"] == "f64":
                params[name] = round(random.uniform(0, 2), 3)
            elif p["type"] == "i64":
                params[name] = random.randint(p.get("min", 1), min(p.get("max", 100), 100))
            else:
                params[name] = random.choice(["US", "FR", "JP"])
        if params:
            body["params"] = params
        if random.random() < 0.05:
            body["explain"] = True
        return json.dumps(body)

    def bad_param_body(self):
        plan = random.choice(self.plans)
        params = plan.get("params", {})
        if params and random.random() < 0.5:
            name, p = random.choice(list(params.items()))
            # wrong type, or out of bounds
            value = "x" if p["type"] != "str" else 7
            if p["type"] == "i64" and "max" in p and random.random() < 0.5:
                value = p["max"] + 1
            return json.dumps({"plan": plan["name"], "user_id": 1, "params": {name: value}})
        return json.dumps({"plan": plan["name"], "user_id": 1, "params": {"no_such_param": 1}})

    async def keepalive_worker(self):
        """One keep-alive connection, reopened when the server closes it; mostly valid
        /rank, some reads of the other routes, some pipelined pairs."""
        reader = writer = None
        while not self.stop.is_set():
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            r = random.random()
            if r < 0.80:
                reqs = [("rank", request_bytes("POST", "/rank", self.valid_rank_body()))]
            elif r < 0.84:
                # Two requests in one write: answered in order.
                reqs = [("pipelined", request_bytes("POST", "/rank", self.valid_rank_body())),
                        ("healthz", request_bytes("GET", "/healthz"))]
            elif r < 0.86:
                reqs = [("metrics", request_bytes("GET", "/metrics"))]
            elif r < 0.90:
                name = random.choice(self.plans)["name"]
                reqs = [("plans", request_bytes("GET", random.choice(["/plans", f"/plans/{name}"])))]
            elif r < 0.94:
                reqs = [("healthz", request_bytes("GET", "/healthz"))]
            elif r < 0.97:
                reqs = [("readyz", request_bytes("GET", "/readyz"))]
            else:
                reqs = [("not_found", request_bytes("GET", f"/nope/{random.randrange(1000)}"))]
            try:
                sent_at = time.monotonic()
                writer.write(b"".join(b for _, b in reqs))
                await writer.drain()
                self.stats.sent += len(reqs)
            except ConnectionError as e:
                for kind, _ in reqs:
                    self.stats.lost(kind, f"write failed on a keep-alive connection: {e!r}")
                writer = None
                continue
            close = False
            for i, (kind, _) in enumerate(reqs):
                try:
                    status, headers, body = await read_response(reader)
                except Unanswered as e:
                    for k, _ in reqs[i:]:
                        self.stats.lost(k, str(e))
                    close = True
                    break
                self.stats.answer(kind, status, body, sent_at)
                close = close or headers.get("connection", "").lower() == "close"
            if close:
                writer.close()
                writer = None
            await asyncio.sleep(KEEPALIVE_INTERVAL * random.uniform(0.5, 1.5))
        if writer is not None:
            writer.close()

    async def one_shot(self, kind, data, close_after_send=False):
        """A new connection, `data` written, one response read (or, for a partial head,
        closed by us before any response is due)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        sent_at = time.monotonic()
        try:
            if kind == "rank_slow":
                # A head dribbled in 5 pieces over ~0.5 s: must still be answered.
                step = max(1, len(data) // 5)
                for i in range(0, len(data), step):
                    writer.write(data[i:i + step])
                    await writer.drain()
                    await asyncio.sleep(0.1)
            else:
                writer.write(data)
                await writer.drain()
            self.stats.sent += 1
            if close_after_send:
                await asyncio.sleep(random.uniform(0.05, 0.5))
                self.stats.abandoned += 1
                return
            try:
                status, _, body = await read_response(reader)
                self.stats.answer(kind, status, body, sent_at)
            except Unanswered as e:
                self.stats.lost(kind, str(e))
        except ConnectionError as e:
            # A write failing means the server closed before reading what we sent: for
            # the kinds the server may refuse early (oversized), the answer can be lost
            # in the reset; try to read it anyway.
            try:
                status, _, body = await read_response(reader)
                self.stats.answer(kind, status, body, sent_at)
            except Unanswered:
                self.stats.lost(kind, f"write failed: {e!r}")
        finally:
            writer.close()

    async def abuse_worker(self):
        """Bad requests, each on its own connection (the server may close after them)."""
        while not self.stop.is_set():
            r = random.random()
            if r < 0.2:
                await self.one_shot("bad_json", request_bytes("POST", "/rank", random.choice(
                    ['{"plan":', '{"plan":"feed","user_id":}', "nope", '[1,2', '{"plan":"feed","user_id":-1}'])))
            elif r < 0.3:
                await self.one_shot("no_user", request_bytes("POST", "/rank", '{"plan":"feed"}'))
            elif r < 0.4:
                await self.one_shot("unknown_plan", request_bytes("POST", "/rank", '{"plan":"no_such_plan","user_id":1}'))
            elif r < 0.55:
                await self.one_shot("bad_param", request_bytes("POST", "/rank", self.bad_param_body()))
            elif r < 0.65:
                # Content-Length over the limit and only part of the body: 413 is due
                # from the head alone.
                head = (f"POST /rank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {MAX_BODY * 4}\r\n\r\n").encode()
                await self.one_shot("oversized", head + b"{" + b" " * 1000)
            elif r < 0.8:
                # A TLS-hello-like start: never a valid method, whatever follows.
                garbage = b"\x16\x03\x01" + bytes(random.randrange(256) for _ in range(random.randrange(8, 300)))
                await self.one_shot("garbage", garbage + b"\r\n\r\n")
            elif r < 0.9:
                full = request_bytes("POST", "/rank", self.valid_rank_body())
                await self.one_shot("partial", full[:random.randrange(1, len(full) - 1)], close_after_send=True)
            else:
                await self.one_shot("rank_slow", request_bytes("POST", "/rank", self.valid_rank_body()))
            await asyncio.sleep(ABUSE_INTERVAL * random.uniform(0.5, 1.5))


# --- processes ----------------------------------------------------------------------

class Redis:
    """redis-server persisted to an RDB in DIR, so that a restart keeps the data."""

    def __init__(self, tmp):
        self.port = free_port()
        self.dir = os.path.join(tmp, "redis")
        os.makedirs(self.dir)
        self.proc = None
        self.restarts = 0

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
             "--dbfilename", "soak.rdb", "--save", "3600 1", "--appendonly", "no",
             "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        PROCS.append(self.proc)
        for _ in range(200):
            if self.cli("ping") == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True)
        return r.stdout.strip()

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


PROCS = []  # every process started here, killed at exit whatever happened


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def metric_sum(text, family):
    """Sum of every sample of `family` (all label sets), or None when absent."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(family + "{") or line.startswith(family + " ") or \
                (family.endswith("}") and line.startswith(family[:-1] + ",")):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


async def get(port, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_bytes("GET", path, extra="Connection: close\r\n"))
        await writer.drain()
        return await read_response(reader)
    finally:
        writer.close()


# --- the run ------------------------------------------------------------------------

async def soak(args, tmp):
    failures = []
    stats = Stats()
    faults = FaultWindows()
    rankd_bin = os.path.join(args.build, "src", "cli", "rankd")

    # Plans: a copy of the shipped ones, so that reloads can touch and rewrite them.
    plans_dir = os.path.join(tmp, "plans")
    os.makedirs(plans_dir)
    for f in sorted(glob.glob(os.path.join(args.root, "plans", "*.plan.json")) +
                    glob.glob(os.path.join(args.root, "plans", "*.model.json")) +
                    glob.glob(os.path.join(args.root, "plans", "*.onnx"))):
        shutil.copy(f, plans_dir)
    plans = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(plans_dir, "*.plan.json")))]
    log(f"soak: {len(plans)} plans: {' '.join(p['name'] for p in plans)}")

    redis = Redis(tmp)
    redis.start()
    subprocess.run([rankd_bin, "seed", "--redis", f"redis://127.0.0.1:{redis.port}", "--users", str(USERS),
                    "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    redis.cli("save")  # the RDB a SIGKILLed redis restarts from
    keys = redis.cli("dbsize")

    port = free_port()
    rankd_log = open(os.path.join(tmp, "rankd.log"), "w")
    rankd = subprocess.Popen(
        [rankd_bin, "serve", "--host", "127.0.0.1", "--port", str(port), "--shards", "2",
         "--plans", plans_dir, "--redis", f"redis_default=redis://127.0.0.1:{redis.port}",
         "--max-body-bytes", str(MAX_BODY), "--log-level", "warn"],
        stdout=subprocess.DEVNULL, stderr=rankd_log)
    PROCS.append(rankd)

    async def ready(tries=300):
        for _ in range(tries):
            if rankd.poll() is not None:
                return False
            try:
                if (await get(port, "/readyz"))[0] == 200:
                    return True
            except (OSError, Unanswered):
                pass
            await asyncio.sleep(0.05)
        return False

    async def quiet_fds():
        """fds with no client connection and every Redis connection live: wait until
        the server has seen our closes and its count settles (bounded)."""
        last, same = None, 0
        for _ in range(100):
            n = fd_count(rankd.pid)
            same = same + 1 if n == last else 0
            last = n
            if same >= 5:
                break
            await asyncio.sleep(0.1)
        return last

    # The first readiness waits for the demo's item index (30,000 embedded items: ~30 s on
    # a quiet 2-core machine, more beside a build): up to 3 minutes.
    if not await ready(tries=3600):
        failures.append("rankd did not become ready")
        return failures, stats, rankd, redis, rankd_log
    await asyncio.sleep(0.5)
    fds_start = await quiet_fds()
    log(f"soak: rankd pid {rankd.pid} on 127.0.0.1:{port} (2 shards, {args.build}), "
        f"redis on {redis.port} ({keys} keys, RDB in the temp dir); fds at rest {fds_start}; "
        f"{args.minutes:g} min{' (short: RSS not judged)' if args.short else ''}")

    stop = asyncio.Event()
    traffic = Traffic(port, plans, stats, stop)
    start = time.monotonic()
    end = start + args.minutes * 60
    reloads = [0, 0]  # ok-intended, bad-intended

    async def reloader():
        """SIGHUP every few seconds, after touching or rewriting a plan file; every
        fifth time with a broken plan file present (the reload must be rejected and the
        old set keep serving), removed for the next one."""
        i = 0
        broken = os.path.join(plans_dir, "zz_broken.plan.json")
        if args.reload_every <= 0:
            return
        while not stop.is_set():
            await asyncio.sleep(args.reload_every)
            if os.path.exists(broken):
                os.remove(broken)
            i += 1
            victim = os.path.join(plans_dir, random.choice(plans)["name"] + ".plan.json")
            if i % 5 == 0:
                with open(broken, "w") as f:
                    f.write('{"schema_version": 1, "name": "zz_broken", "nodes": [')
                reloads[1] += 1
            elif i % 2:
                os.utime(victim)
                reloads[0] += 1
            else:
                # Rewrite it in place through a rename: same plan, new inode.
                text = open(victim).read()
                with open(victim + ".tmp", "w") as f:
                    f.write(text)
                os.replace(victim + ".tmp", victim)
                reloads[0] += 1
            if rankd.poll() is None:
                rankd.send_signal(signal.SIGHUP)

    async def redis_restarter():
        """Redis down and up again every few minutes, alternately SIGTERM (it saves) and
        SIGKILL (it restarts from the seeded RDB); down for a second or so."""
        if args.no_redis_restarts:
            return
        first, every = (45, 60) if args.short or args.minutes <= 3 else (120, 180)
        # None in the last 20 s (answers must recover before the verdict): a soak of a
        # minute or two restarts Redis a third of the way in.
        first = min(first, (end - start) / 3)
        nxt = start + first
        while not stop.is_set():
            await asyncio.sleep(min(1.0, max(0.0, nxt - time.monotonic())))
            if time.monotonic() < nxt or time.monotonic() > end - 20:
                continue
            sig = signal.SIGTERM if redis.restarts % 2 == 0 else signal.SIGKILL
            faults.begin("redis_restart")
            await asyncio.to_thread(redis.stop, sig)
            await asyncio.sleep(random.uniform(0.5, 1.5))
            await asyncio.to_thread(redis.start)
            redis.restarts += 1
            after = await asyncio.to_thread(redis.cli, "dbsize")
            # At least the seeded keys: rankd adds its own (served state, page snapshots),
            # which a SIGTERM's save keeps.
            if after < keys:
                failures.append(f"redis restarted with {after} keys, {keys} seeded (RDB not kept)")
            back = await ready_again()
            faults.end("redis_restart")
            if back is None:
                failures.append(f"rankd not ready within {READY_AFTER_FAULT:g} s after Redis came back")
            log(f"soak: redis restart {redis.restarts} ({signal.Signals(sig).name}), {after} keys, "
                f"rankd ready again {back if back is None else f'{back:.2f} s'} after Redis")
            nxt += every

    async def ready_again():
        """Seconds until /readyz answers 200 (polled every 20 ms), or None past
        READY_AFTER_FAULT: the end of a Redis restart's fault window."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < READY_AFTER_FAULT and rankd.poll() is None:
            try:
                if (await get(port, "/readyz"))[0] == 200:
                    return time.monotonic() - t0
            except (OSError, Unanswered):
                pass
            await asyncio.sleep(0.02)
        return None

    samples = {}  # minute -> rss kB

    async def monitor():
        minute = 0
        while minute < args.minutes:
            await asyncio.sleep(max(0.0, start + (minute + 1) * 60 - time.monotonic()))
            minute += 1
            if rankd.poll() is not None:
                return
            rss = rss_kb(rankd.pid)
            samples[minute] = rss
            fds = fd_count(rankd.pid)
            timers = inflight = conns = None
            try:
                _, _, body = await get(port, "/metrics")
                text = body.decode()
                timers = metric_sum(text, "rankd_loop_timers")
                inflight = metric_sum(text, "rankd_inflight_requests")
                conns = metric_sum(text, "rankd_open_connections")
            except (OSError, Unanswered) as e:
                stats.lost("metrics", f"monitor scrape: {e}")
            fmt = lambda v: "n/a" if v is None else str(int(v))
            codes = " ".join(f"{c}:{n}" for c, n in sorted(stats.codes.items()))
            log(f"soak: min {minute}/{args.minutes:g} rss {rss / 1024:.1f} MiB  fds {fds}  timers {fmt(timers)}  "
                f"inflight {fmt(inflight)}  conns {fmt(conns)}  reloads {sum(reloads)}  "
                f"redis_restarts {redis.restarts}  codes {codes}  unanswered {sum(stats.unanswered.values())}")

    async def watchdog():
        while not stop.is_set():
            if rankd.poll() is not None:
                failures.append(f"rankd exited during the run: {exit_text(rankd.returncode)}")
                stop.set()
                return
            if time.monotonic() >= end:
                stop.set()
                return
            await asyncio.sleep(0.2)

    workers = [asyncio.create_task(traffic.keepalive_worker()) for _ in range(KEEPALIVE_WORKERS)]
    workers += [asyncio.create_task(traffic.abuse_worker()) for _ in range(ABUSE_WORKERS)]
    helpers = [asyncio.create_task(reloader()), asyncio.create_task(redis_restarter())]
    mon = asyncio.create_task(monitor())
    await watchdog()
    # Workers finish the request they are on (bounded by RESPONSE_TIMEOUT) and close.
    results = await asyncio.gather(*workers, return_exceptions=True)
    errors = collections.Counter(repr(r) for r in results if isinstance(r, Exception))
    if errors and rankd.poll() is None:  # after a crash, refused connects say nothing new
        failures += [f"{n} traffic worker(s) failed: {e}" for e, n in errors.items()]
    for h in helpers:
        h.cancel()
    for r in await asyncio.gather(*helpers, return_exceptions=True):
        if isinstance(r, Exception):  # e.g. redis-server did not come back
            failures.append(f"reloader/restarter failed: {r!r}")
    try:
        await asyncio.wait_for(mon, 10)
    except asyncio.TimeoutError:
        pass
    broken = os.path.join(plans_dir, "zz_broken.plan.json")
    if os.path.exists(broken):
        os.remove(broken)

    if rankd.poll() is None:
        if not await ready():
            failures.append("rankd not ready after the traffic stopped")
        fds_end = await quiet_fds()
        try:  # what rankd says it did with our SIGHUPs (the start counts as one ok load)
            text = (await get(port, "/metrics"))[2].decode()
            ok = metric_sum(text, 'rankd_plan_reloads_total{result="ok"}')
            err = metric_sum(text, 'rankd_plan_reloads_total{result="error"}')
            log(f"soak: rankd_plan_reloads_total ok {ok:g}, error {err:g}")
        except (OSError, Unanswered, TypeError) as e:
            log(f"soak: could not read rankd_plan_reloads_total: {e!r}")
        log(f"soak: fds at rest: {fds_start} before, {fds_end} after")
        if fds_end > fds_start:
            failures.append(f"open fds grew: {fds_start} at rest before the traffic, {fds_end} after")

    n_lost = sum(stats.unanswered.values())
    if n_lost:
        examples = collections.Counter(stats.examples)
        failures.append(f"{n_lost} request(s) unanswered, by kind {dict(stats.unanswered)}; first ones: "
                        + "; ".join(f"{e} (x{n})" for e, n in examples.items()))
    unexplained = [e for e in stats.errors_5xx if not faults.explains(*e)]
    explained = len(stats.errors_5xx) - len(unexplained)
    if unexplained:
        by = collections.Counter((k, st, c) for k, st, c, _, _ in unexplained)
        first = "; ".join(f"{k} {st} {c} sent at {t0 - start:.2f} s" for k, st, c, t0, _ in unexplained[:5])
        failures.append(f"{len(unexplained)} 5xx answer(s) no injected fault explains, by kind: "
                        + ", ".join(f"{k} {st} {c} x{n}" for (k, st, c), n in by.items())
                        + f"; first: {first}; Redis restart windows at "
                        + ", ".join(f"{a - start:.2f}-{b - start if b else 0:.2f} s"
                                    for a, b in faults.windows["redis_restart"]))
    log(f"soak: 5xx answers: {explained} explained by the Redis restarts, {len(unexplained)} unexplained")
    if not args.short:
        if 5 in samples and args.minutes >= 6:
            last = samples[max(samples)]
            if last > 1.10 * samples[5]:
                failures.append(f"RSS grew: {last} kB at the end > 1.10 x {samples[5]} kB at minute 5")
        elif args.minutes < 6:
            log("soak: RSS growth not judged (needs 6 minutes or more)")
    if stats.unexpected:
        log("soak: unexpected answers (a 5xx fails the run unless a fault explains it): " +
            " ".join(f"{k}:{c}={n}" for (k, c), n in sorted(stats.unexpected.items())))
    log(f"soak: sent {stats.sent} requests, answered {sum(stats.codes.values())}, "
        f"partial heads abandoned by us {stats.abandoned}, reloads {reloads[0]} ok + {reloads[1]} rejected, "
        f"redis restarts {redis.restarts}")
    return failures, stats, rankd, redis, rankd_log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("minutes", type=float)
    ap.add_argument("--short", action="store_true", help="judge everything but RSS growth")
    ap.add_argument("--build", required=True, help="build dir holding src/cli/rankd")
    ap.add_argument("--root", required=True, help="source root (plans/)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, RDB)")
    # To tell which ingredient breaks a failing run: 0 turns reloads / Redis restarts off.
    ap.add_argument("--reload-every", type=float, default=RELOAD_EVERY, help="seconds between SIGHUPs (0: none)")
    ap.add_argument("--no-redis-restarts", action="store_true")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="rankd-soak-")
    failures = []
    try:
        failures, _, rankd, redis, rankd_log = asyncio.run(soak(args, tmp))
        if rankd.poll() is None:
            # A clean drain is part of the verdict: exit 0 within the drain timeout.
            rankd.send_signal(signal.SIGTERM)
            try:
                rc = rankd.wait(timeout=15)
            except subprocess.TimeoutExpired:
                rankd.kill()
                rc = "hung (killed)"
            if rc != 0:
                failures.append(f"rankd did not drain cleanly on SIGTERM: {rc if isinstance(rc, str) else exit_text(rc)}")
        rankd_log.close()
        # A sanitizer report fails the run even when rankd exited 0 (UBSan goes on after one).
        with open(os.path.join(tmp, "rankd.log"), errors="replace") as f:
            problem = exit_problem("rankd", 0, f.read())
        if problem:
            failures.append(problem)
        if failures:
            tail = open(os.path.join(tmp, "rankd.log"), errors="replace").read().splitlines()[-30:]
            log("soak: rankd log (last 30 lines):\n  " + "\n  ".join(tail))
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        if args.keep:
            log(f"soak: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        log("soak: FAIL: " + " | ".join(failures))
        return 1
    log("soak: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
