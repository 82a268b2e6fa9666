"""A fake Redis Cluster node, and a trap port that records whatever reaches it.
Standard library only.

FakeClusterNode answers AUTH with +OK (recording the arguments), PING with +PONG,
CLUSTER SLOTS with the map of its `slots` attribute (a list of (first, last, [(host,
port), ...]): the master, then the replicas) after `slots_delay` seconds, and every other
command with `answer(args)`,
by default `-MOVED <slot of the key> <redirect>`: what a hostile or confused node could
send to steer rankd, with its password, to an address of its choosing.

Trap listens on a free loopback port and keeps every connection and byte it receives;
settle() waits until every connection made to it so far is counted.
"""
import binascii
import socket
import threading
import time

from fake_resp import _parse_command


def key_slot(key):
    """The Redis Cluster slot of a key without a hash tag: CRC16/XMODEM mod 16384."""
    return binascii.crc_hqx(key, 0) % 16384


def _bulk(b):
    b = b if isinstance(b, bytes) else str(b).encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def _slots_reply(slots):
    out = [b"*%d\r\n" % len(slots)]
    for first, last, nodes in slots:
        out.append(b"*%d\r\n:%d\r\n:%d\r\n" % (2 + len(nodes), first, last))
        for i, (host, port) in enumerate(nodes):
            out.append(b"*3\r\n" + _bulk(host) + b":%d\r\n" % port + _bulk("node%d" % i))
    return b"".join(out)


class _Listener:
    def __init__(self):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._stop = True
        self._sock.close()

    def _accept(self):
        while not self._stop:
            try:
                c, addr = self._sock.accept()
            except OSError:
                return
            if self._accepted(c, addr):
                threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _accepted(self, c, addr):
        """Called in accept order, on the accepting thread; False: c is not served."""
        return True


class Trap(_Listener):
    """Records every connection and every byte sent to it; answers nothing."""

    def __init__(self):
        self.connections = 0
        self.received = b""
        self._lock = threading.Lock()
        self._markers = {}  # local port of a settle() connection -> accepted yet
        super().__init__()

    def _accepted(self, c, addr):
        with self._lock:
            if addr[1] in self._markers:
                self._markers[addr[1]] = True
                c.close()
                return False
            self.connections += 1
        return True

    def settle(self, timeout=10):
        """Returns once every connection made to the trap before the call is counted in
        `connections`: connections are accepted in the order they were made, and this one,
        made last and not counted, has been accepted."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            with self._lock:
                self._markers[port] = False
            s.connect(("127.0.0.1", self.port))
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                with self._lock:
                    if self._markers[port]:
                        return
                time.sleep(0.01)
            raise AssertionError(f"the trap on port {self.port} did not accept within {timeout} s")
        finally:
            s.close()

    def _serve(self, c):
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                with self._lock:
                    self.received += data
        except OSError:
            pass
        finally:
            c.close()


class FakeClusterNode(_Listener):
    def __init__(self, redirect="127.0.0.1:1", kind="MOVED"):
        self.slots = None  # set below, once the port is known
        self.redirect = redirect
        self.kind = kind
        self.auths = []           # the arguments of every AUTH received
        self.cluster_slots = 0    # CLUSTER SLOTS answered
        self.slots_delay = 0.0    # seconds CLUSTER SLOTS waits before its answer
        self.commands = 0         # other commands answered
        self.answer = self._redirect
        super().__init__()
        self.slots = [(0, 16383, [("127.0.0.1", self.port)])]

    def url(self, password=None, scheme="redis-cluster"):
        auth = f":{password}@" if password else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}"

    def _redirect(self, args):
        key = args[1] if len(args) > 1 else b""
        return b"-%s %d %s\r\n" % (self.kind.encode(), key_slot(key), self.redirect.encode())

    def _serve(self, c):
        c.settimeout(30)
        buf = b""
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
                while True:
                    cmd, buf = _parse_command(buf)
                    if cmd is None:
                        break
                    c.sendall(self._reply(cmd))
        except OSError:
            pass
        finally:
            c.close()

    def _reply(self, cmd):
        name = cmd[0].upper() if cmd else b""
        if name == b"AUTH":
            self.auths.append([a.decode(errors="replace") for a in cmd[1:]])
            return b"+OK\r\n"
        if name == b"PING":
            return b"+PONG\r\n"
        if name in (b"ASKING", b"READONLY"):
            return b"+OK\r\n"
        if name == b"CLUSTER" and len(cmd) > 1 and cmd[1].upper() == b"SLOTS":
            time.sleep(self.slots_delay)
            self.cluster_slots += 1
            return _slots_reply(self.slots)
        self.commands += 1
        return self.answer(cmd)
