"""Redis failures end to end: a real rankd whose redis_default is a fake RESP endpoint
(tests/support/fake_resp.py) that answers with what a real Redis cannot (huge headers,
garbage, replies cut short), and whose endpoint `real` is a real redis-server.

Every failure is answered per the rule of docs/operations.md ("Redis limits and
failures"): bad replies 502 backend_error, lost connections 503 unavailable with
Retry-After, deadlines 504, optional nodes listed in `degraded`; never 500, never a
dropped connection, and no address, key or raw Redis text in the body (that detail goes
to the log with the request id). Meanwhile the real endpoint keeps serving. Last, the
real redis-server is SIGKILLed and restarted under load.

rankd writes at most one such warning a second per error code (docs/operations.md, "Log
lines a client can cause"): a case that reads its own line waits, if it must, until a
second has passed since the last request that could have written one of its code."""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from fake_resp import FakeResp  # noqa: E402
from harness import (RANKD, Rankd, Redis, metric_value, plans_dir, proc_status_kib, run_tests,  # noqa: E402
                     simple_plan, wait_until)

MAX_REPLY = 16 << 20  # small, so that the RSS bound below is tight

PLANS = {
    "fake_viewer": simple_plan("fake_viewer", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "redis_default"}}], "v"),
    "fake_optional": simple_plan("fake_optional", [
        {"node_id": "v", "op": "viewer", "inputs": [], "optional": True,
         "params": {"endpoint": "redis_default"}}], "v"),
    "real_viewer": simple_plan("real_viewer", [
        {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "real"}}], "v"),
}

_env = {}
_last_warning = {}  # error code -> when the last request that may have logged one answered
LOG_INTERVAL_S = 1.1  # rankd's second, plus the time between its answer and its log line


def own_log_line(code):
    """Returns once a warning of `code` written now cannot be left out by the rate limit."""
    last = _last_warning.get(code)
    if last is not None:
        time.sleep(max(0.0, last + LOG_INTERVAL_S - time.monotonic()))


def may_have_logged(code):
    _last_warning[code] = time.monotonic()


def env():
    if not _env:
        fake = FakeResp()
        real = Redis()
        real.execute("HSET", "user:7", "country", "FR", "age", "33")
        rankd = Rankd(plans_dir(PLANS), redis=fake, extra_args=[  # fake is redis_default
            "--redis", f"real={real.url()}", "--redis-conns", "1",
            "--redis-max-reply-bytes", str(MAX_REPLY), "--deadline-ms", "1000"])
        _env.update(fake=fake, real=real, rankd=rankd)
    return _env["fake"], _env["real"], _env["rankd"]


def rank(rankd, plan, rid, deadline_ms=None, timeout=10):
    body = {"plan": plan, "user_id": 7}
    if deadline_ms:
        body["deadline_ms"] = deadline_ms
    status, headers, data = rankd.request("POST", "/rank", body, headers={"X-Request-Id": rid},
                                          timeout=timeout)
    return status, headers, data.decode()


def ready(rankd):
    # The live-connection gauge, read at scrape time (/readyz is refreshed on a tick and
    # may still say ready just after a connection was dropped).
    def live(ep):
        return (metric_value(rankd.metrics(), "rankd_redis_connections", endpoint=ep,
                             state="live") or 0) >= 1
    wait_until(lambda: live("redis_default") and live("real"), timeout=10,
               what="both endpoints live")


def others_still_work(rankd):
    assert rankd.request("GET", "/healthz")[0] == 200
    status, _, body = rank(rankd, "real_viewer", "fault-real")
    assert status == 200, body
    assert json.loads(body)["items"][0]["country"] == "FR", body


def no_internals(body, fake, secrets=()):
    for leak in ["127.0.0.1", str(fake.port), "user:7", "user:", "WRONGTYPE", "secret_key",
                 "HTTP/1.1", "not-redis", *secrets]:
        assert leak not in body, f"{leak!r} leaked into {body}"


