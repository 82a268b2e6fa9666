#!/usr/bin/python3
"""rankd's tree evaluator against XGBoost 1.7.4 itself (run with /usr/bin/python3, which
sees Debian's python3-xgboost). Trains models for every supported objective and dart,
with base_score != 0.5, depth in {1, 6, 10} x trees in {1, 100, 1000}, with and without
feature names; scores rows with missing values and +-inf through tests/model/model_score
(both outputs) and XGBoost (given NaN for +-inf); asserts the results agree within
1e-6 absolute or 1e-5 relative, whichever is larger. Then checks that each unsupported
model is rejected with a message naming the file and the field.

usage: test_xgboost_equality.py MODEL_SCORE_BINARY
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import xgboost as xgb

SCORE = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="rankd-model-test-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
RNG = np.random.default_rng(13)
N_FEATURES = 6
failures = []


def data(n_rows, objective):
    x = RNG.normal(size=(n_rows, N_FEATURES)).astype(np.float32)
    score = x[:, 0] + 0.5 * x[:, 1] * x[:, 2] - np.abs(x[:, 3])
    if objective.startswith(("binary:", "reg:logistic")):
        y = (score > 0).astype(np.float32)
    elif objective.startswith("rank:"):
        y = np.clip(np.round(score + 2), 0, 4).astype(np.float32)
    else:
        y = score + RNG.normal(scale=0.1, size=n_rows).astype(np.float32)
    x[RNG.random(x.shape) < 0.1] = np.nan
    return x, y


def scoring_rows(n_rows=300):
    """Rows with NaN and +-inf (what rankd sees) and the same with NaN for +-inf (what XGBoost accepts)."""
    x = RNG.normal(size=(n_rows, N_FEATURES)).astype(np.float32) * 1.5
    draw = RNG.random(x.shape)
    x[draw < 0.1] = np.nan
    x[(draw >= 0.1) & (draw < 0.13)] = np.inf
    x[(draw >= 0.13) & (draw < 0.16)] = -np.inf
    # Exact thresholds hit: some values equal a split condition of the first model.
    return x, np.where(np.isinf(x), np.nan, x)


def rankd_scores(path, rows):
    rows_path = path + ".rows"
    rows.astype("<f4").tofile(rows_path)
    out = subprocess.run([SCORE, path, rows_path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{path}: {out.stderr.strip()}")
    values = np.array([[float(v) for v in line.split()] for line in out.stdout.splitlines()])
    return values[:, 0], values[:, 1]


def close(ours, theirs):
    return np.abs(ours - theirs) <= np.maximum(1e-6, 1e-5 * np.abs(theirs))


def check(label, params, rounds, names):
    objective = params["objective"]
    x, y = data(200, objective)
    train = xgb.DMatrix(x, label=y, feature_names=names)
    if objective.startswith("rank:"):
        train.set_group([50] * 4)
    booster = xgb.train(dict(params, nthread=1, seed=1), train, rounds)
    path = os.path.join(TMP, f"{label}.model.json")
    booster.save_model(path)
    rows, rows_nan = scoring_rows()
    # Values exactly at thresholds: copy split conditions into some rows.
    model = json.loads(open(path).read())
    tree = model["learner"]["gradient_booster"].get("model") or model["learner"]["gradient_booster"]["gbtree"]["model"]
    first = tree["trees"][0]
    for i, (feature, cond, left) in enumerate(zip(first["split_indices"], first["split_conditions"], first["left_children"])):
        if left != -1 and i < len(rows):
            rows[i, feature] = rows_nan[i, feature] = np.float32(cond)
    test = xgb.DMatrix(rows_nan, feature_names=names, missing=np.nan)
    want = booster.predict(test)
    want_margin = booster.predict(test, output_margin=True)
    got, got_margin = rankd_scores(path, rows)
    for what, ours, theirs in (("default", got, want), ("margin", got_margin, want_margin)):
        ok = close(ours, theirs)
        worst = float(np.max(np.abs(ours - theirs)))
        if not ok.all():
            r = int(np.argmin(ok))
            failures.append(f"{label} ({what}): row {r}: rankd {ours[r]!r}, xgboost {theirs[r]!r}")
        print(f"{label:<44} {what:<7} max abs diff {worst:.3g}")


OBJECTIVE_BASE = {
    "binary:logistic": 0.3, "reg:logistic": 0.7, "binary:logitraw": 0.3,
    "reg:squarederror": 0.7, "reg:pseudohubererror": 0.7, "reg:absoluteerror": -0.4,
    "rank:pairwise": 0.2, "rank:ndcg": 0.2, "rank:map": 0.2,
}
NAMES = [f"feat_{i}" for i in range(N_FEATURES)]

# Every depth x tree count on the logistic objective (the sigmoid and the base margin's
# logit), with and without names.
for depth in (1, 6, 10):
    for trees in (1, 100, 1000):
        names = NAMES if (depth + trees) % 2 else None
        check(f"binary_logistic_d{depth}_t{trees}",
              {"objective": "binary:logistic", "max_depth": depth, "base_score": 0.3, "eta": 0.1},
              trees, names)
# Every objective once, margins and predictions.
for objective, base in OBJECTIVE_BASE.items():
    for depth, trees in ((6, 100), (10, 1000)) if objective == "reg:squarederror" else ((6, 100),):
        check(f"{objective.replace(':', '_')}_d{depth}_t{trees}",
              {"objective": objective, "max_depth": depth, "base_score": base, "eta": 0.1},
              trees, NAMES if objective.startswith("rank") else None)
# dart: the weights of its trees apply at inference.
for objective in ("binary:logistic", "reg:squarederror"):
    check(f"dart_{objective.replace(':', '_')}",
          {"booster": "dart", "objective": objective, "max_depth": 6, "base_score": 0.3,
           "rate_drop": 0.2, "skip_drop": 0.3, "normalize_type": "forest", "eta": 0.3},
          100, NAMES)
# Parallel trees (a random forest boosted): every tree adds to the one output.
check("parallel_trees", {"objective": "binary:logistic", "max_depth": 4, "base_score": 0.4,
                         "num_parallel_tree": 3, "subsample": 0.8, "colsample_bynode": 0.8},
      20, None)


def rejected(label, path, *needles, limits=()):
    rows_path = os.path.join(TMP, "empty.rows")
    open(rows_path, "wb").close()
    out = subprocess.run([SCORE, path, rows_path, *limits], capture_output=True, text=True)
    message = out.stderr.strip()
    if out.returncode != 1 or not all(n in message for n in (path, *needles)):
        failures.append(f"rejection {label}: exit {out.returncode}, message {message!r}, "
                        f"expected to name {(path, *needles)}")
    print(f"rejected {label:<24} {message}")


def trained(label, params, rounds=2, classes=None):
    x, y = data(100, "reg:squarederror")
    y = np.abs(y) + 0.1  # positive, as reg:gamma and count:poisson need
    if classes:
        y = (np.arange(100) % classes).astype(np.float32)
    train = xgb.DMatrix(x, label=y)
    booster = xgb.train(dict(params, nthread=1), train, rounds)
    path = os.path.join(TMP, f"{label}.model.json")
    booster.save_model(path)
    return path


def edited(label, source, edit):
    model = json.loads(open(source).read())
    edit(model)
    path = os.path.join(TMP, f"{label}.model.json")
    open(path, "w").write(json.dumps(model))
    return path


base = trained("base", {"objective": "reg:squarederror", "max_depth": 3})
rejected("multi-class", trained("multiclass", {"objective": "multi:softprob", "num_class": 3}, classes=3),
         "learner.learner_model_param.num_class", "multi-class")
rejected("gblinear", trained("gblinear", {"booster": "gblinear", "objective": "reg:squarederror"}),
         "learner.gradient_booster.name", "gblinear")
rejected("objective", trained("gamma", {"objective": "reg:gamma"}), "learner.objective.name", "reg:gamma")
rejected("poisson", trained("poisson", {"objective": "count:poisson"}), "learner.objective.name")


def categorical(model):
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
    tree["split_type"][0] = 1
rejected("categorical split", edited("categorical", base, categorical), "tree 0: node 0: split_type")


def categories(model):
    tree = model["learner"]["gradient_booster"]["model"]["trees"][1]
    tree["categories"] = [1, 2]
    tree["categories_nodes"] = [0]
rejected("categories", edited("categories", base, categories), "tree 1: categories")
rejected("feature type c", edited("ftype", base, lambda m: m["learner"].__setitem__(
    "feature_types", ["float", "c"] + ["float"] * (N_FEATURES - 2))), "learner.feature_types[1]")
rejected("version 2", edited("v2", base, lambda m: m.__setitem__("version", [2, 0, 0])),
         "version", "XGBoost 2")
rejected("num_target", edited("target", base, lambda m: m["learner"]["learner_model_param"].__setitem__(
    "num_target", "2")), "learner.learner_model_param.num_target")


def child(model):
    tree = model["learner"]["gradient_booster"]["model"]["trees"][1]
    tree["left_children"][0] = 999
rejected("child out of range", edited("child", base, child), "tree 1: node 0: left_children", "999")


def feature(model):
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
    tree["split_indices"][0] = N_FEATURES
rejected("feature out of range", edited("feature", base, feature), "tree 0: node 0: split_indices")


def cycle(model):
    tree = model["learner"]["gradient_booster"]["model"]["trees"][0]
    inner = next(i for i in range(1, len(tree["left_children"])) if tree["left_children"][i] != -1)
    tree["right_children"][inner] = 0
rejected("cycle", edited("cycle", base, cycle), "tree 0: node", "reached twice")
rejected("too deep", base, "tree 0: node", "deeper than the limit of 2", limits=("1000000", "2"))
rejected("over max bytes", base, "over the limit of 1000", limits=("1000", "64"))
truncated = os.path.join(TMP, "truncated.model.json")
open(truncated, "w").write(open(base).read()[:-300])
rejected("truncated", truncated, "invalid JSON")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("all equal within tolerance; all rejections name file and field")
