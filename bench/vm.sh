#!/usr/bin/env bash
# ops/bench vm — the expression VM, the predicate filter and the sort task on 10,000 rows,
# each against a hand-written C++ loop with the same null semantics, in one process.
set -euo pipefail
machine="$(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
"$RANKD_BUILD/bench/vm_bench" | sed "s|}\$|, \"machine\": \"$machine\", \"build\": \"release+lto\"}|"
