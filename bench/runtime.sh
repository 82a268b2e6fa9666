#!/usr/bin/env bash
# ops/bench runtime — EventLoop post throughput, coroutine timer overhead and fan-out
# sleeps against raw libuv / a thread pool, in one process.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/runtime_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/runtime_bench (the baseline runs in the same process: raw libuv, a mutex-guarded queue, a thread pool; see bench/runtime_bench.cc)"
