#!/usr/bin/env bash
# Checks the deployment files of ops/: Prometheus config and alert rules (promtool,
# with the rules' unit tests), the Grafana dashboard (JSON, PromQL validity, only
# metrics rankd exports), every YAML file (python3-yaml), the Kubernetes objects
# (structure and cross-references), ops/haproxy.cfg (haproxy -c, its checks and the
# drain rule), the systemd unit (systemd-analyze verify when
# present) and the Dockerfile (by reading), docs/operations.md (every flag and
# metric), and that no tracked file refers to material outside the repository. Prints one line per check and `N passed, N failed`; exits 1 on any failure.
#
#   tests/ops/test_ops_files.sh [SOURCE_ROOT]
#   tests/ops/test_ops_files.sh --write-plans-configmap   # regenerate ops/k8s/configmap-plans.yaml
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${RANKD_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
if [ "${1:-}" = "--write-plans-configmap" ]; then
  exec python3 "$here/check_ops_files.py" "$root" --write-plans-configmap
fi
[ $# -ge 1 ] && root=$1
cd "$root" || exit 1

passed=0
failed=0
# run NAME COMMAND...: one check from a command's exit status; its output on failure.
run() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    printf '%s\n' "$out" | sed 's/^/       /'
    failed=$((failed + 1))
  fi
}

if command -v promtool >/dev/null; then
  run "promtool check config ops/prometheus.yml" promtool check config ops/prometheus.yml
  run "promtool check rules ops/alerts.yml" promtool check rules ops/alerts.yml
  run "promtool test rules ops/alerts_test.yml" promtool test rules ops/alerts_test.yml
else
  run "promtool is installed (Debian: prometheus)" false
fi

# Ports from the environment have defaults in the file, so it checks as shipped.
if command -v haproxy >/dev/null; then
  run "haproxy -c -f ops/haproxy.cfg" haproxy -c -q -f ops/haproxy.cfg
else
  run "haproxy is installed (Debian: haproxy)" false
fi

# systemd-analyze verify needs the ExecStart binary to exist: point it at /bin/true.
if command -v systemd-analyze >/dev/null; then
  unit_dir=$(mktemp -d)
  sed 's#^ExecStart=/usr/local/bin/rankd#ExecStart=/bin/true#' ops/systemd/rankd.service >"$unit_dir/rankd.service"
  # verify exits 0 on unknown keys and bad values: any diagnostic about the unit fails.
  verify_unit() {
    local diag
    diag=$(systemd-analyze verify "$unit_dir/rankd.service" 2>&1) || { echo "$diag"; return 1; }
    if grep -F "rankd.service" <<<"$diag"; then return 1; fi
    return 0
  }
  run "systemd-analyze verify ops/systemd/rankd.service" verify_unit
  # With the Redis password drop-in, found through the unit path as once installed.
  mkdir "$unit_dir/rankd.service.d"
  cp ops/systemd/redis-password.conf "$unit_dir/rankd.service.d/"
  verify_dropin() {
    local diag
    diag=$(SYSTEMD_UNIT_PATH="$unit_dir:" systemd-analyze verify rankd.service 2>&1) || { echo "$diag"; return 1; }
    if grep -E "rankd.service|redis-password.conf" <<<"$diag"; then return 1; fi
    return 0
  }
  run "systemd-analyze verify rankd.service with ops/systemd/redis-password.conf" verify_dropin
  rm -rf "$unit_dir"
else
  echo "skip systemd-analyze verify (systemd-analyze not installed; structural check below)"
fi

# The structural checks, one line each.
py_out=$(python3 "$here/check_ops_files.py" "$root" 2>&1)
py_rc=$?
printf '%s\n' "$py_out"
passed=$((passed + $(grep -c '^ok ' <<<"$py_out")))
failed=$((failed + $(grep -c '^FAIL ' <<<"$py_out")))
if [ $py_rc -ne 0 ]; then
  echo "FAIL check_ops_files.py exited $py_rc"
  failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
