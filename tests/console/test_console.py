"""The web console (docs/console.md) in a real browser: Debian's headless Chromium, driven
through the DevTools protocol (cdp.py), against a real rankd serving it on its metrics
listener (--metrics-port P --console) and a real redis-server with the demo data.

Each view opens at its address; feed's DAG has the nodes and edges of GET /plans/feed; a
run draws one waterfall bar per node with the critical path marked; the compare view
shows the overlap@10 and tau-a this test computes from /rank itself; form errors appear
beside their fields and nothing is sent; Redis text is shown as text (no <img>, no
alert); with --auth-token-file the page shows the refusal until the token is typed in.
Screenshots go to <build>/meson-logs/console/.
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (BUILD_ROOT, SOURCE_ROOT, Redis, Rankd, demo_data, free_port,  # noqa: E402
                     plans_dir, run_tests, simple_plan, temp_path)
from cdp import CHROMIUM, Browser  # noqa: E402

SHOTS = os.path.join(BUILD_ROOT, "meson-logs", "console")
XSS = "<img src=x onerror=alert(1)>"
TOKEN = "console-test-token"

# A plan whose output holds a string column from Redis (the demo items' `category`).
ITEMS_PLAN = simple_plan("console_items", [
    {"node_id": "v", "op": "viewer", "inputs": [], "params": {}},
    {"node_id": "f", "op": "follow", "inputs": ["v"], "params": {"fanout": 20}},
    {"node_id": "m", "op": "media", "inputs": ["f"], "params": {"per_author": 2}},
    {"node_id": "h", "op": "features", "inputs": ["m"], "params": {"fields": ["category", "likes"]}},
    {"node_id": "t", "op": "take", "inputs": ["h"], "params": {"count": 10}},
], "t", columns=["id", "author", "category", "likes"])
# An optional node that fails: the run goes on degraded.
DEGRADED_PLAN = simple_plan("console_degraded", [
    {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 5}},
    {"node_id": "flaky", "op": "sleep", "inputs": ["src"], "params": {"duration_ms": 1, "fail_after_sleep": True},
     "optional": True},
    {"node_id": "c", "op": "concat", "inputs": ["src", "flaky"], "params": {}},
], "c")
# A required node over its own timeout: the run fails with deadline_exceeded (504) long
# before the request's deadline, whatever the machine's timing.
TIMEOUT_PLAN = simple_plan("console_timeout", [
    {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 2}},
    {"node_id": "slow", "op": "sleep", "inputs": ["src"], "params": {"duration_ms": 1000}, "timeout_ms": 20},
], "slow")


class Env:
    """One redis-server, one rankd with the console, one browser, shared by the tests."""
    redis = rankd = browser = None
    mport = 0
    user = 0


env = Env()


def unhurried(name):
    """The shipped plan `name` with its node timeouts raised to 4 s: the page's run and the
    test's own /rank of the same request must answer alike, and a 30 ms optional node can
    time out in one and not the other on a busy machine (rankd runs with --deadline-ms
    5000)."""
    with open(os.path.join(SOURCE_ROOT, "plans", f"{name}.plan.json")) as f:
        plan = json.load(f)
    for node in plan["nodes"]:
        if "timeout_ms" in node:
            node["timeout_ms"] = 4000
    return plan


def console_rankd(extra=()):
    """A rankd with --console on a metrics port of its own; returns (rankd, that port)."""
    d = plans_dir({"console_items": ITEMS_PLAN, "console_degraded": DEGRADED_PLAN,
                   "console_timeout": TIMEOUT_PLAN, "feed": unhurried("feed"),
                   "home_light": unhurried("home_light")})
    for name in ("experiments.json", "schema.json"):
        shutil.copy(os.path.join(SOURCE_ROOT, "plans", name), d)
    mport = free_port()
    rankd = Rankd(d, redis=env.redis, extra_args=["--metrics-host", "127.0.0.1", "--metrics-port", str(mport),
                                                  "--console", "--deadline-ms", "5000", *extra])
    return rankd.wait_ready(), mport


def control_user(salt):
    """The first demo user in the control half of feed_weight (docs/experiments.md
    "Bucketing"): then `feed` runs as feed itself for this user."""
    for uid in range(1, 200):
        bucket = int.from_bytes(hashlib.sha256(f"{salt}:{uid}".encode()).digest()[:8], "big") % 10000
        if bucket >= 5000:
            return uid
    raise AssertionError("no control user")


def setup():
    # A missing browser fails the test rather than skipping it: ops/test installs one, and
    # a skip would pass CI without the console ever being opened.
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is not installed (ops/lib/ensure-deps installs chromium)"
    os.makedirs(SHOTS, exist_ok=True)
    env.redis = Redis()
    demo_data(env.redis, 200)
    env.rankd, env.mport = console_rankd(["--allow-forced-variants", "--cache-mb", "16"])
    with open(os.path.join(SOURCE_ROOT, "plans", "experiments.json")) as f:
        exp = json.load(f)["experiments"][0]
    assert exp["name"] == "feed_weight" and sum(v["weight"] for v in exp["variants"]) == 5000
    env.user = control_user(exp["salt"])
    env.browser = Browser()


def api(method, path, body=None, port=None, headers=None):
    """A call to the API on the console's listener, the metrics port (or `port`)."""
    c = http.client.HTTPConnection("127.0.0.1", port or env.mport, timeout=10)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def rank(body):
    status, _, data = api("POST", "/rank", body)
    assert status == 200, (status, data)
    return json.loads(data)


