#!/usr/bin/env bash
# ops/bench pages — feed pages: the ops that shape a page (diversify, cap) as
# microbenchmarks, then a first page against a later page of the same ranking
# (bench/pages_cursor.sh, whose header says what it runs and which Env it reads).
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"

# diversify and cap (max 2, window 10, defer) over 1,000 rows, 50 Zipf i64 keys, uniform
# f64 scores: us per call, each against a comparable task in the same process.
"$RANKD_BUILD/bench/pages_bench" |
  sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|"

# Pagination: feed's first page vs a later page, same run (server CPU per request).
source "$RANKD_ROOT/bench/pages_cursor.sh"
pages_cursor_setup
pages_cursor_rounds
pages_cursor_report
