"""The writer of `ops/bench cache`: writes to the seeded demo data at a steady rate while
the bench's rankds serve from it, so that the cache is invalidated as it would be in
production. Runs until killed (SIGTERM).

    python3 bench/cache_writer.py PORT USERS ITEMS HSETS_PER_S LPUSHES_PER_S

Per second: HSETS_PER_S `HSET item:<i> likes <n>` on random existing items (1..ITEMS) and
LPUSHES_PER_S `LPUSH media:<u> <i>` on random authors (1..USERS), pushing existing item
ids. Each write is its own command and round trip (no pipeline), spread evenly over the
second: a writer of a live app sends them as they come. Plain python3: the few RESP
lines it needs are written here."""
import random
import signal
import socket
import sys
import time


class Conn:
    """One Redis connection that sends a command and waits for its integer reply."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(parts))
        line = self.file.readline()
        if not line.startswith(b":"):  # HSET and LPUSH answer an integer
            sys.exit(f"cache_writer: {args[0]} answered {line!r}")


def main():
    port, users, items, hsets, lpushes = map(int, sys.argv[1:6])
    r = Conn(port)
    rng = random.Random(7)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # One schedule: a write is due every 1/(hsets+lpushes) s; which kind is drawn in
    # proportion, so that both rates hold over any second.
    rate = hsets + lpushes
    step = 1.0 / rate
    due = time.monotonic()
    while True:
        if rng.random() * rate < hsets:
            r.call("HSET", f"item:{rng.randint(1, items)}", "likes", rng.randrange(0, 100000))
        else:
            r.call("LPUSH", f"media:{rng.randint(1, users)}", rng.randint(1, items))
        due += step
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        elif pause < -1.0:
            due = time.monotonic()  # fell behind a full second (a stalled machine): no burst


if __name__ == "__main__":
    main()
