#!/usr/bin/env bash
# ops/bench sched — the DAG scheduler's cost per node (chain, wide fan-out, layered
# diamonds of zero-cost tasks; 10..2000 nodes), and its growth from 10 to 2000 nodes.
# Targets: <= 1000 ns per node, ratio cost(2000)/cost(10) <= 1.3.
set -euo pipefail
machine="$(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
"$RANKD_BUILD/bench/sched_bench" "$@" | sed "s|}\$|, \"machine\": \"$machine\", \"build\": \"release+lto\"}|"
