"""The `model` task with ONNX models end to end: MLPs built and exported here with
python3-torch (imported once for the whole file: it takes seconds), loaded by a real
rankd from its plans folder and scored over HTTP. Scores are compared with torch's own
forward on the same rows; fill and null rows, explain, load errors naming the input or
the files, a reload under traffic, and the served log replayed bit for bit by
`rankd replay` are checked through the server's real interfaces."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SOURCE_ROOT, Rankd, Redis, metric_value, run_tests, simple_plan, temp_dir,  # noqa: E402
                     wait_until, write_plan)

torch.set_num_threads(1)
ROWS = 300
TABLE = 9  # embedding rows: indices 0..8


def close(a, b):
    return abs(a - b) <= max(1e-6, 1e-5 * abs(b))


def index_of(i):
    """Column `e` of the plan: a table row, out of range (9, -1), or null (271..280)."""
    if i > 290:
        return -1
    if 280 < i <= 290:
        return 9
    if 270 < i <= 280:
        return None
    return 5 if i > 200 else (2 if i > 100 else 0)


def inputs_of(ids, fill_c=None):
    """Columns a, b, c (null on every 7th row unless filled), d as float32, and e."""
    ids = np.asarray(ids, dtype=np.float64)
    c = np.where(ids % 7 == 0, np.nan if fill_c is None else fill_c, np.sqrt(ids) * 3)
    x = np.stack([ids / 100, ids * 0.037 - 4.0, c, (ids > 150).astype(np.float64)], 1)
    return x.astype(np.float32), [index_of(int(i)) for i in ids]


class Net(torch.nn.Module):
    def __init__(self, seed, hidden=8):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = torch.nn.Embedding(TABLE, 3)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(7, hidden), torch.nn.BatchNorm1d(hidden),
                                       torch.nn.ReLU(), torch.nn.Linear(hidden, 1),
                                       torch.nn.Sigmoid())
        with torch.no_grad():
            bn = self.mlp[1]
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2)
        self.eval()

    def forward(self, x, ids):
        return self.mlp(torch.cat([x, self.emb(ids)], 1))


def export(net, path):
    torch.onnx.export(net, (torch.zeros(2, 4), torch.zeros(2, dtype=torch.long)), path,
                      input_names=["x", "ids"], output_names=["score"], opset_version=13,
                      dynamic_axes={"x": {0: "n"}, "ids": {0: "n"}, "score": {0: "n"}})


def torch_scores(net, ids, fill_c=None):
    """{id: score} for the rows torch can score (finite inputs, an index in the table)."""
    x, e = inputs_of(ids, fill_c)
    ok = [i for i, row in enumerate(x) if np.isfinite(row).all() and e[i] is not None
          and 0 <= e[i] < TABLE]
    with torch.inference_mode():
        out = net(torch.from_numpy(x[ok]), torch.tensor([e[i] for i in ok])).numpy().ravel()
    return {ids[i]: float(s) for i, s in zip(ok, out)}


def plan(name, model, features=None, fill=None, log=False, before=None):
    nodes = [{"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": ROWS}}]
    last = "src"
    if before:
        nodes.append(dict(before, inputs=[last]))
        last = before["node_id"]
    for col in "abcde":
        nodes.append({"node_id": "v" + col, "op": "vm", "inputs": [last],
                      "params": {"out_key": col, "expr": "e" + col}})
        last = "v" + col
    params = {"model": model, "out_key": "s",
              "features": features or {"x": ["a", "b", "c", "d"], "ids": ["e"]}}
    if fill:
        params["fill"] = fill
    nodes.append({"node_id": "m", "op": "model", "inputs": [last], "params": params})
    # The served log finds a model's rows in a kept node that is not the output.
    nodes.append({"node_id": "t", "op": "take", "inputs": ["m"], "params": {"count": ROWS}})
    key = {"key": "id"}
    gt = lambda v: {"op": "cmp", "cmp": ">", "lhs": key, "rhs": {"const": v}}  # noqa: E731
    seventh = {"op": "in", "lhs": key, "values": list(range(7, ROWS + 1, 7))}
    expr_table = {
        "ea": {"op": "/", "args": [key, {"const": 100.0}]},
        "eb": {"op": "-", "args": [{"op": "*", "args": [key, {"const": 0.037}]}, {"const": 4.0}]},
        "ec": {"op": "if", "args": [seventh, {"const": None},
                                    {"op": "*", "args": [{"op": "sqrt", "args": [key]},
                                                         {"const": 3.0}]}]},
        "ed": {"op": "if", "args": [gt(150), {"const": True}, {"const": False}]},
        "ee": {"op": "if", "args": [gt(290), {"const": -1}, {"op": "if", "args": [
            gt(280), {"const": 9}, {"op": "if", "args": [gt(270), {"const": None}, {"op": "if", "args": [
                gt(200), {"const": 5}, {"op": "if", "args": [gt(100), {"const": 2}, {"const": 0}]}]}]}]}]},
    }
    p = simple_plan(name, nodes, "t", expr_table=expr_table)
    if log:
        p["log"] = {"sample": 1.0, "sink": "main"}
    return p


def folder(models, plans):
    d = temp_dir("rankd-onnx-plans-")
    for name, net in models.items():
        export(net, os.path.join(d, f"{name}.onnx"))
    for name, p in plans.items():
        write_plan(d, name, p)
    return d


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rank(s, name, **extra):
    status, _, body = s.rank(dict({"plan": name, "user_id": 1}, **extra))
    return status, body


def check_scores(body, want):
    got = {it["id"]: it["s"] for it in body["items"]}
    nulls = {i for i, v in got.items() if v is None}
    assert nulls == set(got) - set(want), f"null rows {sorted(nulls)[:5]}... vs unscorable"
    bad = [(i, got[i], w) for i, w in want.items() if not close(got[i], w)]
    assert not bad, f"{len(bad)} rows differ from torch, first: {bad[:3]}"


NET = Net(1)
IDS = list(range(1, ROWS + 1))


def test_scores_equal_torch_with_and_without_fill_and_null_rows_are_counted():
    d = folder({"nn": NET}, {"p": plan("p", "nn"), "f": plan("f", "nn", fill={"c": -1.5})})
    s = Rankd(d)
    status, body = rank(s, "p", explain=True)
    assert status == 200, body
    check_scores(body, torch_scores(NET, IDS))
    node = [n for n in body["nodes"] if n["node_id"] == "m"][0]
    # Null c (every 7th row), null, negative and out-of-range indices (271..300).
    unscorable = ROWS - len(torch_scores(NET, IDS))
    assert node["null_rows"] == unscorable, node
    assert node["model"] == "nn" and node["model_sha256"] == sha256(os.path.join(d, "nn.onnx"))
    assert node["model_dispatch"] in ("baseline", "avx2"), node
    status, body = rank(s, "f")
    assert status == 200, body
    check_scores(body, torch_scores(NET, IDS, fill_c=-1.5))
    text = s.metrics()
    filled_unscorable = ROWS - len(torch_scores(NET, IDS, fill_c=-1.5))
    assert metric_value(text, "rankd_model_null_rows_total", model="nn", shard="0") == \
        unscorable + filled_unscorable
    status, _, raw = s.request("GET", "/plans/p")
    assert json.loads(raw)["models"] == [{"name": "nn", "sha256": sha256(os.path.join(d, "nn.onnx"))}]


def check_plans(d, *extra):
    p = subprocess.run([RANKD, "check-plans", "--plans", d, "--enable-test-ops", *extra],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def test_load_errors_name_the_input_the_node_and_the_files():
    cases = [
        (plan("p", "nn", features={"x": ["a", "b", "c"], "ids": ["e"]}),
         ["p.plan.json: node 'm': params.features.x", "model 'nn' input 'x' is [N, 4]",
          "give 3 values (a, b, c)"]),
        (plan("p", "nn", features={"x": ["a", "b", "c", "d"]}),
         ["node 'm': params.features", "input 'ids' has no columns"]),
        (plan("p", "nn", features={"x": ["a", "b", "c", "d"], "ids": ["b"]}),
         ["params.features.ids", "reads column 'b', which is f64", "one i64 column"]),
        (plan("p", "nn", features={"x": ["a", "b", "c", "d"], "ids": ["e"], "zz": ["a"]}),
         ["params.features.zz", "model 'nn' has no input 'zz' (it has x, ids)"]),
        (plan("p", "nn", fill={"nope": 1}), ["params.fill.nope", "reads no column 'nope'"]),
        (dict(plan("p", "nn"), nodes=[dict(n, params=dict(n["params"], output="margin"))
                                      if n["node_id"] == "m" else n for n in plan("p", "nn")["nodes"]]),
         ["params.output", "ONNX model", "margin"]),
    ]
    for p, wants in cases:
        d = folder({"nn": NET}, {"p": p})
        rc, out = check_plans(d)
        assert rc == 1, out
        for w in wants:
            assert w in out, (w, out)
    # Both files of one name; a file with an operator rankd does not run.
    d = folder({"nn": NET}, {"p": plan("p", "nn")})
    rc, out = check_plans(d)
    assert rc == 0, out
    with open(os.path.join(d, "nn.model.json"), "w") as f:
        f.write("{}")
    rc, out = check_plans(d)
    assert rc == 1 and "nn.model.json and " in out and "nn.onnx" in out and "two models" in out, out
    os.remove(os.path.join(d, "nn.model.json"))
    soft = torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Softmax(dim=1))
    torch.onnx.export(soft.eval(), (torch.zeros(2, 4),), os.path.join(d, "soft.onnx"),
                      opset_version=13)
    rc, out = check_plans(d)
    assert rc == 1 and "soft.onnx: node '" in out and "(Softmax): operator not supported" in out, out


def test_a_changed_onnx_file_is_reloaded_under_traffic():
    new = Net(2, hidden=6)
    slow = {"node_id": "wait", "op": "sleep", "params": {"duration_ms": 400}}
    d = folder({"nn": NET}, {"p": plan("p", "nn"), "slow": plan("slow", "nn", before=slow)})
    s = Rankd(d, extra_args=["--deadline-ms", "10000", "--watch-plans-ms", "50"])
    old_sha = sha256(os.path.join(d, "nn.onnx"))
    results = []
    threads = [threading.Thread(target=lambda: results.append(rank(s, "slow", explain=True)))
               for _ in range(3)]
    for t in threads:
        t.start()
    wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 3,
               what="three requests in flight")
    export(new, os.path.join(d, ".nn.tmp"))
    os.replace(os.path.join(d, ".nn.tmp"), os.path.join(d, "nn.onnx"))
    new_sha = sha256(os.path.join(d, "nn.onnx"))

    def serves_new():
        status, _, body = s.request("GET", "/plans/p")
        return status == 200 and json.loads(body)["models"][0]["sha256"] == new_sha
    wait_until(serves_new, what="the changed model loaded")
    status, body = rank(s, "p")
    assert status == 200
    check_scores(body, torch_scores(new, IDS))
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 3
    for status, body in results:
        assert status == 200, body
        check_scores(body, torch_scores(NET, IDS))
        assert [n for n in body["nodes"] if n["node_id"] == "m"][0]["model_sha256"] == old_sha


def test_served_log_replays_bit_for_bit():
    d = folder({"nn": NET}, {"p": plan("p", "nn", fill={"c": 0.25}, log=True)})
    log = os.path.join(temp_dir("rankd-onnx-log-"), "served.jsonl")
    s = Rankd(d, extra_args=["--served-log", f"main=file://{log}?max_mb=64&keep=2"])
    for _ in range(3):
        assert rank(s, "p")[0] == 200
    wait_until(lambda: (metric_value(s.metrics(), "rankd_served_log_records_total",
                                     sink="main", outcome="written") or 0) == 3,
               what="3 records written")
    with open(log) as f:
        rec = json.loads(f.readline())
    item = [it for it in rec["items"] if it["id"] == 14][0]  # c null, filled
    m = item["models"]["m"]
    assert m["model"] == "nn" and m["dispatch"] in ("baseline", "avx2"), m
    assert m["inputs"]["x[2]"] == 0.25 and m["inputs"]["ids"] == 0, m["inputs"]
    assert list(m["inputs"]) == ["x[0]", "x[1]", "x[2]", "x[3]", "ids"]
    out = subprocess.run([RANKD, "replay", "--log", log, "--plans", d, "--enable-test-ops"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout.splitlines()[0])
    assert stats["model"] == "nn" and stats["checked"] >= 3 * (ROWS - 30) and stats["differ"] == 0
    assert stats["max_abs_diff"] == 0 and stats["dispatch_mismatch"] == 0, stats


def test_train_from_log_kind_mlp_closes_the_loop():
    """Serve with logging, click the items a hidden rule likes, train an MLP on the served
    log (ops/train-from-log --kind mlp), serve it under a new plan after the watcher's
    reload, and replay its log bit for bit; a second training writes the same bytes."""
    d = folder({"nn": NET}, {"p": plan("p", "nn", fill={"c": 0.25}, log=True)})
    log = os.path.join(temp_dir("rankd-onnx-train-"), "served.jsonl")
    s = Rankd(d, extra_args=["--served-log", f"main=file://{log}?max_mb=64&keep=2", "--watch-plans-ms", "50"])
    for _ in range(4):
        assert rank(s, "p")[0] == 200
    wait_until(lambda: (metric_value(s.metrics(), "rankd_served_log_records_total",
                                     sink="main", outcome="written") or 0) == 4,
               what="4 records written")
    clicks = os.path.join(os.path.dirname(log), "clicks.jsonl")
    with open(clicks, "w") as f:
        for line in open(log):
            rec = json.loads(line)
            for it in rec["items"]:
                m = it["models"].get("m")  # none for a row the model left null
                if it["served"] and m and m["inputs"]["x[1]"] > 2.0:  # id > 162
                    f.write(json.dumps({"served_id": rec["served_id"], "id": it["id"]}) + "\n")
    train = os.path.join(SOURCE_ROOT, "ops", "train-from-log")

    def run(out_dir):
        p = subprocess.run(["/usr/bin/python3", train, "--log", log, "--clicks", clicks,
                            "--model-node", "m", "--name", "nn2", "--plans", out_dir,
                            "--kind", "mlp", "--epochs", "60"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.splitlines()[-1])
    other = temp_dir("rankd-onnx-train-again-")
    summary = run(other)
    assert summary["features"] == ["x[0]", "x[1]", "x[2]", "x[3]", "ids"], summary
    assert summary["model"].endswith("nn2.onnx") and 0 < summary["positives"] < summary["rows"]
    first = open(os.path.join(other, "nn2.onnx"), "rb").read()
    # The new plan binds the five features to the columns they were logged from, and
    # fills a missing one as training did; the model arrives by itself (the watcher).
    fill = dict(zip("abcde", summary["fill"]))
    q = plan("q", "nn2", features={"x": ["a", "b", "c", "d", "e"]}, fill=fill, log=True)
    write_plan(d, "q", q)
    summary = run(d)
    assert open(os.path.join(d, "nn2.onnx"), "rb").read() == first, "training is deterministic"
    wait_until(lambda: s.request("GET", "/plans/q")[0] == 200, what="plan q and nn2 loaded")
    os.rename(log, log + ".before")
    status, body = rank(s, "q")
    assert status == 200, body
    scores = {it["id"]: it["s"] for it in body["items"]}
    assert all(v is not None for v in scores.values()) and len(scores) == ROWS
    assert np.mean([scores[i] for i in range(170, 270)]) > np.mean([scores[i] for i in range(1, 150)])
    wait_until(lambda: os.path.exists(log) and os.path.getsize(log) > 0, what="the new record")
    out = subprocess.run([RANKD, "replay", "--log", log, "--plans", d, "--enable-test-ops"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    stats = {json.loads(x)["model"]: json.loads(x) for x in out.stdout.splitlines()}
    assert stats["nn2"]["checked"] == ROWS and stats["nn2"]["differ"] == 0, stats


def test_a_vec_column_feeds_its_values_in_order():
    """A vec:3 field read from Redis (float32 bytes) and a number fill one input x [N, 4];
    a missing vector (a row without the field) is filled element by element."""
    redis = Redis()
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(40, 3)).astype("<f4")
    redis.execute_many([["HSET", f"ve:{i}", "emb", emb[i - 1].tobytes()]
                        for i in range(1, 41) if i % 9])
    d = temp_dir("rankd-onnx-vec-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump({"schema_version": 1, "families": {
            "item_emb": {"type": "hash", "key": "ve:{id}", "fields": {"emb": "vec:3"}}}}, f)
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).eval()
    torch.onnx.export(net, (torch.zeros(2, 4),), os.path.join(d, "vnn.onnx"), input_names=["x"],
                      opset_version=13, dynamic_axes={"x": {0: "n"}})
    nodes = [{"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 40}},
             {"node_id": "fe", "op": "features", "inputs": ["src"],
              "params": {"family": "item_emb", "fields": ["emb"]}},
             {"node_id": "va", "op": "vm", "inputs": ["fe"], "params": {"out_key": "a", "expr": "ea"}},
             {"node_id": "m", "op": "model", "inputs": ["va"],
              "params": {"model": "vnn", "out_key": "s", "features": {"x": ["a", "emb"]},
                         "fill": {"emb": 0.5}}}]
    write_plan(d, "v", simple_plan("v", nodes, "m", expr_table={
        "ea": {"op": "/", "args": [{"key": "id"}, {"const": 10.0}]}}))
    s = Rankd(d, redis=redis)
    status, body = rank(s, "v")
    assert status == 200, body
    ids = np.arange(1, 41)
    vec = np.where((ids % 9 == 0)[:, None], np.float32(0.5), emb)
    x = np.concatenate([(ids / 10).astype(np.float32)[:, None], vec], 1).astype(np.float32)
    with torch.inference_mode():
        want = net(torch.from_numpy(x)).numpy().ravel()
    check_scores(body, {int(i): float(w) for i, w in zip(ids, want)})
    # Its width must match: 1 + 3 values for an input of 4; a vec:3 alone gives 3.
    nodes[-1]["params"]["features"] = {"x": ["emb"]}
    write_plan(d, "v", simple_plan("v", nodes, "m", expr_table={
        "ea": {"op": "/", "args": [{"key": "id"}, {"const": 10.0}]}}))
    rc, out = check_plans(d)
    assert rc == 1 and "model 'vnn' input 'x' is [N, 4] but its columns give 3 values (emb: 3)" in out, out


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
