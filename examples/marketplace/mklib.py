"""Shared by ./generate and ./reference.py: a small Redis client (RESP2 over TCP or a Unix
socket, with pipelining; no third-party module needed) and the marketplace's key layout in
its two encodings.

Encodings (docs/rank-your-own-data.md):
  native  plans/schema.json: string ids (acct-000123, lst-00004567), accounts as hashes,
          listings as JSON documents, keys under mk:
  i64     i64/schema.json: the same data over i64 ids (123, 4567), listings as hashes,
          keys under mk64:
"""
import json
import os
import socket
from urllib.parse import unquote, urlparse, parse_qs


class RedisError(Exception):
    pass


class Redis:
    """redis://[[user]:password@]host[:port][/db], rediss is not supported, unix:///path[?db=N]."""

    def __init__(self, url, timeout=30.0):
        u = urlparse(url)
        db = 0
        if u.scheme == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(u.path)
            db = int(parse_qs(u.query).get("db", ["0"])[0])
        elif u.scheme == "redis":
            self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if u.path and u.path != "/":
                db = int(u.path.lstrip("/"))
        else:
            raise ValueError(f"unsupported Redis URL {url!r} (redis://host:port/db or unix:///path?db=N)")
        self.rfile = self.sock.makefile("rb")
        if u.password is not None:
            user = unquote(u.username) if u.username else None
            self.call("AUTH", *([user] if user else []), unquote(u.password))
        if db:
            self.call("SELECT", db)

    @staticmethod
    def _arg(a):
        if isinstance(a, bytes):
            return a
        if isinstance(a, float):
            return repr(a).encode()
        return str(a).encode()

    def _encode(self, args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = self._arg(a)
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def _read(self):
        line = self.rfile.readline()
        if not line:
            raise RedisError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            return RedisError(rest.decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rfile.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise RedisError(f"unexpected reply {line!r}")

    def pipeline(self, cmds):
        """Sends all commands in one write, then reads every reply; raises on the first error."""
        if not cmds:
            return []
        self.sock.sendall(b"".join(self._encode(c) for c in cmds))
        replies = [self._read() for _ in cmds]
        for c, r in zip(cmds, replies):
            if isinstance(r, RedisError):
                raise RedisError(f"{c[0]} {c[1] if len(c) > 1 else ''}: {r}")
        return replies

    def call(self, *args):
        return self.pipeline([args])[0]

    def close(self):
        self.rfile.close()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


ENCODINGS = ("native", "i64")


class Layout:
    """Ids and keys of one encoding: keys come from the key templates of the encoding's
    schema.json (plans/ or i64/), so the generator, the reference and rankd read one
    layout; `prefix` is the endpoint's key prefix (default none)."""

    def __init__(self, encoding="native", prefix=""):
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}")
        self.encoding = encoding
        self.native = encoding == "native"
        self.prefix = prefix
        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plans" if self.native else "i64")
        with open(os.path.join(folder, "schema.json")) as f:
            self.templates = {name: fam["key"] for name, fam in json.load(f)["families"].items()}

    def account_id(self, n):
        return f"acct-{n:06d}" if self.native else str(n)

    def listing_id(self, n):
        return f"lst-{n:08d}" if self.native else str(n)

    def key(self, family, id_text):
        """The key of `id_text` in `family` (account, listing, watch, shop, recs, hidden)."""
        return self.prefix + self.templates[family].replace("{id}", id_text)