def url(hash_, port=None):
    return f"http://127.0.0.1:{port or env.mport}/console/{hash_}"


def open_view(hash_, port=None):
    """Opens an address after emptying the view, so that no wait below can be met by what
    the previous view showed."""
    env.browser.evaluate("document.querySelector('main')?.replaceChildren()")
    env.browser.goto(url(hash_, port))


def shot(name):
    env.browser.screenshot(os.path.join(SHOTS, name))


def js(expr):
    return env.browser.evaluate(expr)


def resource_count(path):
    """How many requests the page has sent to `path` (the Resource Timing entries)."""
    return js(f"performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname === {json.dumps(path)}).length")


# --- the tests ---------------------------------------------------------------------


def test_static_files_and_headers():
    status, headers, body = api("GET", "/console/")
    assert status == 200 and headers["content-type"].startswith("text/html"), (status, headers)
    assert headers["content-security-policy"] == \
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    assert b'src="app.js"' in body and b"<script>" not in body and b"<style" not in body
    for name in ("app.js", "app.css"):
        status, _, _ = api("GET", f"/console/{name}")
        assert status == 200, name
    status, _, _ = env.rankd.request("GET", "/console/")
    assert status == 404, "the main port never serves the console"


def test_plans_view():
    b = env.browser
    open_view("#/plans/feed")
    b.wait_for("document.querySelectorAll('.dag-node').length > 0", what="feed's DAG")
    plan = json.loads(api("GET", "/plans/feed")[2])
    nodes = js("[...document.querySelectorAll('.dag-node')].map(e => e.dataset.nodeId)")
    assert nodes == [n["node_id"] for n in plan["nodes"]], nodes
    edges = js("[...document.querySelectorAll('.dag-edge')].map(e => [e.dataset.from, e.dataset.to])")
    assert sorted(map(tuple, edges)) == sorted((i, n["node_id"]) for n in plan["nodes"] for i in n["inputs"]), edges
    ops = js("[...document.querySelectorAll('.dag-node .node-op')].map(e => e.textContent)")
    assert ops == [n["op"] for n in plan["nodes"]], ops
    listed = js("[...document.querySelectorAll('.plan-list li')].map(e => e.dataset.plan)")
    assert listed == [p["name"] for p in json.loads(api("GET", "/plans")[2])["plans"]], listed
    families = js("[...document.querySelectorAll('tr[data-family]')].map(e => e.dataset.family)")
    assert sorted(families) == ["follow", "item", "media", "recs", "user"], families
    assert js("document.querySelector('li[data-experiment=feed_weight]').textContent").endswith("control, variant more_likes")
    shot("plans-feed.png")


