"""The demo's `for_you` plan (plans/for_you.plan.ts) on a real rankd and a real
redis-server seeded with the demo data set: five calls in a row never repeat an item (its
served state, read back by its seen filter within the hour), a click posted to /events
changes the next answer's ctr_1d of that item, and `rankd seed --events` histories are
what it reads. About 3 s."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, Redis, demo_data, metric_value, plans_dir, run_tests,  # noqa: E402
                     wait_until)

_env = {}


def env():
    if not _env:
        redis = Redis()
        demo_data(redis, 50)
        _env.update(redis=redis, rankd=Rankd(plans_dir(), redis=redis))
    return _env["rankd"], _env["redis"]


def rank(s, user_id, **extra):
    status, _, body = s.rank(dict({"plan": "for_you", "user_id": user_id, "params": {"limit": 10}}, **extra))
    assert status == 200, (status, body)
    return body


def writes(s):
    return metric_value(s.metrics(), "rankd_served_state_writes_total", plan="for_you", outcome="ok") or 0


def test_five_calls_never_repeat_an_item():
    s, redis = env()
    shown = []
    for _ in range(5):
        before = writes(s)
        items = [it["id"] for it in rank(s, 3)["items"]]
        assert len(items) == 10, items
        shown += items
        wait_until(lambda: writes(s) > before, timeout=5, what="the served-state write")
    assert len(set(shown)) == len(shown) == 50, shown
    assert int(redis.execute("ZCARD", "served:3")) == 50
    assert 604_000_000 < int(redis.execute("PTTL", "served:3")) <= 604_800_000


def test_a_click_changes_the_next_ctr():
    s, _ = env()
    # explain writes no served state: the next call may show the same items.
    first = rank(s, 4, explain=True)["items"]
    item = first[0]["id"]
    assert abs(first[0]["ctr_1d"] - 1 / 51) < 1e-12  # prior [1, 50], no events yet
    body = json.dumps({"events": [{"type": "click", "user_id": 4, "item_id": item}]})
    status, _, data = s.request("POST", "/events", body)
    assert status == 200 and json.loads(data) == {"accepted": 1}, (status, data)
    after = {it["id"]: it["ctr_1d"] for it in rank(s, 4)["items"]}
    assert abs(after[item] - 2 / 51) < 1e-12, after  # (1 click + 1) / (0 impressions + 1 + 50)


def test_seeded_events_are_read():
    # A seeded history, at the request's time: some items have impressions and clicks.
    redis = Redis()
    now = int(time.time() * 1000)
    args = [RANKD, "seed", "--redis", redis.url(), "--users", "50", "--events", "20000",
            "--now-ms", str(now), "--flush"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "20000 events" in out.stdout, (out.stdout, out.stderr)
    s = Rankd(plans_dir(), redis=redis)
    items = rank(s, 5, explain=True)["items"]
    assert any(abs(it["ctr_1d"] - 1 / 51) > 1e-6 for it in items), items
    assert int(redis.execute("EXISTS", "cnt:user:5")) == 1
    assert int(redis.execute("EXISTS", "served:5")) == 1
    s.stop()
    redis.stop()


if __name__ == "__main__":
    run_tests([
        ("five_calls_never_repeat_an_item", test_five_calls_never_repeat_an_item),
        ("a_click_changes_the_next_ctr", test_a_click_changes_the_next_ctr),
        ("seeded_events_are_read", test_seeded_events_are_read),
    ])
