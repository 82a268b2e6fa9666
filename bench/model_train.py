#!/usr/bin/python3
"""Trains the models of `ops/bench model` with XGBoost (Debian's python3-xgboost):
binary:logistic on 20 features (f0..f9 integers in [0, 100), f10..f19 normal, 10%
missing), one file per (trees, depth): OUT_DIR/model_T_D.model.json.

usage: model_train.py OUT_DIR TREES:DEPTH...
"""
import os
import sys

import numpy as np
import xgboost as xgb

out_dir = sys.argv[1]
rng = np.random.default_rng(7)
n = 4000
x = np.concatenate([rng.integers(0, 100, size=(n, 10)).astype(np.float32),
                    rng.normal(size=(n, 10)).astype(np.float32)], axis=1)
score = (x[:, 0] - 50) / 30 + x[:, 10] * x[:, 11] + np.sin(x[:, 12]) + (x[:, 1] % 7 - 3) / 3
y = (score + rng.normal(scale=0.5, size=n) > 0).astype(np.float32)
x[rng.random(x.shape) < 0.1] = np.nan
train = xgb.DMatrix(x, label=y)
for spec in sys.argv[2:]:
    trees, depth = (int(v) for v in spec.split(":"))
    booster = xgb.train({"objective": "binary:logistic", "max_depth": depth, "eta": 0.05,
                         "base_score": 0.4, "nthread": 1, "seed": 1}, train, trees)
    booster.save_model(os.path.join(out_dir, f"model_{trees}_{depth}.model.json"))