def check_failure(mode, want_status, want_code, plan="fake_viewer"):
    fake, _, rankd = env()
    ready(rankd)
    fake.mode = mode
    rid = f"fault-{mode}"
    own_log_line(want_code)
    status, headers, body = rank(rankd, plan, rid)
    may_have_logged(want_code)
    fake.mode = "ok_empty"
    assert rankd.proc.poll() is None, f"rankd died on {mode}: {rankd.stderr()[-2000:]}"
    assert status == want_status, (mode, status, body)
    err = json.loads(body)["error"]
    assert err["code"] == want_code, (mode, body)
    assert "redis_default" in err["message"], body  # the endpoint's configured name
    no_internals(body, fake)
    if want_status == 503:
        assert headers.get("retry-after") == "1", headers
    # The detail is in the log, under the request id.
    wait_until(lambda: rid in rankd.stderr(), timeout=5, what=f"a log line for {rid}")
    line = [ln for ln in rankd.stderr().splitlines() if rid in ln][-1]
    assert f"127.0.0.1:{fake.port}" in line, line
    others_still_work(rankd)
    return err["message"]


def test_huge_array_header():
    msg = check_failure("huge_array", 502, "backend_error")
    assert "size limit" in msg or "element limit" in msg, msg


def test_huge_bulk_header():
    msg = check_failure("huge_bulk", 502, "backend_error")
    assert "size limit" in msg, msg


def test_garbage():
    assert "protocol error" in check_failure("garbage", 502, "backend_error")


def test_too_deep():
    assert "nested too deep" in check_failure("deep", 502, "backend_error")


def test_unsolicited_reply():
    # A reply no command waits for fails the connection, and its batches, at once.
    assert "protocol error" in check_failure("unsolicited", 502, "backend_error")


def test_wrong_type():
    msg = check_failure("wrong_type", 502, "backend_error")
    assert "unexpected integer reply" in msg, msg


def test_error_reply_text_stays_in_the_log():
    msg = check_failure("error_reply", 502, "backend_error")
    assert "error reply" in msg, msg
    fake, _, rankd = env()
    assert "secret_key_42" in rankd.stderr()


def test_truncated_then_close():
    assert "connection lost" in check_failure("truncated", 503, "unavailable")


def test_close_mid_reply():
    assert "connection lost" in check_failure("close_mid", 503, "unavailable")


def test_silent_is_deadline_exceeded():
    fake, _, rankd = env()
    ready(rankd)
    fake.mode = "silent"
    status, _, body = rank(rankd, "fake_viewer", "fault-silent", deadline_ms=200)
    fake.mode = "ok_empty"
    assert status == 504, body
    assert json.loads(body)["error"]["code"] == "deadline_exceeded"
    no_internals(body, fake)
    others_still_work(rankd)


def test_optional_node_is_degraded():
    fake, _, rankd = env()
    # (mode, the code of its degraded node's warning); the first one's line is read.
    for mode, code in [("garbage", "backend_error"), ("huge_array", "backend_error"),
                       ("truncated", "unavailable"), ("wrong_type", "backend_error")]:
        ready(rankd)
        fake.mode = mode
        if mode == "garbage":
            own_log_line(code)
        status, _, body = rank(rankd, "fake_optional", f"fault-optional-{mode}")
        may_have_logged(code)
        fake.mode = "ok_empty"
        assert status == 200, (mode, body)
        assert json.loads(body)["degraded"] == ["v"], (mode, body)
    wait_until(lambda: "fault-optional-garbage" in rankd.stderr(), timeout=5,
               what="the degraded node's log line")



