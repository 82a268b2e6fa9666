"""A minimal RESP2 client over a raw socket for the tracking experiments: every reply is
returned with its exact bytes, so the RESP2 shape (nil bulk `$-1` vs nil array `*-1` vs
empty array `*0`) is visible. Standard library only; one thread per connection."""
import select
import shutil
import socket
import subprocess
import tempfile
import time

NIL_ARRAY = "*-1"


class Err(str):
    pass


def enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Conn:
    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def send(self, *args):
        self.s.sendall(enc(args))

    def send_many(self, cmds):
        self.s.sendall(b"".join(enc(c) for c in cmds))

    def cmd(self, *args):
        self.send(*args)
        return self.read()[0]

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError("connection closed")
        self.buf = self.buf[self.pos:] + d
        self.pos = 0

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            self._fill()

    def _value(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            v = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return v
        if t == b"*":
            n = int(rest)
            if n < 0:
                return NIL_ARRAY
            return [self._value() for _ in range(n)]
        raise ValueError(f"bad RESP2 line {line!r}")

    def read(self):
        """(value, exact bytes of that reply)."""
        v = self._value()
        return v, raw_of(v)   # RESP2 parsing is lossless: these are the bytes received

    def readable(self, timeout):
        if self.pos < len(self.buf):
            return True
        r, _, _ = select.select([self.s], [], [], timeout)
        return bool(r)

    def read_within(self, timeout):
        """Every reply that arrives within `timeout` seconds of quiet."""
        out = []
        while self.readable(timeout):
            out.append(self.read())
        return out

    def close(self):
        self.s.close()


def raw_of(v):
    """The RESP2 bytes of a parsed value (parsing is lossless for RESP2)."""
    if v is None:
        return b"$-1\r\n"
    if v is NIL_ARRAY or (isinstance(v, str) and not isinstance(v, Err) and v == NIL_ARRAY):
        return b"*-1\r\n"
    if isinstance(v, Err):
        return b"-" + v.encode() + b"\r\n"
    if isinstance(v, str):
        return b"+" + v.encode() + b"\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, bytes):
        return b"$%d\r\n%s\r\n" % (len(v), v)
    return b"*%d\r\n" % len(v) + b"".join(raw_of(x) for x in v)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """redis-server on a free loopback port (no persistence), killed by stop()."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="trackexp-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes",
             "--loglevel", "warning", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 10
        while True:
            try:
                c = Conn(self.port)
                if c.cmd("PING") == "PONG":
                    c.close()
                    return
            except OSError:
                if time.monotonic() > end or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
