#!/usr/bin/env bash
# End to end: `rankd run`, `rankd check-plans` and `rankd bench` on the fixture plans of
# tests/plans, which use the test-only ops: refused without --enable-test-ops.
# usage: test_rankd_run.sh RANKD PLANS_DIR
set -euo pipefail
rankd=$1 plans=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each test-only op, alone in a plan of its own folder: every command that loads plans
# refuses it without the flag, naming the file, the node, the plan, the op and the flag,
# and loads it with the flag.
for op in fixed_source sleep busy_cpu; do
  mkdir "$tmp/$op"
  echo '{"schema_version": 1, "name": "t", "nodes": [{"node_id": "n", "op": "'$op'"}], "output": {"node": "n"}}' \
    > "$tmp/$op/t.plan.json"
  want="t.plan.json: node 'n': op: plan 't' uses the test-only op '$op', which loads only with --enable-test-ops"
  set +e
  msg=$("$rankd" check-plans --plans "$tmp/$op" 2>&1); rc=$?
  set -e
  [[ $rc -eq 1 && $msg == *"$want"* ]] || fail "check-plans, $op without the flag: rc=$rc $msg"
  "$rankd" check-plans --plans "$tmp/$op" --enable-test-ops >/dev/null || fail "check-plans, $op with the flag"
  set +e
  out=$(echo '{"user_id": 1}' | "$rankd" run --plan t --plans "$tmp/$op"); rc=$?
  set -e
  [[ $rc -eq 1 && $out == *"$want"* ]] || fail "run, $op without the flag: rc=$rc $out"
  out=$(echo '{"user_id": 1}' | "$rankd" run --plan t --plans "$tmp/$op" --enable-test-ops) \
    || fail "run, $op with the flag: $out"
  [[ $out == '{"plan":"t",'* ]] || fail "run, $op with the flag: $out"
  set +e
  msg=$("$rankd" bench --plan t -n 1 --plans "$tmp/$op" 2>&1); rc=$?
  set -e
  [[ $rc -eq 1 && $msg == *"$want"* ]] || fail "bench, $op without the flag: rc=$rc $msg"
  "$rankd" bench --plan t -n 1 --plans "$tmp/$op" --enable-test-ops >/dev/null || fail "bench, $op with the flag"
done

out=$(echo '{"user_id": 5, "params": {"limit": 2, "weight": 0.5}}' | "$rankd" run --enable-test-ops --plan e2e_rank --plans "$plans")
want='{"plan":"e2e_rank","user_id":5,"items":[{"id":9,"score":4.5},{"id":7,"score":3.5}],"count":2,'
[[ $out == "$want"* ]] || fail "run: got $out"
[[ $out == *'"degraded":[]}' ]] || fail "run: no explain expected: $out"

out=$(echo '{"user_id": 5}' | "$rankd" run --enable-test-ops --plan e2e_rank --plans "$plans" --explain)
[[ $out == *'"nodes":[{"node_id":"src","op":"fixed_source","status":"ok","rows":10,'* ]] || fail "explain: $out"

# invalid_param: a task param reference out of its bounds is caught by the plan's own max.
set +e
out=$(echo '{"user_id": 5, "params": {"limit": 51}}' | "$rankd" run --enable-test-ops --plan e2e_rank --plans "$plans"); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"invalid_param","message":"params.limit: 51 is out of bounds 1..50"}}' ]] \
  || fail "invalid_param: rc=$rc $out"

# Optional branch fails open; the required slow branch misses a 50 ms deadline.
out=$(echo '{"user_id": 1}' | "$rankd" run --enable-test-ops --plan e2e_slow --plans "$plans")
[[ $out == *'"count":2,'*'"degraded":["flaky"]}' ]] || fail "degraded: $out"
set +e
out=$(echo '{"user_id": 1}' | "$rankd" run --enable-test-ops --plan e2e_slow --plans "$plans" --deadline-ms 50); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"deadline_exceeded","message":"node '"'"'slow'"'"' (sleep): '* ]] \
  || fail "deadline: rc=$rc $out"

set +e
out=$(echo 'nope' | "$rankd" run --enable-test-ops --plan e2e_rank --plans "$plans"); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"bad_request","message":"invalid JSON'* ]] || fail "bad body: $out"

"$rankd" check-plans --enable-test-ops --plans "$plans" >/dev/null || fail "check-plans on good plans"
bad=$tmp/bad
mkdir "$bad"
cp "$plans"/*.plan.json "$bad"/
echo '{"schema_version": 1, "name": "broken", "nodes": [{"node_id": "a", "op": "nope"}], "output": {"node": "a"}}' \
  > "$bad/broken.plan.json"
set +e
msg=$("$rankd" check-plans --enable-test-ops --plans "$bad" 2>&1); rc=$?
set -e
[[ $rc -ne 0 && $msg == *"broken.plan.json: node 'a': op: unknown op 'nope'"* ]] || fail "check-plans: rc=$rc $msg"
echo ok
