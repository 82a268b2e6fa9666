"""A fake RESP endpoint on a free loopback port, for replies a real Redis cannot produce
(huge headers, garbage, a reply cut short). Standard library only.

It answers PING with +PONG (so rankd's handshake makes the connection live) and every
other command by `mode`, which a test sets before each request:

  ok_empty      *0                        (an empty hash / list: a valid reply)
  huge_array    *2147483647               then stays open
  huge_bulk     $1073741824 + a few bytes then stays open
  stream_1g     $1073741824 + 1 GiB of payload, streamed until the peer closes
  truncated     an array one element short, then closes
  close_mid     a bulk header and part of its payload, then closes
  garbage       bytes that are not RESP
  wrong_type    :5                        (an integer where the command returns an array)
  error_reply   -WRONGTYPE ... naming a secret key
  unsolicited   *0 and then +EXTRA        (a reply no command asked for)
  deep          arrays nested 6 deep
  silent        no reply at all

`streamed` counts the payload bytes stream_1g managed to send before the peer closed.
"""
import socket
import threading

ONE_GIB = 1 << 30

REPLIES = {
    "ok_empty": b"*0\r\n",
    "huge_array": b"*2147483647\r\n",
    "huge_bulk": b"$1073741824\r\nxxxxxxxx",
    "garbage": b"HTTP/1.1 200 OK\r\nServer: not-redis 127.0.0.1\r\n\r\n",
    "wrong_type": b":5\r\n",
    "error_reply": b"-WRONGTYPE Operation against a key holding the wrong kind of value (secret_key_42)\r\n",
    "unsolicited": b"*0\r\n+EXTRA\r\n",
    "deep": b"*1\r\n" * 6 + b":1\r\n",
    "truncated": b"*2\r\n$3\r\nfoo\r\n",
    "close_mid": b"$10\r\nabc",
}
CLOSE_AFTER = {"truncated", "close_mid"}


class FakeResp:
    def __init__(self):
        self.mode = "ok_empty"
        self.streamed = 0
        self.commands = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def close(self):
        self._stop = True
        self._sock.close()

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

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
                    if not self._answer(c, cmd):
                        return
        except OSError:
            pass
        finally:
            c.close()

    def _answer(self, c, cmd):
        """Returns False when the connection is done."""
        if cmd and cmd[0].upper() == b"PING":
            c.sendall(b"+PONG\r\n")
            return True
        self.commands += 1
        mode = self.mode
        if mode == "silent":
            return True
        if mode == "stream_1g":
            c.sendall(b"$%d\r\n" % ONE_GIB)
            chunk = b"x" * (1 << 16)
            sent = 0
            try:
                while sent < ONE_GIB:
                    c.sendall(chunk)
                    sent += len(chunk)
            finally:
                self.streamed = sent
            return False
        c.sendall(REPLIES[mode])
        return mode not in CLOSE_AFTER


def _parse_command(buf):
    """One RESP array of bulk strings from the front of buf: (args, rest), or (None, buf)
    when it is not all there yet."""
    if not buf.startswith(b"*"):
        return (None, buf) if not buf else ([], b"")  # not RESP: drop it
    end = buf.find(b"\r\n")
    if end < 0:
        return None, buf
    n = int(buf[1:end])
    pos = end + 2
    args = []
    for _ in range(n):
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None, buf
        size = int(buf[pos + 1:end])
        start = end + 2
        if len(buf) < start + size + 2:
            return None, buf
        args.append(buf[start:start + size])
        pos = start + size + 2
    return args, buf[pos:]
