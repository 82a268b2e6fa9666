#!/usr/bin/env python3
"""Redis's instructions per key written by the counters script (src/events/counter_write.cc),
counted exactly by Valgrind's callgrind, against the script of another commit: what a
change to the script saves, told apart on a machine whose CPU times move ±20 % from run
to run (docs/events.md, "Measured").

For each script (this tree's, and --base REV's), a redis-server under callgrind takes the
same writes of the demo family's shape (2 types, hourly buckets kept 7 days; keys a third
items Zipf-like over 100,000 and two thirds users uniform over 10,000, one bucket each, as
`ops/bench events` writes them), sent twice: as rankd's aggregated calls (64 keys an
EVALSHA) and as its unaggregated baseline's (one key an EVALSHA). A figure is (Ir after
3·CALLS calls − Ir after CALLS calls) / keys between: start-up and shutdown cancel out.
A measurement, not a benchmark: minutes under Valgrind, run niced.

    nice -n 19 /usr/bin/python3 bench/counter_script_instructions.py [--base HEAD~3] [--calls 100]
"""
import argparse
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))
from harness import RespClient, free_port, resp_command  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
RING, WIDTH, KEEP_MS = 169, 20, 604800 * 1000
INDEX = 1764590400 // 3600  # the bucket every write adds to
SOURCE = "src/events/counter_write.cc"


def script_for_two_types(source_text):
    text = re.search(r'R"lua\((.*?)\)lua"', source_text, re.S).group(1)
    for k, v in (("@X@", "x1, x2"), ("@A@", "a1, a2"), ("@SUM@", "a1 + x1, a2 + x2"), ("@D@", "dd")):
        text = text.replace(k, v)
    return text


def writes(calls):
    """CALLS lists of (key, slot bytes), 64 draws a list, keys distinct within one."""
    rng = random.Random(1)
    out = []
    for _ in range(calls):
        keys = {}
        for _ in range(64):
            if rng.random() < 1 / 3:
                key = "cnt:item:%d" % min(100000, int(rng.paretovariate(0.1)))
            else:
                key = "cnt:user:%d" % rng.randint(1, 10000)
            click = rng.random() < 0.1
            keys[key] = struct.pack("<Idd", INDEX, 0.0 if click else 1.0, 1.0 if click else 0.0)
        out.append(list(keys.items()))
    return out


def instructions(script, calls, per_call_keys, workdir):
    """Total Ir of a redis-server under callgrind that took `calls`' writes."""
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{port}")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                             "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    redis = RespClient(port)
    deadline = time.monotonic() + 60
    while not redis.ping():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("redis-server under callgrind did not start")
        time.sleep(0.2)
    sha = redis.execute("SCRIPT", "LOAD", script)
    commands = []
    for keys in calls:
        for first in range(0, len(keys), per_call_keys):
            part = keys[first:first + per_call_keys]
            commands.append(["EVALSHA", sha, len(part), *(k for k, _ in part),
                             KEEP_MS, RING, WIDTH, *(ops for _, ops in part)])
    for first in range(0, len(commands), 200):
        for reply in redis.execute_many(commands[first:first + 200]):
            if not isinstance(reply, int):
                sys.exit(f"the script failed: {reply}")
    with redis._connect() as s:
        s.sendall(resp_command("SHUTDOWN", "NOSAVE"))
    proc.wait(timeout=120)
    totals = [int(line.split()[1]) for line in open(out) if line.startswith(("totals:", "summary:"))]
    return totals[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="a commit whose script to count beside this tree's")
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    scripts = {"this tree": script_for_two_types(open(os.path.join(ROOT, SOURCE)).read())}
    if args.base:
        text = subprocess.run(["git", "-C", ROOT, "show", f"{args.base}:{SOURCE}"],
                              check=True, capture_output=True, text=True).stdout
        scripts[args.base] = script_for_two_types(text)
    few, many = writes(args.calls), writes(3 * args.calls)
    keys = sum(len(k) for k in many) - sum(len(k) for k in few)
    with tempfile.TemporaryDirectory(prefix="rankd-cg-") as workdir:
        print(f"{'script':>12}  {'Ir a key, 64 keys a call':>26}  {'Ir a key, 1 key a call':>24}  ratio")
        for name, script in scripts.items():
            per_key = []
            for per_call in (64, 1):
                ir = instructions(script, many, per_call, workdir) - \
                    instructions(script, few, per_call, workdir)
                per_key.append(ir / keys)
            print(f"{name:>12}  {per_key[0]:26,.0f}  {per_key[1]:24,.0f}  {per_key[0] / per_key[1]:.3f}")


if __name__ == "__main__":
    main()
