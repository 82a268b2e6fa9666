#!/usr/bin/env bash
# ops/bench pages — issue #33's feed pages: the ops that shape a page (diversify, cap) as
# microbenchmarks, and (to come) a first page against a later page of the same ranking.
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"

# Pagination: feed's first page vs a later page, same run (server CPU per request).
# PLACEHOLDER: this part is added with the cursor work of issue #33; until then this
# script prints only the two lines below.

# diversify and cap (max 2, window 10, defer) over 1,000 rows, 50 Zipf i64 keys, uniform
# f64 scores: us per call, each against a comparable task in the same process.
"$RANKD_BUILD/bench/pages_bench" |
  sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|"
