"""The `model` task end to end: XGBoost models trained here (Debian's python3-xgboost,
so this file runs under /usr/bin/python3), loaded by a real rankd from its plans folder,
and scored over HTTP. Scores are compared with XGBoost's own predictions on the same
rows; load errors, hot reload under traffic, metrics and cancellation are checked
through the server's real interfaces."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np
import xgboost as xgb

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, Rankd, metric_value, run_tests, simple_plan, temp_dir,  # noqa: E402
                     wait_until, write_plan)

# The spec's tolerance: 1e-6 absolute or 1e-5 relative, whichever is larger.
def close(a, b):
    return abs(a - b) <= max(1e-6, 1e-5 * abs(b))


ROWS = 300  # fixed_source rows: id = 1..ROWS, score = id


SEVENTHS = list(range(7, 100001, 7))


def features_of(ids):
    """The feature columns scoring_plan computes with vm, as XGBoost sees them: float32,
    NaN where rankd's column is null."""
    ids = np.asarray(ids, dtype=np.float64)
    a = ids                                                # i64 `id`
    b = ids * 0.37 - 40.0                                  # f64
    c = np.where(ids % 7 == 0, np.nan, np.sqrt(ids) * 3)  # f64, null on every 7th row
    d = (ids > 150).astype(np.float64)                     # bool
    return np.stack([a, b, c, d], axis=1).astype(np.float32)


def train(path, objective="binary:logistic", trees=20, depth=4, names=True, seed=1,
          base_score=0.3, booster="gbtree", noise=False):
    """noise: labels at random, so that every tree grows to its full depth (a model that
    costs what its size says)."""
    rng = np.random.default_rng(seed)
    n = 3000 if noise else 400
    x = rng.uniform(-50, 120, size=(n, 4)).astype(np.float32)
    x[rng.uniform(size=x.shape) < 0.1] = np.nan
    x[:, 3] = rng.integers(0, 2, size=n)
    y = (x[:, 1] > 0).astype(np.float32) if objective.startswith(("binary", "reg:logistic")) \
        else np.nan_to_num(x[:, 1]) * 0.1 + x[:, 3]
    if noise:
        y = rng.integers(0, 2, size=n).astype(np.float32)
    d = xgb.DMatrix(x, label=y, missing=np.nan,
                    feature_names=["a", "b", "c", "d"] if names else None)
    params = {"objective": objective, "max_depth": depth, "eta": 0.3, "nthread": 1,
              "seed": seed, "base_score": base_score, "booster": booster}
    if noise:
        params.update({"min_child_weight": 0, "gamma": 0, "lambda": 0})
    if booster == "dart":
        params.update({"rate_drop": 0.2, "skip_drop": 0.0})
    bst = xgb.train(params, d, num_boost_round=trees)
    bst.save_model(path)
    return bst


def predict(bst, ids, margin=False, names=True):
    d = xgb.DMatrix(features_of(ids), missing=np.nan,
                    feature_names=["a", "b", "c", "d"] if names else None)
    return bst.predict(d, output_margin=margin)


def scoring_plan(name, model, output="default", features=None, rows=ROWS, before=None):
    """fixed_source -> [before] -> vm columns a (i64), b (f64), c (f64 with nulls),
    d (bool) -> model into `s`."""
    nodes = [{"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": rows}}]
    last = "src"
    if before:
        nodes.append(dict(before, inputs=[last]))
        last = before["node_id"]
    for col in "abcd":
        nodes.append({"node_id": "v" + col, "op": "vm", "inputs": [last],
                      "params": {"out_key": col, "expr": "e" + col}})
        last = "v" + col
    params = {"model": model, "out_key": "s", "output": output}
    if features is not None:
        params["features"] = features
    nodes.append({"node_id": "m", "op": "model", "inputs": [last], "params": params})
    seventh = {"op": "in", "lhs": {"key": "id"},
               "values": [i for i in SEVENTHS if i <= min(rows, ROWS)]}
    over150 = {"op": "cmp", "cmp": ">", "lhs": {"key": "id"}, "rhs": {"const": 150}}
    expr_table = {
        "ea": {"key": "id"},
        "eb": {"op": "-", "args": [{"op": "*", "args": [{"key": "id"}, {"const": 0.37}]},
                                   {"const": 40.0}]},
        "ec": {"op": "if", "args": [seventh, {"const": None},
                                    {"op": "*", "args": [{"op": "sqrt", "args": [{"key": "id"}]},
                                                         {"const": 3.0}]}]},
        "ed": {"op": "if", "args": [over150, {"const": True}, {"const": False}]},
    }
    return simple_plan(name, nodes, "m", expr_table=expr_table)


