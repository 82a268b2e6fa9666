"""Metrics end to end: a live rankd after mixed traffic passes `promtool check metrics`,
its counters match the traffic sent, and a real Prometheus server scraping it on
loopback answers queries about it."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml  # Debian: python3-yaml (ops/lib/ensure-deps installs it)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (SOURCE_ROOT, Rankd, SharedServer, free_port, metric_value,  # noqa: E402
                     plans_dir, run_tests, sleep_plan, temp_dir, wait_until, _procs)

TEST_PLANS = {"slow": sleep_plan("slow", 200)}


server = SharedServer(TEST_PLANS, shards=2, seed_users=200)


def mixed_traffic(s):
    for uid in range(1, 6):
        assert s.rank({"plan": "feed", "user_id": uid})[0] == 200
    s.rank({"plan": "fixed_rank", "user_id": 1})
    s.rank({"plan": "nope", "user_id": 1})
    s.request("GET", "/nope")
    s.request("POST", "/rank", "{bad")
    s.rank({"plan": "slow", "user_id": 1, "deadline_ms": 20})


def test_promtool_check_metrics_after_mixed_traffic():
    s = server()
    mixed_traffic(s)
    text = s.metrics()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    for family in ["rankd_http_requests_total", "rankd_http_request_duration_seconds",
                   "rankd_rank_requests_total", "rankd_rank_duration_seconds",
                   "rankd_node_duration_seconds", "rankd_node_outcomes_total",
                   "rankd_redis_commands_total", "rankd_redis_batch_duration_seconds",
                   "rankd_redis_errors_total", "rankd_redis_connections", "rankd_inflight_requests",
                   "rankd_open_connections", "rankd_deadline_exceeded_total",
                   "rankd_late_completions_total", "rankd_degraded_total", "rankd_plan_reloads_total",
                   "rankd_loop_lag_seconds", "rankd_cpu_offloads_total", "rankd_build_info",
                   "rankd_http_rejects_total", "rankd_http_deferred_reads_total",
                   "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"]:
        assert f"# TYPE {family} " in text, family


def test_every_answer_a_route_can_give_is_exported_from_start():
    # A fresh server, before any traffic: the children exist at 0, per shard.
    s = Rankd(plans_dir(TEST_PLANS), shards=2)
    try:
        text = s.metrics()
        for shard in ("0", "1"):
            for route, method, code in [("/rank", "POST", "504"), ("/rank", "POST", "422"),
                                        ("/rank", "GET", "405"), ("/readyz", "GET", "503"),
                                        ("/plans/{name}", "HEAD", "404"), ("other", "POST", "404")]:
                got = metric_value(text, "rankd_http_requests_total", route=route, method=method,
                                   code=code, shard=shard)
                # The harness asked /readyz while rankd started (no Redis here: 503).
                want_zero = route != "/readyz"
                assert got is not None and (got == 0 or not want_zero), (route, method, code, shard, got)
    finally:
        s.stop()


def test_counters_match_traffic():
    s = server()
    assert s.rank({"plan": "feed", "user_id": 1})[0] == 200  # some Redis work to count
    before = s.metrics()
    base = metric_value(before, "rankd_http_requests_total", route="/rank", method="POST", code=200) or 0
    base_feed = metric_value(before, "rankd_rank_requests_total", plan="fixed_rank", outcome="ok") or 0
    base_404 = metric_value(before, "rankd_http_requests_total", route="other", code=404) or 0
    base_dl = metric_value(before, "rankd_deadline_exceeded_total", plan="slow") or 0
    for _ in range(17):
        assert s.rank({"plan": "fixed_rank", "user_id": 1})[0] == 200
    for _ in range(3):
        s.request("GET", "/missing")
    assert s.rank({"plan": "slow", "user_id": 1, "deadline_ms": 10})[0] == 504
    after = s.metrics()
    assert metric_value(after, "rankd_http_requests_total", route="/rank", method="POST", code=200) == base + 17
    assert metric_value(after, "rankd_rank_requests_total", plan="fixed_rank", outcome="ok") == base_feed + 17
    assert metric_value(after, "rankd_http_requests_total", route="other", code=404) == base_404 + 3
    assert metric_value(after, "rankd_deadline_exceeded_total", plan="slow") == base_dl + 1
    assert metric_value(after, "rankd_rank_requests_total", plan="slow", outcome="deadline_exceeded") >= 1
    # Redis work of the feed plan shows per endpoint.
    assert metric_value(after, "rankd_redis_commands_total", endpoint="redis_default") > 0
    assert metric_value(after, "rankd_redis_connections", endpoint="redis_default", state="live") > 0


def raw_exchange(port, data):
    """Sends raw bytes on a new connection and reads until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(data)
        got = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                return got
            got += chunk


