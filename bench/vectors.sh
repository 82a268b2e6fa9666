#!/usr/bin/env bash
# ops/bench vectors — dot(viewer, vec column) ns per row at D = 64 over 1,000 rows through
# the expression VM, against a plain loop over the same kernel (data/vector_math.h), in
# one process (bench/vectors_bench.cc). The ANN parts of issue #46 are not here yet.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/vectors_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/vectors_bench (the baseline, a loop calling the same kernel, runs in the same process; see bench/vectors_bench.cc)"
