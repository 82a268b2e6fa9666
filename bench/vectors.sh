#!/usr/bin/env bash
# ops/bench vectors — dot(viewer, vec column) ns per row at D = 64 over 1,000 rows through
# the expression VM, against a plain loop over the same kernel (data/vector_math.h), in
# one process (bench/vectors_bench.cc); then `ann` µs per query at ANN_ITEMS (100,000) × 64,
# k 100, the default ef, through rankd's index code against the same faiss index searched
# directly, one thread, recall and build times beside them (bench/ann_bench.cc; smaller
# runs: ANN_ITEMS=2000 ANN_QUERIES=20). The discover plan end to end is not here yet.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
"$RANKD_BUILD/bench/vectors_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/vectors_bench (the baseline, a loop calling the same kernel, runs in the same process; see bench/vectors_bench.cc)"
"$RANKD_BUILD/bench/ann_bench" | sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/ann_bench (the baseline, faiss IndexHNSWFlat::search on an index built from the same vectors, runs in the same process; see bench/ann_bench.cc)"
