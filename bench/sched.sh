#!/usr/bin/env bash
# ops/bench sched — the DAG scheduler's cost per node (chain, wide fan-out, layered
# diamonds of zero-cost tasks; 10..2000 nodes), and its growth from 10 to 2000 nodes.
# Targets: <= 1000 ns per node, ratio cost(2000)/cost(10) <= 1.3.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/sched_bench" "$@" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/sched_bench $* (the baseline is the same shape at 10 nodes, same run)"
