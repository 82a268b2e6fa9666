"""The DSL's round trip through a live server: edit a .plan.ts, run the DSL build, send
SIGHUP, and rankd serves the new plan. Runs in a copy of plans/ (sharing its
node_modules) plus the Redis-free test fixture fixed_simple of tests/plans (the harness
starts rankd with --enable-test-ops), so the repository's plans stay untouched.
REQUIRES: npm ci done in plans/ (ops/lib/plans-check runs this after it)."""
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import SOURCE_ROOT, Rankd, run_tests, temp_dir, wait_until  # noqa: E402


def test_edit_build_sighup_changes_behaviour():
    src = os.path.join(SOURCE_ROOT, "plans")
    work = temp_dir("rankd-dsl-")
    shutil.copytree(src, work, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("node_modules", "dist"))
    os.symlink(os.path.join(src, "node_modules"), os.path.join(work, "node_modules"))
    for ext in (".plan.ts", ".plan.json"):
        shutil.copy(os.path.join(SOURCE_ROOT, "tests", "plans", "fixed_simple" + ext), work)
    s = Rankd(work)
    try:
        status, _, body = s.rank({"plan": "fixed_simple", "user_id": 1})
        assert status == 200 and body["count"] == 5, body
        path = os.path.join(work, "fixed_simple.plan.ts")
        with open(path) as f:
            ts = f.read()
        assert ".take({ count: 5 })" in ts
        with open(path, "w") as f:
            f.write(ts.replace(".take({ count: 5 })", ".take({ count: 3 })"))
        subprocess.run(["npm", "--prefix", work, "run", "--silent", "build"], check=True, timeout=120,
                       capture_output=True)
        s.signal(signal.SIGHUP)
        wait_until(lambda: s.rank({"plan": "fixed_simple", "user_id": 1})[2]["count"] == 3,
                   what="the rebuilt plan to be served")
    finally:
        assert s.stop() == 0


if __name__ == "__main__":
    run_tests([("test_edit_build_sighup_changes_behaviour", test_edit_build_sighup_changes_behaviour)])
