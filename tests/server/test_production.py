"""Production stays production: the test-only tasks (sleep, busy_cpu,
fixed_source) fail the plan load of `rankd serve` at start-up and at a reload unless it
is given --enable-test-ops (tests/sched/test_rankd_run.sh does the same for run,
check-plans and bench), and the warnings a client can cause at will (5xx answers) are
written at most once a second per error code, the next one counting those left out."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, metric_value, run_tests, simple_plan, temp_dir,  # noqa: E402
                     wait_until, write_plan)

# One plan per test-only op, each node alone (a source).
TEST_OP_PLANS = {
    "fixed_source": simple_plan("uses_fixed_source", [
        {"node_id": "n", "op": "fixed_source", "inputs": [], "params": {"count": 3}}], "n"),
    "sleep": simple_plan("uses_sleep", [
        {"node_id": "n", "op": "sleep", "inputs": [], "params": {"duration_ms": 1}}], "n"),
    "busy_cpu": simple_plan("uses_busy_cpu", [
        {"node_id": "n", "op": "busy_cpu", "inputs": [], "params": {"duration_ms": 1}}], "n"),
}


def refusal(op):
    name = TEST_OP_PLANS[op]["name"]
    return (f"{name}.plan.json: node 'n': op: plan '{name}' uses the test-only op '{op}', "
            "which loads only with --enable-test-ops")


def folder(plans):
    d = temp_dir("rankd-prod-plans-")
    for p in plans:
        write_plan(d, p["name"], p)
    return d


def test_serve_refuses_test_ops_at_start_up_unless_enabled():
    for op, plan in TEST_OP_PLANS.items():
        out = subprocess.run([RANKD, "serve", "--host", "127.0.0.1", "--port", "0", "--plans",
                              folder([plan])], capture_output=True, text=True, timeout=30)
        assert out.returncode == 1, (op, out.returncode, out.stderr)
        assert refusal(op) in out.stderr, (op, out.stderr)
    s = Rankd(folder(TEST_OP_PLANS.values()), test_ops=True)
    try:
        for plan in TEST_OP_PLANS.values():
            status, _, body = s.rank({"plan": plan["name"], "user_id": 1})
            assert status == 200, (plan["name"], body)
    finally:
        assert s.stop() == 0


def test_a_reload_refuses_test_ops_unless_enabled():
    viewer = simple_plan("prod", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {}}], "v")
    d = folder([viewer])
    s = Rankd(d, test_ops=False)
    try:
        def reloads(result):
            return metric_value(s.metrics(), "rankd_plan_reloads_total", result=result) or 0
        for op, plan in TEST_OP_PLANS.items():
            errors = reloads("error")
            write_plan(d, plan["name"], plan)
            s.signal(signal.SIGHUP)
            wait_until(lambda: reloads("error") == errors + 1, what=f"the reload with {op} refused")
            wait_until(lambda: refusal(op) in s.stderr(), timeout=5, what="the reason in the log")
            assert s.request("GET", "/plans/" + plan["name"])[0] == 404
            assert s.request("GET", "/plans/prod")[0] == 200  # the previous set serves on
            os.remove(os.path.join(d, plan["name"] + ".plan.json"))
    finally:
        assert s.stop() == 0
    # The same folder and reload with the flag: loaded.
    s = Rankd(d, test_ops=True)
    try:
        write_plan(d, "uses_sleep", TEST_OP_PLANS["sleep"])
        s.signal(signal.SIGHUP)
        wait_until(lambda: s.request("GET", "/plans/uses_sleep")[0] == 200,
                   what="the test plan loaded at the reload")
    finally:
        assert s.stop() == 0


LINE = re.compile(r"^(\S+) warn +request \S+ plan '\S+': (\w+): .*?(?: \((\d+) suppressed\))?$")


def warnings_by_code(text):
    """{error code: [(time of the line, suppressed count)]} of the 5xx warnings."""
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            at = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
            out.setdefault(m.group(2), []).append((at, int(m.group(3) or 0)))
    return out


def test_warnings_for_5xx_answers_are_rate_limited_per_code():
    """A client sending deadline_ms: 1 in a loop (504 deadline_exceeded) and a plan that
    fails (500 internal), interleaved: every answer is counted, but each code gets at
    most a line a second, and the line after a quiet second says how many it left out."""
    slow = simple_plan("slow", [
        {"node_id": "n", "op": "sleep", "inputs": [], "params": {"duration_ms": 50}}], "n")
    failing = simple_plan("failing", [
        {"node_id": "n", "op": "sleep", "inputs": [],
         "params": {"duration_ms": 0, "fail_after_sleep": True}}], "n")
    s = Rankd(folder([slow, failing]), test_ops=True)
    try:
        bodies = {"deadline_exceeded": json.dumps({"plan": "slow", "user_id": 1, "deadline_ms": 1}),
                  "internal": json.dumps({"plan": "failing", "user_id": 1})}
        answers = {code: 0 for code in bodies}
        conn = s.conn()

        def ask(code):
            conn.request("POST", "/rank", bodies[code])
            r = conn.getresponse()
            err = json.loads(r.read())["error"]
            assert r.status >= 500 and err["code"] == code, (r.status, err)
            answers[code] += 1
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.2 or min(answers.values()) < 50:
            for code in bodies:
                ask(code)
            assert time.monotonic() - t0 < 60, answers
        elapsed = time.monotonic() - t0
        time.sleep(1.1)  # a quiet second: the next answer of each code gets its line
        for code in bodies:
            ask(code)
        wait_until(lambda: all(len(warnings_by_code(s.stderr()).get(c, [])) >= 2 for c in bodies),
                   timeout=5, what="the lines after the quiet second")
        lines = warnings_by_code(s.stderr())
        print(f"     answers {answers} in {elapsed:.1f} s + 1; lines "
              f"{ {c: len(v) for c, v in lines.items()} }", flush=True)
        for code in bodies:
            got = lines[code]
            assert len(got) <= elapsed + 3, (code, len(got), elapsed)
            assert answers[code] > len(got) + 10, (code, answers[code], len(got))
            for (a, _), (b, _) in zip(got, got[1:]):
                assert b - a >= 0.9, (code, got)  # a second apart (0.1 s for the clocks)
            # Every answer is either a line or counted on the next line of its code, and
            # the last one came after the quiet second, so nothing is left uncounted.
            assert got[-1][1] > 0, (code, got[-1])
            assert len(got) + sum(n for _, n in got) == answers[code], (code, got, answers)
        assert not set(lines) - set(bodies), lines.keys()
    finally:
        assert s.stop() == 0


if __name__ == "__main__":
    run_tests([
        ("serve refuses the test-only ops at start-up unless enabled",
         test_serve_refuses_test_ops_at_start_up_unless_enabled),
        ("a reload refuses the test-only ops unless enabled",
         test_a_reload_refuses_test_ops_unless_enabled),
        ("warnings for 5xx answers are rate-limited per error code",
         test_warnings_for_5xx_answers_are_rate_limited_per_code),
    ])
