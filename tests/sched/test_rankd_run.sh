#!/usr/bin/env bash
# End to end: `rankd run` and `rankd check-plans` on the fixture plans of tests/plans.
# usage: test_rankd_run.sh RANKD PLANS_DIR
set -euo pipefail
rankd=$1 plans=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(echo '{"user_id": 5, "params": {"limit": 2, "weight": 0.5}}' | "$rankd" run --plan e2e_rank --plans "$plans")
want='{"plan":"e2e_rank","user_id":5,"items":[{"id":9,"score":4.5},{"id":7,"score":3.5}],"count":2,'
[[ $out == "$want"* ]] || fail "run: got $out"
[[ $out == *'"degraded":[]}' ]] || fail "run: no explain expected: $out"

out=$(echo '{"user_id": 5}' | "$rankd" run --plan e2e_rank --plans "$plans" --explain)
[[ $out == *'"nodes":[{"node_id":"src","op":"fixed_source","status":"ok","rows":10,'* ]] || fail "explain: $out"

# invalid_param: a task param reference out of its bounds is caught by the plan's own max.
set +e
out=$(echo '{"user_id": 5, "params": {"limit": 51}}' | "$rankd" run --plan e2e_rank --plans "$plans"); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"invalid_param","message":"params.limit: 51 is out of bounds 1..50"}}' ]] \
  || fail "invalid_param: rc=$rc $out"

# Optional branch fails open; the required slow branch misses a 50 ms deadline.
out=$(echo '{"user_id": 1}' | "$rankd" run --plan e2e_slow --plans "$plans")
[[ $out == *'"count":2,'*'"degraded":["flaky"]}' ]] || fail "degraded: $out"
set +e
out=$(echo '{"user_id": 1}' | "$rankd" run --plan e2e_slow --plans "$plans" --deadline-ms 50); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"deadline_exceeded","message":"node '"'"'slow'"'"' (sleep): '* ]] \
  || fail "deadline: rc=$rc $out"

set +e
out=$(echo 'nope' | "$rankd" run --plan e2e_rank --plans "$plans"); rc=$?
set -e
[[ $rc -ne 0 && $out == '{"error":{"code":"bad_request","message":"invalid JSON'* ]] || fail "bad body: $out"

"$rankd" check-plans --plans "$plans" >/dev/null || fail "check-plans on good plans"
bad=$(mktemp -d)
trap 'rm -rf "$bad"' EXIT
cp "$plans"/*.plan.json "$bad"/
echo '{"schema_version": 1, "name": "broken", "nodes": [{"node_id": "a", "op": "nope"}], "output": {"node": "a"}}' \
  > "$bad/broken.plan.json"
set +e
msg=$("$rankd" check-plans --plans "$bad" 2>&1); rc=$?
set -e
[[ $rc -ne 0 && $msg == *"broken.plan.json: node 'a': op: unknown op 'nope'"* ]] || fail "check-plans: rc=$rc $msg"
echo ok
