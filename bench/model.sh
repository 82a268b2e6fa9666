#!/usr/bin/env bash
# ops/bench model — the tree evaluator of the `model` op against libxgboost's own
# predictor (XGBoosterPredictFromDense, nthread 1) on the same binary:logistic models
# and rows, in one process (bench/model_bench.cc), and the largest difference between the
# two (must be within the models' tolerance, and neither side NaN, else the run fails);
# the ONNX MLP scorer against torch's forward (bench/onnx_torch.py);
# then the `rerank` plan served under wrk beside `feed` (rerank_rps, rerank_cpu_us_per_req, ...).
set -euo pipefail
source "$RANKD_ROOT/bench/lib.sh"
models="$BENCH_TMP/models"
mkdir -p "$models"
/usr/bin/python3 "$RANKD_ROOT/bench/model_train.py" "$models" 500:6 100:6 1000:6 500:4 500:8
"$RANKD_BUILD/bench/model_bench" "$models" |
  sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "$RANKD_BUILD/bench/model_bench (the baseline, XGBoosterPredictFromDense with nthread 1 over a prebuilt float32 matrix, runs in the same process; see bench/model_bench.cc)"

# The ONNX rows: rankd's MLP scorer against torch's forward of the same model, one thread
# each (bench/onnx_torch.py), with the system BLAS named in the row.
onnx_work="$BENCH_TMP/onnx"
mkdir -p "$onnx_work"
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$RANKD_ROOT/bench/onnx_torch.py" \
  "$RANKD_BUILD/bench/onnx_bench" "$onnx_work" |
  sed "s|}\$|, \"machine\": \"$MACHINE\", \"build\": \"release+lto\"}|" |
  with_baseline_command "torch 1.13 forward of the same model (bench/onnx_torch.py), torch.set_num_threads(1), inference mode"

# rerank_rps and the rest of the `rerank` plan's figures beside feed's: the two-phase
# plan on the demo data under wrk, with rankd's CPU per request (bench/feed.sh).
PLANS="feed rerank" bash "$RANKD_ROOT/bench/feed.sh"
