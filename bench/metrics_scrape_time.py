#!/usr/bin/env python3
"""ops/bench metrics helper: warms every plan of PLANS_DIR with 20 requests each, then
times 50 GET /metrics. Usage: metrics_scrape_time.py PORT PLANS_DIR"""
import http.client, json, os, statistics, sys, time
port, plans = int(sys.argv[1]), sys.argv[2]
names = sorted(f[:-len(".plan.json")] for f in os.listdir(plans) if f.endswith(".plan.json"))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
for name in names:
    for uid in range(1, 21):
        c.request("POST", "/rank", json.dumps({"plan": name, "user_id": uid}))
        c.getresponse().read()
times = []
for _ in range(50):
    t0 = time.perf_counter()
    c.request("GET", "/metrics")
    text = c.getresponse().read()
    times.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"scrape_ms": statistics.median(times), "p90_ms": sorted(times)[44],
                  "bytes": len(text), "series": sum(1 for l in text.splitlines() if l and not l.startswith(b"#")),
                  "plans": len(names)}))