def critical_path(bars, plan):
    """The test's own critical path: from the node that ended last back through the input
    that ended last each time."""
    inputs = {n["node_id"]: n["inputs"] for n in plan["nodes"]}
    end = {b["id"]: b["start"] + b["took"] for b in bars if b["status"] != "skipped"}
    cur = max(reversed(end), key=lambda k: end[k])  # a tie: the later node in plan order
    path = [cur]
    while True:
        ins = [i for i in inputs[cur] if i in end]
        if not ins:
            return list(reversed(path))
        cur = max(ins, key=lambda k: end[k])
        path.append(cur)


def wait_run():
    env.browser.wait_for("!!document.querySelector('.run-result, .run-out .api-error')", what="the run's answer")


def test_run_view():
    b = env.browser
    open_view(f"#/run/feed?user_id={env.user}")
    wait_run()
    plan = json.loads(api("GET", "/plans/feed")[2])
    bars = js("[...document.querySelectorAll('.wf-bar')].map(e => ({id: e.dataset.nodeId, status: e.dataset.status, "
              "start: +e.dataset.startUs, took: +e.dataset.tookUs, critical: e.classList.contains('critical')}))")
    assert [x["id"] for x in bars] == [n["node_id"] for n in plan["nodes"]], bars
    marked = [x["id"] for x in bars if x["critical"]]
    expected = critical_path(bars, plan)
    assert sorted(marked) == sorted(expected), (marked, expected)
    assert expected[-1] == "t" and expected[0] == "v", expected
    # The nodes that read through the shard's cache (media, features) say what it served.
    for node in ("m", "h"):
        took = b.text(f".wf-bar[data-node-id={node}] .wf-took")
        m = re.search(r"cache (\d+) hit / (\d+) miss", took)
        assert m and int(m.group(1)) + int(m.group(2)) > 0, took
    assert "cache" not in b.text(".wf-bar[data-node-id=f] .wf-took")
    header = js("[...document.querySelectorAll('table.items th')].map(e => e.textContent)")
    assert header == ["#", "id", "score", "author"], header
    rows = js("document.querySelectorAll('table.items tbody tr').length")
    assert f"· {rows} items ·" in b.text(".run-summary") and rows > 0
    shot("run-feed.png")
    # A failing optional node: its bar says failed, the run says degraded.
    open_view("#/run/console_degraded?user_id=1")
    wait_run()
    flaky = js("[...document.querySelector('.wf-bar[data-node-id=flaky]').classList]")
    assert "status-failed" in flaky and "degraded" in flaky, flaky
    assert "degraded: flaky" in b.text(".run-summary")
    # A plan that fails shows the error body.
    open_view("#/run/console_timeout?user_id=1")
    wait_run()
    assert js("!!document.querySelector('.run-out .api-error')"), b.text(".run-out")
    assert js("document.querySelector('.run-out .api-error').dataset.code") == "deadline_exceeded"
    assert "HTTP 504: deadline_exceeded: " in b.text(".run-out .api-error")


def overlap_at_k(a, b, k):
    d = min(k, len(a), len(b))
    return None if d == 0 else len(set(a[:k]) & set(b[:k])) / d


def tau_a(a, b):
    pos = {x: i for i, x in enumerate(b)}
    common = [pos[x] for x in a if x in pos]
    n = len(common)
    if n < 2:
        return None
    s = sum(1 if common[i] < common[j] else -1 for i in range(n) for j in range(i + 1, n))
    return s / (n * (n - 1) / 2)


def moves(a, b):
    pos = {x: i for i, x in enumerate(a)}
    return ["new" if x not in pos else f"↑{pos[x] - j}" if pos[x] > j else f"↓{j - pos[x]}" if pos[x] < j else "="
            for j, x in enumerate(b)]


