#!/usr/bin/env bash
# The meson test fuzz_corpus: replay_corpus.sh REPLAY DIR [REPLAY DIR...] runs each
# harness's replay program over its corpus folder; fails if any input fails.
set -euo pipefail
while [ $# -ge 2 ]; do
  "$1" "$2"
  shift 2
done
