#!/usr/bin/env bash
# ops/bench vm — the expression VM, the predicate filter and the sort task on 10,000 rows,
# each against a hand-written C++ loop with the same null semantics, in one process.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/vm_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/vm_bench (the baseline, a hand-written C++ loop per case, runs in the same process; see bench/vm_bench.cc)"