def test_compare_view():
    b = env.browser
    # What the page will show, computed from /rank itself (same user, same plans).
    ra, rb = rank({"plan": "feed", "user_id": env.user}), rank({"plan": "home_light", "user_id": env.user})
    open_view(f"#/compare/feed/home_light?user_id={env.user}")
    b.wait_for("!!document.querySelector('.arms')", what="the two rankings")
    shown = js("[...document.querySelectorAll('.arm')].map(a => [...a.querySelectorAll('li')].map(li => li.dataset.id))")
    ids_a, ids_b = [json.dumps(i["id"]) for i in ra["items"]], [json.dumps(i["id"]) for i in rb["items"]]
    assert not ra["degraded"] and not rb["degraded"], (ra["degraded"], rb["degraded"])
    assert shown == [ids_a, ids_b], "the page shows the rankings /rank answers"
    overlap, tau = overlap_at_k(ids_a, ids_b, 10), tau_a(ids_a, ids_b)
    assert ra["plan"] == "feed" and overlap is not None and tau is not None
    assert abs(float(js("document.querySelector('.overlap').dataset.value")) - overlap) < 1e-12
    assert b.text(".overlap") == f"{overlap:.3f}" and b.text(".tau") == f"{tau:.3f}"
    shown_moves = js("[...document.querySelectorAll('.arm')[1].querySelectorAll('li')].map(li => li.querySelector('.move').textContent)")
    assert shown_moves == moves(ids_a, ids_b), shown_moves
    gone = js("[...document.querySelectorAll('.arm')[0].querySelectorAll('.move.gone')].map(m => m.parentElement.dataset.id)")
    assert gone == [i for i in ids_a if i not in set(ids_b)], gone
    shot("compare-feed-home_light.png")
    # An experiment's variants, each forced (rankd runs with --allow-forced-variants).
    open_view(f"#/compare/experiment/feed_weight?user_id={env.user}")
    b.wait_for("document.querySelectorAll('.arm').length === 3 && document.querySelectorAll('.arm h3').length === 3",
               what="three arms")
    assert js("[...document.querySelectorAll('.arm')].map(a => a.dataset.plan)") == ["feed", "feed", "home_light"]
    assert js("document.querySelectorAll('.warn').length") == 0, b.text(".warn")
    assert js("document.querySelectorAll('.overlap').length") == 2
    shot("compare-experiment.png")


def error_of(field):
    return env.browser.text(f".field-error[data-field={field}]")


def test_form_errors():
    b = env.browser
    open_view("#/run/feed")
    b.wait_for("!!document.querySelector('form.rank-form')", what="the run form")
    sent = resource_count("/rank")
    cases = [
        ("abc", "[1]", "user_id must be an integer", "params must be a JSON object"),
        ("", "{\"limit\": 0}", "user_id is required", "param 'limit': must be ≥ 1"),
        ("7", "{\"nope\": 1}", None, "plan feed has no param 'nope'"),
        ("7", "{oops", None, "params is not JSON"),
        ("-3", "{\"weight\": \"x\"}", "user_id must be an integer", "param 'weight': must be a number"),
    ]
    for user, params, user_error, params_error in cases:
        b.type("#f-user_id", user)
        b.type("#f-params", params)
        b.click("form.rank-form button")
        b.wait_for(f"document.querySelector('.field-error[data-field=params]')?.textContent.startsWith({json.dumps(params_error)})",
                   what=f"the params error for {params!r}")
        if user_error is None:
            assert error_of("user_id") == "", (user, error_of("user_id"))
        else:
            assert error_of("user_id").startswith(user_error), (user, error_of("user_id"))
    shot("form-errors.png")
    assert resource_count("/rank") == sent, "a refused form sends nothing"
    open_view("#/run/nope?user_id=1")
    b.wait_for("document.querySelector('.field-error[data-field=plan]')?.textContent === \"unknown plan 'nope'\"",
               what="the unknown plan error")
    open_view("#/compare/feed/nope?user_id=x")
    b.wait_for("document.querySelector('.field-error[data-field=plan_b]')?.textContent === \"unknown plan 'nope'\"",
               what="plan B's error")
    assert error_of("user_id").startswith("user_id must be an integer")
    assert resource_count("/rank") == sent


