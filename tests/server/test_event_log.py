"""The event log (docs/events.md, "The event log") on a real rankd and real redis-servers:
one record per event POST /events accepted, with every field, written through the
served-log sinks the schema's `event_log` names — a file sink (shared with a plan's served
log, counted apart), a Redis stream sink, a stream sink whose Redis is down (records
dropped and counted, /events still 200), a sink rankd was not started with (counted as
dropped_no_sink, not a load error) — and bad client event_ids refused, nothing logged."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (SOURCE_ROOT, Rankd, Redis, metric_value, plans_dir, run_tests,  # noqa: E402
                     simple_plan, temp_dir, wait_until)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def events_plans(sink, extra_plans=None):
    """A plans folder whose schema is the demo's, logging its events to `sink`, with two
    types of its own for the log alone: a valued one and one of string ids."""
    d = plans_dir(extra_plans)
    with open(os.path.join(SOURCE_ROOT, "plans", "schema.json")) as f:
        s = json.load(f)
    s["events"]["dwell"] = {"user": "i64", "item": "i64", "value": True}
    s["events"]["share"] = {"user": "str", "item": "str"}
    s["event_log"] = {"sink": sink}
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(s, f)
    return d


def post(rankd, events):
    status, _, data = rankd.request("POST", "/events", json.dumps({"events": events}))
    return status, json.loads(data) if data else None


def counted(rankd, outcome, sink, family="rankd_event_log_records_total"):
    return metric_value(rankd.metrics(), family, sink=sink, outcome=outcome) or 0


def file_url(path):
    return f"file://{path}?max_mb=64&keep=1"


def records_in(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# Every kind of field: the client's event_id (printable ASCII, a quote and a backslash
# included) or none, served_id or none, a value or none, ts_ms given or not, str ids.
SENT = [
    {"type": "click", "user_id": 7, "item_id": 123, "event_id": "c-1",
     "served_id": "0123456789abcdef0123456789abcdef", "ts_ms": None},
    {"type": "impression", "user_id": 7, "item_id": 124},
    {"type": "dwell", "user_id": 8, "item_id": 125, "value": 12.5, "event_id": 'q"\\ ~'},
    {"type": "share", "user_id": "u-9", "item_id": "post-3", "event_id": "x" * 64},
    {"type": "click", "user_id": 9, "item_id": 126, "event_id": None, "served_id": None},
]


def sent_events(now_ms):
    out = []
    for e in SENT:
        e = dict(e)
        if "ts_ms" in e:
            e["ts_ms"] = now_ms - 60000  # a minute ago, as a client may send it
        out.append(e)
    return out


def check_records(records, sent, before_ms, after_ms):
    """Each sent event has exactly one record, with every field as sent or defaulted."""
    assert len(records) == len(sent), (len(records), len(sent))
    random_ids = set()
    for e in sent:
        match = [r for r in records
                 if (r["type"], r["user_id"], r["item_id"]) == (e["type"], e["user_id"], e["item_id"])]
        assert len(match) == 1, (e, records)
        r = match[0]
        assert list(r) == ["event_id", "type", "user_id", "item_id", "served_id", "value", "ts_ms",
                           "received_ms"], r
        if e.get("event_id") is not None:
            assert r["event_id"] == e["event_id"], (r, e)
        else:
            assert HEX32.match(r["event_id"]), r
            random_ids.add(r["event_id"])
        assert r["served_id"] == e.get("served_id"), r
        assert r["value"] == e.get("value"), r
        assert before_ms <= r["received_ms"] <= after_ms, (r, before_ms, after_ms)
        assert r["ts_ms"] == e.get("ts_ms", r["received_ms"]), r
    assert len(random_ids) == sum(e.get("event_id") is None for e in sent), "random ids repeat"


def test_file_sink_gets_every_field():
    redis = Redis()
    d = temp_dir("rankd-events-")
    path = os.path.join(d, "log.jsonl")
    # The same sink takes a plan's served log too: each log counts its own records.
    logged = simple_plan("logged", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 3}}], "src")
    logged["log"] = {"sink": "ev", "sample": 1.0}
    rankd = Rankd(events_plans("ev", {"logged": logged}), redis=redis, shards=2,
                  extra_args=["--served-log", f"ev={file_url(path)}"]).wait_ready()
    before = int(time.time() * 1000)
    sent = sent_events(before)
    assert post(rankd, sent) == (200, {"accepted": len(sent)})
    # Bad event_ids: 400 naming the event and the field, nothing applied or logged.
    for bad in ["", "y" * 65, "tab\there", "\u00e9", 5, ["a"]]:
        status, body = post(rankd, [SENT[1], {"type": "click", "user_id": 1, "item_id": 2,
                                              "event_id": bad}])
        assert status == 400 and body["error"]["code"] == "bad_event", (bad, status, body)
        assert body["error"]["message"].startswith("events[1].event_id: "), (bad, body)
    assert rankd.rank({"plan": "logged", "user_id": 1})[0] == 200
    after = int(time.time() * 1000)
    wait_until(lambda: counted(rankd, "written", "ev") == len(sent), what="the event records")
    wait_until(lambda: counted(rankd, "written", "ev", "rankd_served_log_records_total") == 1,
               what="the served record")
    lines = records_in(path)
    events = [r for r in lines if "event_id" in r]
    assert len(lines) == len(events) + 1
    check_records(events, sent, before, after)
    assert metric_value(rankd.metrics(), "rankd_event_log_records_total",
                        outcome="dropped_error") is None
    assert rankd.stop() == 0
    redis.stop()


def test_stream_sink_and_its_redis_down():
    redis, logs = Redis(), Redis()
    rankd = Rankd(events_plans("evs"), redis=redis, extra_args=[
        "--redis", f"logs={logs.url()}",
        "--served-log", "evs=redis-stream://logs?stream=events&maxlen=1000"]).wait_ready()
    before = int(time.time() * 1000)
    sent = sent_events(before)
    assert post(rankd, sent)[0] == 200
    after = int(time.time() * 1000)
    wait_until(lambda: counted(rankd, "written", "evs") == len(sent), what="the event records")
    entries = logs.execute("XRANGE", "events", "-", "+")
    assert all(fields[0] == "record" for _, fields in entries), entries
    check_records([json.loads(fields[1]) for _, fields in entries], sent, before, after)

    # The log's Redis goes away: every event is still accepted (its counters are in the
    # data Redis), its records are dropped and counted, and rankd stays ready.
    logs.stop()
    for _ in range(10):
        assert post(rankd, sent) == (200, {"accepted": len(sent)})
    wait_until(lambda: counted(rankd, "dropped_error", "evs") + counted(rankd, "dropped_full", "evs")
               == 10 * len(sent), what="the records dropped")
    assert counted(rankd, "written", "evs") == len(sent)
    assert metric_value(rankd.metrics(), "rankd_events_total", outcome="accepted") == 11 * len(sent)
    assert rankd.request("GET", "/readyz")[0] == 200
    assert rankd.stop() == 0
    redis.stop()


def test_a_sink_rankd_lacks_is_counted():
    """As a plan's log naming a sink the server was not started with (docs/served-log.md):
    not a load error — the same plans serve several deployments — only counted."""
    redis = Redis()
    rankd = Rankd(events_plans("nowhere"), redis=redis).wait_ready()
    assert post(rankd, SENT[1:3])[0] == 200
    assert counted(rankd, "dropped_no_sink", "nowhere") == 2
    assert rankd.stop() == 0
    redis.stop()


if __name__ == "__main__":
    run_tests([
        ("file sink: every field; shared with a served log, counted apart", test_file_sink_gets_every_field),
        ("stream sink; its Redis down: dropped, counted, /events still 200", test_stream_sink_and_its_redis_down),
        ("a sink rankd lacks: dropped_no_sink", test_a_sink_rankd_lacks_is_counted),
    ])
