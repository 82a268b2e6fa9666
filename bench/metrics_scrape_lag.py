#!/usr/bin/env python3
"""ops/bench metrics helper: scrapes /metrics 10x/s for SECONDS and prints the worst
rankd_loop_lag_seconds sample. Usage: metrics_scrape_lag.py PORT SECONDS"""
import http.client, json, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
worst, scrapes, end = 0.0, 0, time.monotonic() + secs - 0.5
time.sleep(0.3)
while time.monotonic() < end:
    t0 = time.monotonic()
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("rankd_loop_lag_seconds{"):
            worst = max(worst, float(line.rsplit(" ", 1)[1]))
    scrapes += 1
    time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))
print(json.dumps({"worst_ms": worst * 1000, "scrapes": scrapes}))