def test_http_layer_rejects_are_counted_by_reason():
    s = server()
    before = s.metrics()
    base_bad = metric_value(before, "rankd_http_rejects_total", reason="malformed") or 0
    base_big = metric_value(before, "rankd_http_rejects_total", reason="head_too_large") or 0
    for _ in range(2):
        assert raw_exchange(s.port, b"GET / HTTP/1.1\r\nHost x\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    big = b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    assert raw_exchange(s.port, big).startswith(b"HTTP/1.1 431 ")
    # The shards publish the HTTP layer's counters every 100 ms.
    wait_until(lambda: metric_value(s.metrics(), "rankd_http_rejects_total", reason="malformed")
               == base_bad + 2, what="2 malformed rejects counted")
    wait_until(lambda: metric_value(s.metrics(), "rankd_http_rejects_total", reason="head_too_large")
               == base_big + 1, what="1 head_too_large reject counted")
    assert "# TYPE rankd_http_deferred_reads_total counter" in s.metrics()


def test_real_prometheus_scrapes_rankd():
    s = server()
    d = temp_dir("rankd-prom-")
    port = free_port()
    # The shipped ops/prometheus.yml (with its alert rules), pointed at this rankd and
    # made to scrape every second: what an operator runs, not a config of the test's.
    with open(os.path.join(SOURCE_ROOT, "ops", "prometheus.yml")) as f:
        cfg = yaml.safe_load(f)
    cfg["global"]["scrape_interval"] = cfg["global"]["evaluation_interval"] = "1s"
    job = next(j for j in cfg["scrape_configs"] if j["job_name"] == "rankd")
    job["scrape_interval"], job["scrape_timeout"] = "1s", "1s"
    job["static_configs"] = [{"targets": [f"127.0.0.1:{s.port}"], "labels": {"env": "test"}}]
    for rules in cfg.get("rule_files", []):
        shutil.copy(os.path.join(SOURCE_ROOT, "ops", rules), os.path.join(d, rules))
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        yaml.safe_dump(cfg, f)
    prom = subprocess.Popen(["prometheus", f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _procs.append(prom)
    try:
        def query(q):
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
            assert body["status"] == "success", body
            return body["data"]["result"]

        def has_requests():
            for _ in range(3):
                s.rank({"plan": "fixed_rank", "user_id": 2})
            res = query('sum(rankd_http_requests_total{job="rankd"})')
            return res and float(res[0]["value"][1]) > 0
        wait_until(has_requests, timeout=60, what="Prometheus to scrape rankd_http_requests_total")

        def has_p99():
            for _ in range(5):
                s.rank({"plan": "fixed_rank", "user_id": 3})
            res = query('histogram_quantile(0.99, sum by (le) (rate(rankd_rank_duration_seconds_bucket[30s])))')
            return res and res[0]["value"][1] not in ("NaN", "+Inf") and float(res[0]["value"][1]) > 0
        wait_until(has_p99, timeout=60, what="a p99 of rankd_rank_duration_seconds from Prometheus")

        # The alert rules of ops/alerts.yml are loaded and evaluated by this Prometheus.
        def rules_loaded():
            url = f"http://127.0.0.1:{port}/api/v1/rules"
            with urllib.request.urlopen(url, timeout=5) as r:
                groups = json.load(r)["data"]["groups"]
            names = {rule["name"] for g in groups for rule in g["rules"]}
            return {"RankdLoopLagHigh", "RankdRankLatencyHigh"} <= names
        wait_until(rules_loaded, timeout=30, what="the alert rules of ops/alerts.yml loaded")
    finally:
        prom.terminate()
        prom.wait(timeout=10)


if __name__ == "__main__":
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    run_tests(tests)
