"""Test harness for integration tests: a real redis-server and a real rankd process on
free loopback ports, spoken to over real sockets. Standard library only.

Every process started here is stopped at exit (also when a test fails), every temporary
file and folder made here is removed then, and every wait is bounded, so a broken server
fails the test instead of hanging it. rankd is stopped with SIGTERM, as in production: it
drains and exits 0, and in a sanitizer build LeakSanitizer checks it on the way out.
Every rankd's exit is checked once, by the test (Rankd.stop, Rankd.wait_exit) or else at
exit: an exit status other than the one expected, or a sanitizer report in its stderr,
fails the run.
"""
import atexit
import http.client
import json
import mmap
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from exit_status import check_exit, exit_problem  # noqa: F401 (tests import them from here)

SOURCE_ROOT = os.environ.get("RANKD_SOURCE_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_ROOT = os.environ.get("RANKD_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build"))
RANKD = os.path.join(BUILD_ROOT, "src", "cli", "rankd")


def _sanitized():
    """ASan or TSan: both slow rankd down (2-5x) and add shadow memory to its RSS."""
    try:
        with open(RANKD, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as binary:
            return binary.find(b"__asan_init") >= 0 or binary.find(b"__tsan_init") >= 0
    except (OSError, ValueError):  # not built yet, or empty
        return False


# Tests that only need load to happen (not a given amount of it) send less of it here.
SANITIZED = _sanitized()

_procs = []     # every child process, stopped at exit
_servers = []   # every Rankd started, to show the stderr of one that died
_temps = []     # temporary files and folders, removed at exit


def temp_dir(prefix):
    """A new temporary folder, removed at exit."""
    d = tempfile.mkdtemp(prefix=prefix)
    _temps.append(d)
    return d


def temp_path(prefix):
    """A path in a new temporary folder (the file is not created), removed at exit."""
    return os.path.join(temp_dir(prefix), "file")


def _check_rankds():
    """Every rankd whose exit no test checked: SIGTERM to the ones still running, then
    the check; returns a message per one that did not exit 0 cleanly (a crash between
    tests, a failed drain, a leak or UBSan report in a sanitizer build)."""
    bad = []
    for srv in _servers:
        if srv.checked:
            continue
        try:
            srv.stop()
        except AssertionError as e:
            bad.append(str(e))
    return bad


def _cleanup():
    """Stops every process and removes every temporary path; returns what went wrong."""
    bad = _check_rankds()
    for p in _procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
    for path in _temps:
        shutil.rmtree(path, ignore_errors=True)
    _temps.clear()
    return bad


atexit.register(_cleanup)


def spawn(args, log_path=None, env=None):
    """A child process (stdout and stderr into log_path, or discarded), stopped at exit."""
    out = open(log_path, "w") if log_path else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    finally:
        if log_path:
            out.close()
    _procs.append(proc)
    return proc


def free_port():
    """A port free right now. Another process may be handed the same one before it is
    bound, so servers that can take port 0 do (Rankd); the others retry (Redis)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, headers=None, body=None, timeout=10):
    """One request to 127.0.0.1:port on its own connection: (status, headers by
    lower-case name, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def one_write_request(port, method, path, body=None, timeout=5):
    """A request whose head and body leave in one send(2), on its own connection:
    (status, body bytes). http.client writes them apart, which may arrive as two reads:
    past its input budget a shard serves only a request that came whole in one read."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else (body or b"")
    head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return int(got.split(b" ", 2)[1]), got.partition(b"\r\n\r\n")[2]


def listening_ports(pid):
    """The TCP ports process `pid` listens on, read from /proc."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


def process_state(pid):
    """The state letter of /proc/PID/stat: "T" once stopped by SIGSTOP, "S" asleep, ..."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_until(cond, timeout=10.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Traffic:
    """Background traffic for a test that changes something under load: `step()` runs
    again and again on a thread of its own until the block ends (`with Traffic(step) as
    t:`). An exception in a step (a connection refused, a timeout, an assertion of the
    step's own) is recorded and ends the thread; leaving the block joins it and fails
    when a step raised or when no step completed, so that a test cannot pass on traffic
    that never ran. `t.steps` counts the completed steps; `t.wait_steps(n)` waits for n
    more."""

    def __init__(self, step, what="traffic"):
        self.step, self.what = step, what
        self.steps = 0
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=what, daemon=True)

    def _run(self):
        try:
            while not self._stop.is_set():
                self.step()
                self.steps += 1
        except BaseException as e:  # noqa: B036 (recorded, raised by the test's thread)
            self.error = (e, traceback.format_exc())

    def __enter__(self):
        self._thread.start()
        return self

    def wait_steps(self, n, timeout=10.0):
        start = self.steps
        wait_until(lambda: self.steps >= start + n or self.error is not None, timeout,
                   what=f"{n} steps of {self.what}")
        self.check()

    def check(self):
        if self.error is not None:
            raise AssertionError(f"{self.what} failed: {self.error[0]!r}\n{self.error[1]}")

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        self._thread.join(30)
        if exc_type is not None:
            return False  # the test's own failure comes first
        assert not self._thread.is_alive(), f"{self.what} did not stop within 30 s"
        self.check()
        assert self.steps > 0, f"{self.what} never completed a step"
        return False


# --- Redis -----------------------------------------------------------------------

def resp_command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class RespClient:
    """A tiny RESP client of the Redis server at 127.0.0.1:`port` (TLS with `tls`, a
    tls_certs.Certs): one connection per call, any thread."""

    def __init__(self, port, tls=None):
        self.port = port
        self.tls = tls

    def _connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        if not self.tls:
            return s
        import ssl
        ctx = ssl.create_default_context(cafile=self.tls.ca)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the test's own client: any of its certificates
        ctx.load_cert_chain(self.tls.client, self.tls.client_key)
        return ctx.wrap_socket(s)

    def ping(self):
        try:
            return self.execute("PING") == "PONG"
        except OSError:
            return False

    def execute_many(self, commands):
        """Sends every command in one write and reads every reply."""
        with self._connect() as s:
            s.sendall(b"".join(resp_command(*c) for c in commands))
            f = s.makefile("rb")
            return [self._read(f) for _ in commands]

    def execute(self, *args):
        return self.execute_many([args])[0]

    def _read(self, f):
        line = f.readline()
        if not line:
            raise OSError("redis closed the connection")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)[:-2]
            try:
                return data.decode()
            except UnicodeDecodeError:  # binary values (counters' slots): bytes
                return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read(f) for _ in range(n)]
        raise OSError(f"bad RESP reply {line!r}")


class Redis(RespClient):
    """A redis-server on a free loopback port, with a tiny RESP client.

    tls: a tls_certs.Certs to serve TLS only (--port 0 --tls-port P) with certs.server
    (or `server_cert`, e.g. certs.expired); auth_clients: require a client certificate
    signed by certs.ca. `extra_args` go to redis-server as they are."""

    def __init__(self, port=None, tls=None, server_cert=None, auth_clients=False,
                 extra_args=None):
        super().__init__(port, tls)
        self.dir = temp_dir("rankd-redis-")
        self.proc = None
        self.server_cert = server_cert or (tls.server if tls else None)
        self.auth_clients = auth_clients
        self.extra_args = list(extra_args or [])
        for attempt in range(5):
            self.port = port or free_port()
            try:
                self.start()
                return
            except OSError:
                if port or attempt == 4:
                    raise

    def start(self):
        if self.tls:
            listen = ["--port", "0", "--tls-port", str(self.port),
                      "--tls-cert-file", self.server_cert, "--tls-key-file", self.tls.server_key,
                      "--tls-ca-cert-file", self.tls.ca,
                      "--tls-auth-clients", "yes" if self.auth_clients else "no"]
        else:
            listen = ["--port", str(self.port)]
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1"] + listen +
            ["--save", "", "--appendonly", "no", "--dir", self.dir,
             "--enable-debug-command", "yes", "--loglevel", "warning"] + self.extra_args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _procs.append(self.proc)
        # Ready when this process listens on the port: a PING alone could be answered by
        # another test's redis-server that took the same port first.
        wait_until(lambda: self.proc.poll() is not None or
                   (self.port in listening_ports(self.proc.pid) and self.ping()),
                   what=f"redis-server on port {self.port}")
        if self.proc.poll() is not None:
            raise OSError(f"redis-server could not listen on port {self.port}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def suspend(self):
        """SIGSTOP: from its return on, the server answers nothing (the kernel still takes
        the bytes sent to it) until resume(), however long that takes."""
        self.proc.send_signal(signal.SIGSTOP)
        wait_until(lambda: process_state(self.proc.pid) == "T", what="redis-server stopped")

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def tls_args(self):
        """rankd's flags to reach this server: the test CA, and the client certificate
        when the server requires one."""
        if not self.tls:
            return []
        args = ["--redis-tls-ca", self.tls.ca]
        if self.auth_clients:
            args += ["--redis-tls-cert", self.tls.client, "--redis-tls-key", self.tls.client_key]
        return args

    def url(self):
        if self.tls:
            return f"rediss://localhost:{self.port}"
        return f"redis://127.0.0.1:{self.port}"


# --- rankd -------------------------------------------------------------------------

def plans_dir(extra=None, indexes=True):
    """A temporary plans folder: the repository's compiled plans and their models, the
    test fixtures of tests/plans (which use the test-only ops: Rankd enables them), plus
    `extra` ({name: plan dict or raw text}). indexes=False: without the demo schema's
    item index (a schema.json of the demo schema less its `indexes`) and the plans that
    use it, for a rankd whose Redis cannot answer an index build (a fake server)."""
    d = temp_dir("rankd-plans-")
    for src in (os.path.join(SOURCE_ROOT, "plans"), os.path.join(SOURCE_ROOT, "tests", "plans")):
        for name in os.listdir(src):
            if name.endswith((".model.json", ".onnx")) or name.endswith(".plan.json") and (
                    indexes or not _uses_ann(os.path.join(src, name))):
                shutil.copy(os.path.join(src, name), d)
    if not indexes:
        with open(os.path.join(SOURCE_ROOT, "plans", "schema.json")) as f:
            schema = json.load(f)
        schema.pop("indexes", None)
        with open(os.path.join(d, "schema.json"), "w") as f:
            json.dump(schema, f)
    for name, plan in (extra or {}).items():
        write_plan(d, name, plan)
    return d


def _uses_ann(path):
    with open(path) as f:
        return any(n["op"] == "ann" for n in json.load(f)["nodes"])


def write_plan(d, name, plan):
    text = plan if isinstance(plan, str) else json.dumps(plan, indent=2)
    tmp = os.path.join(d, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(d, f"{name}.plan.json"))


def simple_plan(name, nodes, output, params=None, expr_table=None, pred_table=None, columns=None):
    p = {"schema_version": 1, "name": name, "description": f"test plan {name}",
         "params": params or {}, "nodes": nodes, "expr_table": expr_table or {},
         "pred_table": pred_table or {}, "output": {"node": output}}
    if columns:
        p["output"]["columns"] = columns
    return p


def sleep_plan(name, ms, optional=False, timeout_ms=None):
    node = {"node_id": "s", "op": "sleep", "inputs": ["src"], "params": {"duration_ms": ms}}
    if optional:
        node["optional"] = True
    if timeout_ms:
        node["timeout_ms"] = timeout_ms
    return simple_plan(name, [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}},
        node], "s")


class Rankd:
    """A `rankd serve` process on a free port, with --enable-test-ops unless `test_ops` is
    False (test plans use sleep, busy_cpu and fixed_source)."""

    def __init__(self, plans, redis=None, shards=1, extra_args=None, port=None, stdout_path=None,
                 test_ops=True):
        # Port 0 unless the test needs a fixed one: the kernel then picks a port no socket
        # holds. A port picked here could be handed to a concurrent test's rankd as well,
        # and SO_REUSEPORT would let both share it, each answering the other's clients.
        self.port = port
        self.plans = plans
        self.shards = shards
        args = [RANKD, "serve", "--host", "127.0.0.1", "--port", str(port or 0),
                "--shards", str(shards), "--plans", plans, "--log-level", "warn"]
        if test_ops:
            args.append("--enable-test-ops")
        if redis is not None:
            args += ["--redis", f"redis_default={redis.url()}"]
            args += redis.tls_args() if hasattr(redis, "tls_args") else []
        else:
            # Nothing listens on this port: Redis-free plans still run.
            args += ["--redis", f"redis_default=redis://127.0.0.1:{free_port()}"]
        args += extra_args or []
        self.log_path = temp_path("rankd-log-")
        out = open(stdout_path, "w") if stdout_path else subprocess.DEVNULL
        self.args = args
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(args, stdout=out, stderr=log)
        if stdout_path:
            out.close()
        _procs.append(self.proc)
        _servers.append(self)
        self.checked = False  # whether its exit has been checked (stop, wait_exit)
        if self.port is None:
            wait_until(self._find_port, what="rankd to listen")
        wait_until(self._healthy, what=f"rankd on port {self.port}")

    def _exited(self):
        if self.proc.poll() is not None:
            self.checked = True  # reported here, with its stderr
            raise AssertionError(f"rankd exited with {self.proc.returncode}: {self.stderr()}")

    def _find_port(self):
        self._exited()
        ports = listening_ports(self.proc.pid)
        if "--metrics-port" in self.args:
            ports.discard(int(self.args[self.args.index("--metrics-port") + 1]))
        if len(ports) != 1:
            return False
        self.port = ports.pop()
        return True

    def _healthy(self):
        """Serves HTTP on every shard: /healthz is 200 and /readyz no longer says
        "starting" (shard 0 answers while the others still start; their metric series and
        listeners come with them). /readyz may still fail for Redis: see wait_ready."""
        self._exited()
        status, _, _ = self.request("GET", "/healthz")
        if status != 200:
            return False
        status, _, body = self.request("GET", "/readyz")
        return status == 200 or b"starting" not in body

    def wait_ready(self, timeout=30):
        """Waits until /readyz answers 200: every shard has its Redis endpoints (a cluster's
        slot map included). /healthz, which the constructor waits for, says only that rankd
        serves HTTP."""
        def ready():
            self._exited()
            return self.request("GET", "/readyz")[0] == 200
        wait_until(ready, timeout=timeout, what=f"rankd on port {self.port} to be ready")
        return self

    def stderr(self):
        with open(self.log_path) as f:
            return f.read()

    def conn(self, timeout=10):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=10):
        c = self.conn(timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
        finally:
            c.close()

    def rank(self, body, timeout=10):
        status, headers, data = self.request("POST", "/rank", body, timeout=timeout)
        return status, headers, json.loads(data) if data else None

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        return data.decode()

    def wait_for_tick(self):
        """Returns once every shard has run a whole periodic tick (every 100 ms) that began
        after this call: what the tick publishes (gauges, HTTP counters) then covers
        everything that happened before the call. A tick counts itself in the loop lag
        histogram before it publishes, so the second tick seen is the first whole one."""
        def ticks():
            text = self.metrics()
            return [metric_value(text, "rankd_loop_lag_distribution_seconds_count", shard=i) or 0
                    for i in range(self.shards)]
        start = ticks()
        wait_until(lambda: all(now >= t + 2 for now, t in zip(ticks(), start)), what="a metrics tick")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=15, expect=0):
        """SIGTERM (unless it has exited already), then wait_exit: returns the exit status,
        or raises AssertionError when it is not `expect` or stderr holds a sanitizer report."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout, expect)

    def wait_exit(self, timeout=15, expect=0):
        """Waits for the process to exit (after a signal the test sent) and checks how:
        returns the exit status, or raises AssertionError when it is not `expect` (a code
        or a set of codes) or stderr holds a sanitizer report."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            self.checked = True
            raise AssertionError(f"rankd on port {self.port} did not exit within {timeout} s:\n"
                                 f"{self.stderr()[-4000:]}")
        self.checked = True
        return check_exit(f"rankd on port {self.port}", code, self.stderr(), expect)


def proc_status_kib(pid, field):
    """A kB field of /proc/PID/status (VmRSS, VmHWM, ...), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def metric_value(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    found = False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if "{" in head:
            mname, _, rest = head.partition("{")
            lab = dict(kv.split("=", 1) for kv in _split_labels(rest.rstrip("}")))
            lab = {k: v.strip('"') for k, v in lab.items()}
        else:
            mname, lab = head, {}
        if mname != name:
            continue
        if all(lab.get(k) == str(v) for k, v in labels.items()):
            total += float(value)
            found = True
    return total if found else None


def _split_labels(s):
    out, cur, q = [], "", False
    for ch in s:
        if ch == '"':
            q = not q
        if ch == "," and not q:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


# --- a tiny test runner ------------------------------------------------------------


class SharedServer:
    """One rankd and one redis-server shared by a test module, started on first call:
    `server = SharedServer(plans)`, then `server()` in each test. With seed_users, the
    demo data set of that many users is seeded (`rankd seed --flush`)."""

    def __init__(self, plans=None, shards=1, seed_users=0):
        self.plans, self.shards, self.seed_users = plans, shards, seed_users
        self.redis = None
        self.rankd = None

    def __call__(self):
        if self.rankd is None:
            self.redis = Redis()
            self.rankd = Rankd(plans_dir(self.plans), redis=self.redis, shards=self.shards)
            if self.seed_users:
                demo_data(self.redis, self.seed_users)
        return self.rankd


def demo_data(redis, users, flush=True, timeout=60, embeddings=False):
    """Writes the demo data set of `users` users into `redis` (anything with url()):
    `rankd seed`, with --flush unless told not to; without the embeddings unless asked
    (every rankd on the demo schema builds its item index from them before /readyz: a
    test that does not rank `discover` need not wait for that)."""
    args = [RANKD, "seed", "--redis", redis.url(), "--users", str(users)]
    if not embeddings:
        args.append("--no-embeddings")
    args += redis.tls_args() if hasattr(redis, "tls_args") else []
    if flush:
        args.append("--flush")
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, \
        f"{' '.join(args)} failed (exit status {out.returncode}):\n{out.stdout}\n{out.stderr}"


_demo = {}


def demo_env(users=20):
    """(redis, plans folder) shared by a test module: one redis-server with the demo data
    set of `users` users, and plans_dir()'s folder; made on the first call."""
    if "redis" not in _demo:
        _demo["redis"] = Redis()
        demo_data(_demo["redis"], users)
        _demo["plans"] = plans_dir()
    return _demo["redis"], _demo["plans"]


def run_tests(tests):
    """Runs (name, fn) pairs, prints a line per test and 'N passed, N failed'."""
    passed = failed = 0
    only = os.environ.get("RANKD_TEST_ONLY")
    for name, fn in tests:
        if only and only not in name:
            continue
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"ok   {name} ({time.monotonic() - t0:.2f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
            for srv in _servers:  # a crashed server explains every failure after it
                if not srv.checked and srv.proc.poll() is not None:
                    try:
                        srv.wait_exit()
                    except AssertionError as e:
                        print(e, flush=True)
    for problem in _cleanup():
        failed += 1
        print(f"FAIL at exit: {problem}", flush=True)
    if only and passed + failed == 0:
        # A filter that matches nothing would pass having run nothing.
        failed += 1
        print(f"FAIL RANKD_TEST_ONLY={only!r} matches no test", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)