def test_redis_text_is_inert():
    first = rank({"plan": "console_items", "user_id": env.user})["items"][0]["id"]
    assert env.redis.execute("HSET", f"item:{first}", "category", XSS) == 0  # the field existed
    b = env.browser
    open_view(f"#/run/console_items?user_id={env.user}")
    wait_run()
    cells = js("[...document.querySelectorAll('td[data-col=category]')].map(td => td.textContent)")
    assert cells[0] == XSS, cells
    assert js("document.querySelector('td[data-col=category]').innerHTML") == "&lt;img src=x onerror=alert(1)&gt;"
    assert js("document.querySelectorAll('img').length") == 0
    time.sleep(0.2)  # an onerror handler would have run by now
    js("0")  # reads pending events: a dialog would be recorded
    assert b.dialogs == [], b.dialogs
    shot("xss-inert.png")


def test_live_view():
    b = env.browser
    open_view("#/live")
    stop = threading.Event()

    def traffic():  # bounded: at most 15 s of requests, about 20 a second, 5 events each
        end = time.monotonic() + 15
        clicks = {"events": [{"type": "click", "user_id": env.user, "item_id": i} for i in range(5)]}
        while not stop.is_set() and time.monotonic() < end:
            rank({"plan": "home_light", "user_id": env.user})
            status, _, body = api("POST", "/events", clicks)
            assert status == 200, body
            time.sleep(0.05)

    t = threading.Thread(target=traffic)
    t.start()
    try:
        b.wait_for("parseFloat(document.querySelector('tr[data-plan=home_light] .rps')?.textContent) > 0", timeout=12,
                   what="home_light's requests/s")
        assert float(b.text("tr[data-plan=home_light] .p99")) > 0
        assert b.text("tr[data-plan=home_light] .errors") == "0.0%"
        assert js("document.querySelectorAll('tr[data-plan=home_light] svg.spark').length") == 2
        # The server's events/s beside its requests/s: about 5 events a request.
        b.wait_for("parseFloat(document.querySelector('table.live-totals .eps')?.textContent) > 0", timeout=12,
                   what="events/s")
        assert float(b.text("table.live-totals .rps")) > 0
        assert js("document.querySelectorAll('table.live-totals svg.spark.eps').length") == 1
        shot("live.png")
    finally:
        stop.set()
        t.join()
    open_view("#/plans")  # leaves the view: its polling stops


def test_token():
    tokens = temp_path("rankd-tokens-")
    with open(tokens, "w") as f:
        f.write(TOKEN + "\n")
    guarded, mport = console_rankd(["--auth-token-file", tokens])
    b = env.browser
    try:
        # Another port is another origin: this page starts without a token.
        open_view("#/plans/feed", mport)
        b.wait_for("!!document.querySelector('.api-error')", what="the refusal")
        assert b.text(".api-error").startswith("token required: unauthorized: "), b.text(".api-error")
        shot("token-required.png")
        b.type("#token", TOKEN)
        b.evaluate("document.querySelector('header form.token').requestSubmit()")
        b.wait_for("document.querySelectorAll('.dag-node').length === 12", what="feed's DAG with the token")
        open_view(f"#/run/feed?user_id={env.user}", mport)
        wait_run()
        assert js("!!document.querySelector('.run-result')"), b.text(".run-out")
    finally:
        guarded.stop()


def test_no_page_errors():
    """Across every view above: no exception, no console error, no CSP violation."""
    b = env.browser
    csp = [line for line in b.log if "Content Security Policy" in (line or "")]
    assert csp == [], csp
    assert b.errors == [], b.errors


if __name__ == "__main__":
    started = time.monotonic()
    setup()
    try:
        run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
    finally:
        env.browser.close()
        print(f"console browser test: {time.monotonic() - started:.1f} s", flush=True)