def folder(models, plans):
    d = temp_dir("rankd-model-plans-")
    for name, path in models.items():
        shutil.copy(path, os.path.join(d, f"{name}.model.json"))
    for name, plan in plans.items():
        write_plan(d, name, plan)
    return d


def model_file(**kw):
    path = os.path.join(temp_dir("rankd-model-"), "m.model.json")
    bst = train(path, **kw)
    return path, bst


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rank(s, plan, **extra):
    status, _, body = s.rank(dict({"plan": plan, "user_id": 1}, **extra))
    return status, body


def scores_by_id(body, col="s"):
    return {it["id"]: it[col] for it in body["items"]}


def check_scores(got, want, ids):
    bad = [(i, got[i], float(w)) for i, w in zip(ids, want) if not close(got[i], float(w))]
    assert not bad, f"{len(bad)} rows differ from XGBoost, first: {bad[:3]}"


def test_scores_equal_xgboost_for_default_and_margin_output():
    path, bst = model_file(objective="binary:logistic", trees=30, depth=5)
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr"),
                               "pm": scoring_plan("pm", "ctr", output="margin")})
    s = Rankd(d)
    ids = list(range(1, ROWS + 1))
    for plan, margin in [("p", False), ("pm", True)]:
        status, body = rank(s, plan)
        assert status == 200, body
        got = scores_by_id(body)
        assert len(got) == ROWS
        check_scores(got, predict(bst, ids, margin=margin), ids)


def test_features_map_model_names_to_other_columns_and_unnamed_models_use_f_names():
    path, bst = model_file(objective="reg:squarederror", trees=15, depth=3, names=False,
                           base_score=2.5)
    d = folder({"reg": path}, {"p": scoring_plan(
        "p", "reg", features={"f0": "a", "f1": "b", "f2": "c", "f3": "d"})})
    s = Rankd(d)
    ids = list(range(1, ROWS + 1))
    status, body = rank(s, "p")
    assert status == 200, body
    check_scores(scores_by_id(body), predict(bst, ids, names=False), ids)


def test_plans_list_their_models_and_explain_names_the_model_version():
    path, _ = model_file()
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr")})
    s = Rankd(d)
    status, _, body = s.request("GET", "/plans/p")
    assert status == 200
    plan = json.loads(body)
    assert plan["models"] == [{"name": "ctr", "sha256": sha256(path)}], plan.get("models")
    assert plan["name"] == "p" and plan["nodes"][-1]["op"] == "model"
    status, body = rank(s, "p", explain=True)
    assert status == 200
    node = [n for n in body["nodes"] if n["node_id"] == "m"][0]
    assert node["model"] == "ctr" and node["model_sha256"] == sha256(path), node
    assert node["rows"] == ROWS


