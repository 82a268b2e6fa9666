#!/usr/bin/env bash
# The meson test fuzz_corpus: replay_corpus.sh REPLAY DIR [REPLAY DIR...] runs each
# harness's replay program over its corpus folder; fails if any input fails, and (the
# replay program does) when a folder is missing or empty.
set -euo pipefail
if [ $# -eq 0 ] || [ $(($# % 2)) -ne 0 ]; then
  echo "usage: replay_corpus.sh REPLAY DIR [REPLAY DIR...]" >&2
  exit 2
fi
while [ $# -ge 2 ]; do
  "$1" "$2"
  shift 2
done
