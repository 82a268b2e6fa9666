"""Security against the network rankd lives on: what a client's body
can make rankd echo, and bodies whose duplicate keys would read one way here and
another elsewhere."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import Rankd, Redis, demo_data, plans_dir, run_tests  # noqa: E402

_server = {}
# sort's "order" (one of desc, asc) from a request param.
ORDERED = {"schema_version": 1, "name": "ordered", "description": "order from the request",
           "params": {"ord": {"type": "str", "default": "desc"}}, "expr_table": {}, "pred_table": {},
           "nodes": [{"node_id": "a", "op": "fixed_source", "inputs": [], "params": {"count": 5}},
                     {"node_id": "s", "op": "sort", "inputs": ["a"],
                      "params": {"key": "score", "order": {"param": "ord"}}}],
           "output": {"node": "s", "columns": ["id", "score"]}}


def server():
    if "rankd" not in _server:
        redis = Redis()
        demo_data(redis, 20)
        _server["redis"] = redis
        _server["rankd"] = Rankd(plans_dir({"ordered": ORDERED}), redis=redis).wait_ready()
    return _server["rankd"]


def post(body):
    status, _, data = server().request("POST", "/rank", body)
    return status, data


def test_duplicate_keys_at_any_depth_are_refused():
    for body, key in [('{"plan":"feed","plan":"rerank","user_id":1}', "plan"),
                      ('{"plan":"feed","user_id":1,"params":{"limit":5,"limit":50}}', "limit"),
                      ('{"plan":"feed","user_id":1,"x":[{"a":1},{"b":1,"b":2}]}', "b"),
                      ('{"plan":"feed","user_id":1,"x":{' +
                       ",".join(f'"k{i}":{i}' for i in range(40)) + ',"k7":0}}', "k7")]:
        status, data = post(body)
        assert status == 400, (body, data)
        err = json.loads(data)["error"]
        assert err["code"] == "bad_request" and f"duplicate key '{key}'" in err["message"], err
    status, data = post('{"plan":"feed","user_id":1,"x":{"a":1},"y":{"a":1}}')
    assert status == 200, data  # the same key in two objects is fine
    # A wide object is checked in linear time: 50,000 distinct keys answer at once.
    wide = '{"plan":"feed","user_id":1,"x":{' + ",".join(f'"k{i}":0' for i in range(50000)) + "}}"
    status, data = post(wide)
    assert status == 200, data[:200]


def test_error_bodies_quote_at_most_256_bytes_of_the_client():
    big = "p" * 500000
    for body in [{"plan": big, "user_id": 1},
                 {"plan": "feed", "user_id": 1, "params": {big: 1}},
                 {"plan": "feed", "user_id": 1, "params": {"weight": big}},
                 {"plan": "feed", "user_id": 1, "params": {"limit": [big]}},
                 {"plan": "feed", "user_id": 1, "deadline_ms": big},
                 {"plan": "ordered", "user_id": 1, "params": {"ord": big}}]:
        status, data = post(body)
        assert status in (400, 404, 422), (status, data[:200])
        assert len(data) < 1024, (status, len(data), data[:300])
        assert b"bytes)" in data or b"..." in data, data
    status, _, data = server().request("GET", "/plans/" + "q" * 8000)
    assert status == 404 and len(data) < 1024, (status, len(data))


if __name__ == "__main__":
    run_tests([
        ("duplicate keys at any depth are refused", test_duplicate_keys_at_any_depth_are_refused),
        ("error bodies quote at most 256 bytes of the client",
         test_error_bodies_quote_at_most_256_bytes_of_the_client),
    ])