def sanitized():
    """ASan or TSan: RSS measurements are the plain build's (their shadow memory alone
    exceeds an absolute bound)."""
    with open(RANKD, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data


def test_1gib_bulk_streamed_keeps_rss_bounded():
    fake, _, rankd = env()
    ready(rankd)
    rss_before_mib = proc_status_kib(rankd.proc.pid, "VmRSS") / 1024
    fake.mode = "stream_1g"
    status, _, body = rank(rankd, "fake_viewer", "fault-stream")
    fake.mode = "ok_empty"
    assert status == 502, body
    assert json.loads(body)["error"]["code"] == "backend_error"
    peak_mib = proc_status_kib(rankd.proc.pid, "VmHWM") / 1024
    wait_until(lambda: fake.streamed > 0, timeout=10, what="the fake to notice the hang-up")
    print(f"     1 GiB bulk: rankd peak RSS {peak_mib:.1f} MiB, {rss_before_mib:.1f} before "
          f"(limit {MAX_REPLY >> 20} MiB + 32), fake sent {fake.streamed >> 10} KiB of payload "
          f"before rankd hung up", flush=True)
    assert peak_mib - rss_before_mib < (MAX_REPLY >> 20) + 32, (peak_mib, rss_before_mib)
    if not sanitized():  # a sanitizer's shadow memory alone exceeds the bound
        assert peak_mib < (MAX_REPLY >> 20) + 32, peak_mib
    others_still_work(rankd)


def test_metrics_count_bad_replies():
    _, _, rankd = env()
    text = rankd.metrics()
    bad = metric_value(text, "rankd_redis_errors_total", endpoint="redis_default", kind="bad_reply")
    assert bad is not None and bad >= 5, bad


def test_redis_sigkill_and_restart_under_load():
    _, real, rankd = env()
    ready(rankd)
    statuses = {}
    problems = []
    first_ok_after = []
    restarted_at = [None]
    stop = threading.Event()
    lock = threading.Lock()

    def load():
        conn = rankd.conn(timeout=10)
        while not stop.is_set():
            try:
                conn.request("POST", "/rank", body=json.dumps(
                    {"plan": "real_viewer", "user_id": 7, "deadline_ms": 300}))
                r = conn.getresponse()
                body = r.read().decode()
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    problems.append(f"no complete answer: {e!r}")
                conn.close()
                conn = rankd.conn(timeout=10)
                continue
            with lock:
                statuses[r.status] = statuses.get(r.status, 0) + 1
                if r.status not in (200, 503, 504):
                    problems.append(f"{r.status}: {body}")
                if r.status == 503 and r.getheader("Retry-After") != "1":
                    problems.append(f"503 without Retry-After: {body}")
                if r.status != 200 and ("127.0.0.1" in body or str(real.port) in body):
                    problems.append(f"internals leaked: {body}")
                if r.status == 200 and restarted_at[0] is not None and not first_ok_after:
                    first_ok_after.append(time.monotonic() - restarted_at[0])
            if r.status != 200:
                time.sleep(0.005)  # pacing, not a wait: do not spin on a dead Redis
        conn.close()

    def answered(*codes):
        with lock:
            return sum(statuses.get(c, 0) for c in codes)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: answered(200) >= 20, timeout=30, what="20 answers before the kill")
    real.proc.kill()  # SIGKILL
    real.proc.wait(timeout=5)
    failed0 = answered(503, 504)
    wait_until(lambda: answered(503, 504) >= failed0 + 20, timeout=30,
               what="20 failed answers while Redis is down")
    real.start()
    real.execute("HSET", "user:7", "country", "FR", "age", "33")
    restarted_at[0] = time.monotonic()
    wait_until(lambda: first_ok_after, timeout=10, what="a 200 after Redis came back")
    ok_back = answered(200)
    wait_until(lambda: answered(200) >= ok_back + 20, timeout=30, what="20 answers after the restart")
    stop.set()
    for t in threads:
        t.join(timeout=15)
    print(f"     answers by status: {dict(sorted(statuses.items()))}; first 200 "
          f"{first_ok_after[0] * 1000:.0f} ms after redis-server was back", flush=True)
    assert not problems, problems[:5]
    assert statuses.get(200, 0) > 0 and (statuses.get(503, 0) + statuses.get(504, 0)) > 0, statuses
    assert first_ok_after[0] < 10
    assert rankd.proc.poll() is None


if __name__ == "__main__":
    run_tests([
        ("huge array header *2147483647 -> 502", test_huge_array_header),
        ("huge bulk header -> 502", test_huge_bulk_header),
        ("garbage bytes -> 502", test_garbage),
        ("reply nested too deep -> 502", test_too_deep),
        ("reply nobody asked for -> 502", test_unsolicited_reply),
        ("wrong reply type -> 502", test_wrong_type),
        ("error reply: raw text only in the log", test_error_reply_text_stays_in_the_log),
        ("truncated reply then close -> 503", test_truncated_then_close),
        ("close mid-reply -> 503", test_close_mid_reply),
        ("no reply -> 504", test_silent_is_deadline_exceeded),
        ("optional node -> degraded", test_optional_node_is_degraded),
        ("1 GiB bulk streamed: RSS stays under the limit + 32 MiB", test_1gib_bulk_streamed_keeps_rss_bounded),
        ("bad replies counted in rankd_redis_errors_total", test_metrics_count_bad_replies),
        ("redis SIGKILLed and restarted under load", test_redis_sigkill_and_restart_under_load),
    ])
