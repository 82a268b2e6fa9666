#!/usr/bin/env bash
# ops/bench runtime — EventLoop post throughput, coroutine timer overhead and fan-out
# sleeps against raw libuv / a thread pool, in one process.
set -euo pipefail
machine="$(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
"$RANKD_BUILD/bench/runtime_bench" | sed "s|}\$|, \"machine\": \"$machine\", \"build\": \"release+lto\"}|"
