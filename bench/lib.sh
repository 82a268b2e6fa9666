# Shared by the bench/*.sh scripts (sourced): the machine line, free loopback ports,
# background processes stopped at exit, and a local redis-server.
# REQUIRES: set -euo pipefail in the caller; RANKD_BUILD and RANKD_ROOT (ops/bench sets them).
#
# The benches other than `vectors` seed with --no-embeddings: the demo schema's item index
# is then built empty at once, where 30,000 embedded items would hold /readyz ~30 s and
# rebuild beside the measurement whenever a bench seeds under a running rankd.

MACHINE="$(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
export MACHINE
BENCH_TMP=$(mktemp -d)
bench_pids=()
bench_cleanup() {
  for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT

# cpu_ticks PID...: user + system CPU time of every thread of the PIDs, in clock ticks
# (SC_CLK_TCK per second).
cpu_ticks() {
  local t=0 p f
  for p in "$@"; do
    for f in /proc/"$p"/task/*/stat; do t=$((t + $(awk '{print $14 + $15}' "$f" 2>/dev/null || echo 0))); done
  done
  echo "$t"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_http() {  # wait_http URL: until it answers 2xx (10 s at most)
  for _ in $(seq 200); do curl -sf "$1" >/dev/null && return 0; sleep 0.05; done
  echo "not up: $1" >&2
  return 1
}

start_redis() {  # start_redis [ARG...] -> REDIS_PORT: a throw-away redis-server on loopback
  REDIS_PORT=$(free_port)
  mkdir -p "$BENCH_TMP/redis"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$BENCH_TMP/redis" --logfile "$BENCH_TMP/redis/redis.log" "$@" &
  bench_pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "redis-server did not start" >&2
  return 1
}

# make_tls_certs DIR: a test CA (DIR/ca.crt) and a server certificate it signed for
# localhost and 127.0.0.1 (DIR/server.crt, DIR/server.key), EC P-256, for a TLS Redis.
make_tls_certs() {
  local d=$1
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
      -out ca.crt -days 2 -subj "/CN=rankd bench CA"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
      -out server.csr -subj /CN=localhost
    printf 'subjectAltName = DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -out server.crt -extfile server.ext
  ) >/dev/null 2>&1
}

# with_baseline_command CMD: copies the JSON lines of stdin to stdout, adding
# "baseline_command": CMD to each that has a "baseline" and names no command for it.
with_baseline_command() {
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        sys.stdout.write(line)
        continue
    if "baseline" in d and "baseline_command" not in d:
        d["baseline_command"] = sys.argv[1]
    print(json.dumps(d), flush=True)' "$1"
}

# build_base REV -> BASE_BIN, BASE_SHA: the commit's rankd, release + LTO, for BASE_REV.
# The sources come from `git archive` (a plain snapshot: nothing to prune, never edited),
# built once per sha in $RANKD_ROOT/build-base-<sha>/ (kept across runs).
build_base() {
  local sha dir root=$RANKD_ROOT
  sha=$(git -C "$root" rev-parse --verify "$1^{commit}")
  dir="$root/build-base-$sha"
  if [ ! -f "$dir/src/meson.build" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/src"
    git -C "$root" archive "$sha" | tar -x -C "$dir/src"
  fi
  if [ ! -f "$dir/build/build.ninja" ]; then
    meson setup "$dir/build" "$dir/src" --buildtype=release -Db_lto=true -Db_ndebug=true >&2
  fi
  # The executable moved from src/server/ to src/cli/: a base from before the move has
  # it in the old place.
  local exe=src/cli/rankd
  [ -f "$dir/src/src/cli/meson.build" ] || exe=src/server/rankd
  ninja -C "$dir/build" "$exe" >&2
  # shellcheck disable=SC2034  # outputs, read by the caller
  BASE_BIN="$dir/build/$exe"
  # shellcheck disable=SC2034
  BASE_SHA=$sha
}

# plan_file NAME: the current tree's compiled plan NAME: a shipped one (plans/) or a test
# fixture (tests/plans/: fixed_rank, fixed_simple, ..., which use the test-only ops).
plan_file() {
  if [ -f "$RANKD_ROOT/plans/$1.plan.json" ]; then
    echo "$RANKD_ROOT/plans/$1.plan.json"
  else
    echo "$RANKD_ROOT/tests/plans/$1.plan.json"
  fi
}

# test_ops_flag BIN: "--enable-test-ops" when that rankd takes the flag, without which it
# refuses plans using sleep, busy_cpu or fixed_source; nothing for a build older than the
# flag (a BASE_REV one), which loads them as they are and would refuse the flag.
test_ops_flag() {
  local help
  help=$("$1" serve --help 2>&1 || true)
  if [[ $help == *--enable-test-ops* ]]; then echo --enable-test-ops; fi
  return 0
}

# bench_builds_and_plans PLAN...: the builds a bench alternates — `variants` (current, and
# base when BASE_REV is set) with their binaries in `bin` — and the plans both load:
# copies of the current tree's, in $BENCH_TMP/plans (the base commit may lack some). A
# test fixture among them loads with $(test_ops_flag "${bin[$v]}") on the serve line.
bench_builds_and_plans() {
  variants=(current)
  declare -gA bin=([current]="$RANKD_BUILD/src/cli/rankd")
  if [ -n "${BASE_REV:-}" ]; then
    build_base "$BASE_REV"
    variants+=(base)
    bin[base]=$BASE_BIN
  fi
  local p
  mkdir -p "$BENCH_TMP/plans"
  for p in "$@"; do cp "$(plan_file "$p")" "$BENCH_TMP/plans/"; done
  cp "$RANKD_ROOT"/plans/*.model.json "$RANKD_ROOT"/plans/*.onnx "$BENCH_TMP/plans/" 2>/dev/null || true
}

# run_rounds VARIANT...: $rounds rounds of `measure VARIANT PLAN` (the bench's own
# function) for every plan of `plans`, each variant in turn, the order reversed every
# other round so that the shared machine's drift falls on all alike; one JSON line per
# measure in $BENCH_TMP/rounds.jsonl.
run_rounds() {
  local round plan v order
  : > "$BENCH_TMP/rounds.jsonl"
  for round in $(seq "$rounds"); do
    order=("$@")
    if [ $((round % 2)) -eq 0 ]; then
      local -a rev=()
      for ((i = ${#order[@]} - 1; i >= 0; i--)); do rev+=("${order[i]}"); done
      order=("${rev[@]}")
    fi
    for plan in "${plans[@]}"; do
      for v in "${order[@]}"; do
        echo "{\"round\": $round, \"variant\": \"$v\", \"plan\": \"$plan\", \"r\": $(measure "$v" "$plan")}" >> "$BENCH_TMP/rounds.jsonl"
      done
    done
  done
}