def check_plans(d, *extra):
    p = subprocess.run([RANKD, "check-plans", "--plans", d, "--enable-test-ops", *extra],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def test_load_errors_name_the_plan_node_model_and_feature():
    path, _ = model_file()
    cases = [
        # (plan, what the one-line error must say)
        (scoring_plan("p", "nope"), ["p.plan.json: node 'm': params.model",
                                     "unknown model 'nope'", "nope.model.json"]),
        (scoring_plan("p", "ctr", features={"a": "missing_col"}),
         ["p.plan.json: node 'm': params.features", "model 'ctr' feature 'a'",
          "column 'missing_col'", "does not have"]),
        (scoring_plan("p", "ctr", features={"zz": "a"}),
         ["p.plan.json: node 'm': params.features.zz", "model 'ctr' has no feature 'zz'"]),
        (scoring_plan("p", "ctr", features={"a": "name"},
                      before={"node_id": "str", "op": "vm", "params": {"out_key": "name",
                                                                       "expr": "estr"}}),
         ["p.plan.json: node 'm'", "model 'ctr' feature 'a' reads column 'name'", "str"]),
        (scoring_plan("p", "ctr", output="probability"), ["params.output", "probability"]),
        (dict(scoring_plan("p", "ctr"), models=[]), ["p.plan.json: models"]),
    ]
    for plan, wants in cases:
        plan.setdefault("expr_table", {})["estr"] = {"const": "text"}
        d = folder({"ctr": path}, {"p": plan})
        rc, out = check_plans(d)
        assert rc == 1, out
        for w in wants:
            assert w in out, (w, out)
        assert out.count("\n") == 1, out


def test_a_bad_model_rejects_the_folder_even_when_no_plan_uses_it():
    path, _ = model_file()
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr")})
    rc, out = check_plans(d)
    assert rc == 0 and "1 plan(s), 1 model(s)" in out, out
    with open(path, "rb") as f:
        text = f.read()
    with open(os.path.join(d, "unused.model.json"), "wb") as f:
        f.write(text[: len(text) // 2])
    rc, out = check_plans(d)
    assert rc == 1 and "unused.model.json" in out, out


def test_max_model_bytes_is_a_load_error_in_serve_and_check_plans():
    path, _ = model_file()
    size = os.path.getsize(path)
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr")})
    rc, out = check_plans(d, "--max-model-bytes", str(size - 1))
    assert rc == 1 and "ctr.model.json" in out and str(size - 1) in out, out
    rc, out = check_plans(d, "--max-model-bytes", str(size))
    assert rc == 0, out
    p = subprocess.run([RANKD, "serve", "--port", "0", "--plans", d, "--enable-test-ops",
                        "--max-model-bytes", str(size - 1)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "ctr.model.json" in p.stderr, p.stderr


def test_rankd_run_loads_models_as_serve_does():
    path, bst = model_file(objective="reg:logistic", trees=10, depth=3, base_score=0.7)
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr", rows=20)})
    p = subprocess.run([RANKD, "run", "--plans", d, "--plan", "p", "--enable-test-ops"],
                       input='{"user_id": 1}', capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ids = list(range(1, 21))
    check_scores(scores_by_id(json.loads(p.stdout)), predict(bst, ids), ids)


def test_reload_swaps_the_model_and_requests_in_flight_keep_the_old_one():
    old_path, old = model_file(seed=1)
    new_path, new = model_file(seed=2, trees=25)
    assert sha256(old_path) != sha256(new_path)
    slow = {"node_id": "wait", "op": "sleep", "params": {"duration_ms": 400}}
    d = folder({"ctr": old_path}, {"p": scoring_plan("p", "ctr"),
                                   "slow": scoring_plan("slow", "ctr", before=slow)})
    s = Rankd(d, extra_args=["--deadline-ms", "10000"])
    ids = list(range(1, ROWS + 1))
    results = []

    def in_flight():
        results.append(rank(s, "slow", explain=True))

    # Requests that start before the reload: they are sleeping when it lands.
    threads = [threading.Thread(target=in_flight) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 4,
               what="four requests in flight")
    reloads = lambda: metric_value(s.metrics(), "rankd_plan_reloads_total", result="ok")  # noqa: E731
    before = reloads()
    shutil.copy(new_path, os.path.join(d, ".ctr.tmp"))
    os.replace(os.path.join(d, ".ctr.tmp"), os.path.join(d, "ctr.model.json"))
    s.signal(signal.SIGHUP)
    wait_until(lambda: reloads() == before + 1, what="the reload")
    status, body = rank(s, "p")
    assert status == 200
    check_scores(scores_by_id(body), predict(new, ids), ids)
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 4
    for status, body in results:
        assert status == 200, body
        check_scores(scores_by_id(body), predict(old, ids), ids)
        node = [n for n in body["nodes"] if n["node_id"] == "m"][0]
        assert node["model_sha256"] == sha256(old_path)


def test_the_plans_watcher_reloads_when_only_a_model_file_changes():
    old_path, _ = model_file(seed=1)
    new_path, new = model_file(seed=3, trees=12)
    d = folder({"ctr": old_path}, {"p": scoring_plan("p", "ctr")})
    s = Rankd(d, extra_args=["--watch-plans-ms", "50"])
    shutil.copy(new_path, os.path.join(d, ".ctr.tmp"))
    os.replace(os.path.join(d, ".ctr.tmp"), os.path.join(d, "ctr.model.json"))

    def serves_new():
        status, _, body = s.request("GET", "/plans/p")
        return status == 200 and json.loads(body)["models"][0]["sha256"] == sha256(new_path)
    wait_until(serves_new, what="the changed model loaded")
    ids = list(range(1, ROWS + 1))
    status, body = rank(s, "p")
    assert status == 200
    check_scores(scores_by_id(body), predict(new, ids), ids)


def test_model_metrics_count_rows_and_go_with_the_model():
    path, _ = model_file()
    d = folder({"ctr": path}, {"p": scoring_plan("p", "ctr"), "q": scoring_plan("q", "ctr")})
    s = Rankd(d)
    for _ in range(3):
        assert rank(s, "p")[0] == 200
    text = s.metrics()
    assert metric_value(text, "rankd_model_rows_total", model="ctr", shard="0") == 3 * ROWS
    assert metric_value(text, "rankd_model_eval_seconds_count", model="ctr", shard="0") == 3
    # Plans and model removed: the series go with them.
    for f in ("p.plan.json", "q.plan.json", "ctr.model.json"):
        os.remove(os.path.join(d, f))
    write_plan(d, "other", simple_plan("other", [
        {"node_id": "src", "op": "fixed_source", "inputs": [], "params": {"count": 1}}], "src"))
    s.signal(signal.SIGHUP)
    wait_until(lambda: "rankd_model_rows_total{" not in s.metrics(), what="model series removed")
    assert 'model="ctr"' not in s.metrics()


def test_a_big_scoring_job_stops_when_its_request_gives_up():
    # 100,000 rows x 1,000 full trees of depth 8 is 10^8 walks of 8 steps, a second or
    # more of work (many more under sanitizers). The deadline falls while the model runs:
    # the request answers 504 and the job, on a CPU worker, stops at its next block. The
    # deadline is measured, not fixed: 3x what the nodes before the model take in this
    # build on this machine (a fixed 50 ms fell before the model started on a loaded
    # machine under ASan, and then no job was there to cancel).
    path, _ = model_file(trees=1000, depth=8, noise=True)
    prep = scoring_plan("prep", "big", rows=100000)
    prep["nodes"] = [n for n in prep["nodes"] if n["node_id"] != "m"]
    prep["output"] = {"node": "vd"}
    d = folder({"big": path}, {"p": scoring_plan("p", "big", rows=100000), "prep": prep})
    s = Rankd(d)
    status, body = rank(s, "prep", deadline_ms=60000)
    assert status == 200, (status, body)
    deadline_ms = 3 * body["took_us"] // 1000 + 20
    status, body = rank(s, "p", deadline_ms=deadline_ms)
    assert status == 504, (deadline_ms, status, body if status != 200 else body["took_us"])
    wait_until(lambda: (metric_value(s.metrics(), "rankd_cpu_jobs_cancelled_total") or 0) >= 1,
               what="the scoring job cancelled")
    wait_until(lambda: metric_value(s.metrics(), "rankd_inflight_requests") == 0,
               what="the job to stop")
    # The server serves on.
    status, _, body = s.request("GET", "/healthz")
    assert status == 200


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
