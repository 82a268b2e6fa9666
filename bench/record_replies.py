"""Records what a redis-server answers a client: a loopback TCP proxy that forwards
every byte both ways and keeps, per connection, the bytes the server sent. On SIGTERM
it writes them to OUT, connection after connection (each connection's replies are
whole and in order, so the file is one valid RESP2 reply stream), and exits.
`ops/bench redis` (bench/redis.sh) puts it between `rankd serve` and its Redis for a
few `feed` requests: the replies bench/resp_read_bench.cc reads.

  python3 bench/record_replies.py LISTEN_PORT REDIS_PORT OUT

Prints "ready" on stdout once it listens. Standard library only; a thread per
direction per connection.
"""
import os
import signal
import socket
import sys
import threading

listen_port, redis_port, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
streams = []  # one bytearray per connection, in the order they were accepted


def pump(src, dst, keep):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if keep is not None:
                with lock:
                    keep += data
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(listener):
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", redis_port))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        kept = bytearray()
        with lock:
            streams.append(kept)
        threading.Thread(target=pump, args=(client, server, None), daemon=True).start()
        threading.Thread(target=pump, args=(server, client, kept), daemon=True).start()


def finish(*_):
    with lock:
        data = b"".join(bytes(s) for s in streams)
    with open(out_path, "wb") as f:
        f.write(data)
    # The pump threads are daemons: leave without waiting for them.
    os._exit(0)


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", listen_port))
listener.listen(64)
signal.signal(signal.SIGTERM, finish)
threading.Thread(target=serve, args=(listener,), daemon=True).start()
print("ready", flush=True)
while True:
    signal.pause()
