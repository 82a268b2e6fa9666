#!/usr/bin/python3
"""ops/bench model, the ONNX rows: an MLP F=64 -> 256 -> 128 -> 1 (ReLU, sigmoid out) built
here with a fixed seed and exported with torch.onnx.export; rankd's scorer
(bench/onnx_bench.cc) and torch's own forward of the same model on the same rows, one
thread each (torch.set_num_threads(1), inference mode; run with OPENBLAS_NUM_THREADS=1),
batches of 1,000 rows, each side's fastest of its rounds. Prints one JSON line: ns per
row of each, their ratio (rankd / torch; the target is <= 1.0), the share of the
instructions' peak the scorer reaches, the system BLAS (torch's speed depends on it),
and the largest difference between the two sides' scores (fails beyond 1e-6 absolute or
1e-5 relative).

usage: onnx_torch.py ONNX_BENCH_BINARY WORK_DIR [F H1 H2]
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

bench, work = sys.argv[1], sys.argv[2]
f, h1, h2 = (int(v) for v in (sys.argv[3:6] if len(sys.argv) > 3 else (64, 256, 128)))
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(f, h1), torch.nn.ReLU(), torch.nn.Linear(h1, h2),
                            torch.nn.ReLU(), torch.nn.Linear(h2, 1), torch.nn.Sigmoid()).eval()
path = os.path.join(work, "mlp.onnx")
torch.onnx.export(model, (torch.zeros(2, f),), path, input_names=["x"], output_names=["p"],
                  dynamic_axes={"x": {0: "n"}, "p": {0: "n"}}, opset_version=13)
rows = np.random.default_rng(0).normal(size=(1000, f)).astype(np.float32)
rows.tofile(os.path.join(work, "rows.f32"))
out = subprocess.run([bench, path, os.path.join(work, "rows.f32"), os.path.join(work, "scores.f32")],
                     capture_output=True, text=True, check=True)
ours = json.loads(out.stdout)
x = torch.from_numpy(rows)
with torch.inference_mode():
    want = model(x).numpy().ravel()
    for _ in range(3):
        model(x)
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(20):
            model(x)
        best = min(best, (time.perf_counter() - t) / 20)
got = np.fromfile(os.path.join(work, "scores.f32"), dtype=np.float32)
diff = float(np.max(np.abs(got - want)))
ok = bool(np.all(np.abs(got - want) <= np.maximum(1e-6, 1e-5 * np.abs(want))))
blas = subprocess.run(["update-alternatives", "--query", "libblas.so.3-x86_64-linux-gnu"],
                      capture_output=True, text=True).stdout
blas = next((l.split(": ", 1)[1] for l in blas.splitlines() if l.startswith("Value:")), "unknown")
torch_ns = best * 1e9 / len(rows)
print(json.dumps({"name": f"onnx_mlp_{f}_{h1}_{h2}_1", "batch": len(rows),
                  "rankd_ns_per_row": ours["ns_per_row"], "torch_ns_per_row": round(torch_ns, 1),
                  "ratio": round(ours["ns_per_row"] / torch_ns, 3), "target": "<= 1.0",
                  "dispatch": ours["dispatch"], "peak_fraction": ours["peak_fraction"],
                  "peak_gflops": ours["peak_gflops"], "blas": blas,
                  "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "max_abs_diff": diff, "baseline": "torch"}))
sys.exit(0 if ok else 1)
