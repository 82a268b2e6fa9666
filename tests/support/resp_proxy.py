"""A loopback TCP proxy between a Redis client (rankd) and a redis-server that can hold
the server's replies: what makes "a reply still in flight when its key changed"
deterministic in a test.

It forwards every byte both ways. While held (hold() until release()), the bytes the
server sends to a *data* connection — one whose client never sent SUBSCRIBE — are kept
instead of forwarded; release() sends them on, in order. Subscriber connections (rankd's
invalidation tracker) always pass, so invalidations reach the client while its data
replies wait.

It reads the RESP2 both ways to count what went by: the commands each connection sent
(name and arguments) and the complete replies the server sent it, so a test can wait
until the server has answered a given command (its reply is then held, or delivered).

Threads: two pump threads per connection plus the accept thread, all daemons; the
public methods may be called from any thread (one lock guards the state).
"""
import socket
import threading


class _Reader:
    """Counts complete RESP2 values in a byte stream fed in arbitrary pieces."""

    def __init__(self):
        self.buf = b""
        self.values = []  # complete values parsed, oldest first (lists of args, or None)

    def feed(self, data, keep):
        """Parses what `data` completes; keeps each value's contents when `keep`."""
        self.buf += data
        n = 0
        while True:
            end, value = self._parse(0)
            if end is None:
                break
            self.buf = self.buf[end:]
            self.values.append(value if keep else None)
            n += 1
        return n

    def _line(self, pos):
        end = self.buf.find(b"\r\n", pos)
        return (None, None) if end < 0 else (self.buf[pos:end], end + 2)

    def _parse(self, pos):
        """(end offset, value) of the value at pos, or (None, None) when incomplete."""
        line, nxt = self._line(pos)
        if line is None:
            return None, None
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-", b":"):
            return nxt, rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return nxt, None
            if len(self.buf) < nxt + n + 2:
                return None, None
            return nxt + n + 2, self.buf[nxt:nxt + n]
        if kind == b"*":
            n = int(rest)
            items = []
            for _ in range(max(n, 0)):
                nxt, item = self._parse(nxt)
                if nxt is None:
                    return None, None
                items.append(item)
            return nxt, items
        raise ValueError(f"not RESP2: {line[:40]!r}")


class _Conn:
    def __init__(self, client, server):
        self.client, self.server = client, server
        self.subscriber = False
        self.commands = _Reader()   # what the client sent, kept
        self.replies = _Reader()    # what the server answered, counted
        self.pending = b""          # server bytes held
        self.lock = threading.Lock()  # orders the sends to the client


class RespProxy:
    """Listens on 127.0.0.1:port (free) and connects each client to target_port."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.held = False
        self.conns = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, server)
            with self.lock:
                if self.closed:
                    client.close()
                    server.close()
                    return
                self.conns.append(conn)
            threading.Thread(target=self._upstream, args=(conn,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(conn,), daemon=True).start()

    def _drop(self, conn):
        for s in (conn.client, conn.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self.lock:
            if conn in self.conns:
                self.conns.remove(conn)

    def _upstream(self, conn):
        """Client -> server: counted (and a SUBSCRIBE noted), then forwarded."""
        try:
            while True:
                data = conn.client.recv(65536)
                if not data:
                    break
                with self.lock:
                    first = len(conn.commands.values)
                    conn.commands.feed(data, keep=True)
                    for cmd in conn.commands.values[first:]:
                        if cmd and cmd[0].upper() == b"SUBSCRIBE":
                            conn.subscriber = True
                conn.server.sendall(data)
        except (OSError, ValueError):
            pass
        self._drop(conn)

    def _downstream(self, conn):
        """Server -> client: forwarded, or kept while held (data connections only)."""
        try:
            while True:
                data = conn.server.recv(65536)
                if not data:
                    break
                with conn.lock:
                    with self.lock:
                        if not conn.subscriber:
                            conn.replies.feed(data, keep=False)
                        hold = self.held and not conn.subscriber
                        if hold:
                            conn.pending += data
                    if not hold:
                        if conn.pending:
                            conn.client.sendall(conn.pending)
                            conn.pending = b""
                        conn.client.sendall(data)
        except (OSError, ValueError):
            pass
        self._drop(conn)

    def hold(self):
        with self.lock:
            self.held = True

    def release(self):
        with self.lock:
            self.held = False
            conns = list(self.conns)
        for conn in conns:
            with conn.lock:
                if conn.pending:
                    try:
                        conn.client.sendall(conn.pending)
                    except OSError:
                        pass
                    conn.pending = b""

    def answered(self, *command):
        """True once a data connection sent `command` (its name and arguments, as str, the
        name in any case) and the server has replied to it and to everything that
        connection sent before it."""
        want = [a.encode() for a in command]
        with self.lock:
            for conn in self.conns:
                if conn.subscriber:
                    continue
                for i, cmd in enumerate(conn.commands.values):
                    if cmd and len(cmd) == len(want) and cmd[0].upper() == want[0].upper() \
                            and cmd[1:] == want[1:]:
                        if len(conn.replies.values) > i:
                            return True
        return False

    def held_bytes(self):
        with self.lock:
            return sum(len(c.pending) for c in self.conns)

    def subscribers(self):
        with self.lock:
            return sum(1 for c in self.conns if c.subscriber)

    def close(self):
        with self.lock:
            self.closed = True
            conns = list(self.conns)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept thread
        except OSError:
            pass
        self.sock.close()
        for conn in conns:
            self._drop(conn)
