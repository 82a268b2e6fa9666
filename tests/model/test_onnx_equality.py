#!/usr/bin/python3
"""rankd's ONNX scorer against PyTorch 1.13 itself (run with /usr/bin/python3, which sees
Debian's python3-torch and python3-onnx). Builds small MLPs in the test (1 to 4 hidden
layers, with and without BatchNorm, an embedding Gather, Concat, sigmoid and raw outputs,
and one model using every other supported operator), exports each with
torch.onnx.export at opsets 11 to 17, scores 3,200 rows through tests/model/model_score
and torch's forward, and asserts they agree within 1e-6 absolute or 1e-5 relative,
whichever is larger (docs/models.md says why). Rows with a missing input or a bad
embedding index must score NaN. Then every load error: files built with onnx.helper
(unsupported operators, dynamic shapes, cycles, NaN weights, mismatched shapes, ...) and
broken bytes, each rejected with a message naming the file and, for a node, the node
and its operator.

usage: test_onnx_equality.py MODEL_SCORE_BINARY
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch

SCORE = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="rankd-onnx-test-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
torch.manual_seed(7)
torch.set_num_threads(1)
RNG = np.random.default_rng(7)
ROWS = 3200
failures = []


def fail(label, what):
    failures.append(f"{label}: {what}")
    print(f"FAIL {label}: {what}")


def rankd_scores(path, features):
    rows_path = path + ".rows"
    features.astype("<f4").tofile(rows_path)
    out = subprocess.run([SCORE, path, rows_path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{path}: {out.stderr.strip()}")
    return np.array([float(line.split()[0]) for line in out.stdout.splitlines()])


def export(label, model, args, names, opset):
    model.eval()
    path = os.path.join(TMP, f"{label}.onnx")
    axes = {n: {0: "batch"} for n in names}
    axes["score"] = {0: "batch"}
    torch.onnx.export(model, args, path, input_names=names, output_names=["score"],
                      dynamic_axes=axes, opset_version=opset)
    return path


def close(ours, theirs):
    return np.abs(ours - theirs) <= np.maximum(1e-6, 1e-5 * np.abs(theirs))


def randomize_batchnorm(model):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):
            with torch.no_grad():
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


class Mlp(torch.nn.Module):
    def __init__(self, f, hidden, batchnorm, sigmoid, input_bn=False):
        super().__init__()
        layers = [torch.nn.BatchNorm1d(f)] if input_bn else []
        width = f
        for h in hidden:
            layers.append(torch.nn.Linear(width, h))
            if batchnorm:
                layers.append(torch.nn.BatchNorm1d(h))
            layers.append(torch.nn.ReLU())
            width = h
        layers.append(torch.nn.Linear(width, 1))
        if sigmoid:
            layers.append(torch.nn.Sigmoid())
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Embedded(torch.nn.Module):
    """Dense features and an embedding, concatenated (DLRM's top MLP in miniature)."""

    def __init__(self, f, rows, dim):
        super().__init__()
        self.emb = torch.nn.Embedding(rows, dim)
        self.top = torch.nn.Sequential(torch.nn.Linear(f + dim, 16), torch.nn.LeakyReLU(0.1),
                                       torch.nn.Linear(16, 8), torch.nn.Tanh(),
                                       torch.nn.Linear(8, 1))

    def forward(self, x, ids):
        return self.top(torch.cat([x, self.emb(ids)], dim=1)).squeeze(1)


class EveryOp(torch.nn.Module):
    """MatMul, Add/Sub/Mul/Div by constants, Clip, Flatten, Reshape, Unsqueeze/Squeeze."""

    def __init__(self, f):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(f, 8) * 0.3)
        self.shift = torch.nn.Parameter(torch.randn(8))
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = x @ self.w                       # MatMul
        h = (h + self.shift) * 1.5 - 0.25    # Add, Mul, Sub
        h = h / 2.0                          # Div
        h = torch.clamp(h, -1.0, 2.0)        # Clip
        h = h.unsqueeze(1)                   # [N, 1, 8]
        h = torch.flatten(h, 1)              # Flatten
        h = h.reshape(-1, 8)                 # Reshape
        h = torch.relu(1.0 - h)              # Sub (constant first), Relu
        return self.out(h).unsqueeze(2).squeeze(2)


def rows(f, missing=0.0):
    x = RNG.normal(size=(ROWS, f)).astype(np.float32)
    if missing:
        x[RNG.random(x.shape) < missing] = np.nan
    return x


def check(label, model, f, opset, emb_rows=0):
    model.eval()  # BatchNorm in inference form, as exported
    x = rows(f)
    with torch.inference_mode():
        if emb_rows:
            ids = RNG.integers(0, emb_rows, size=ROWS)
            want = model(torch.from_numpy(x), torch.from_numpy(ids)).numpy().reshape(-1)
        else:
            want = model(torch.from_numpy(x)).numpy().reshape(-1)
    path = export(label, model,
                  (torch.from_numpy(x[:2]), torch.from_numpy(ids[:2])) if emb_rows
                  else (torch.from_numpy(x[:2]),),
                  ["x", "ids"] if emb_rows else ["x"], opset)
    features = np.concatenate([x, ids.reshape(-1, 1).astype(np.float32)], axis=1) if emb_rows else x
    got = rankd_scores(path, features)
    ok = close(got, want)
    if not ok.all():
        i = int(np.argmin(ok))
        fail(label, f"{(~ok).sum()} rows differ, e.g. row {i}: rankd {got[i]!r}, torch {want[i]!r}")
    # Missing values and bad indices: NaN (the row's output is null in a plan).
    bad = features.copy()
    bad[::7, 0] = np.nan
    bad[1::7, 0] = np.inf
    if emb_rows:
        bad[2::7, -1] = emb_rows        # past the table
        bad[3::7, -1] = -1              # negative
    got = rankd_scores(path, bad)
    expect_nan = np.zeros(ROWS, bool)
    for k in (0, 1) + ((2, 3) if emb_rows else ()):
        expect_nan[k::7] = True
    if not (np.isnan(got) == expect_nan).all():
        fail(label, "rows with a missing input or a bad index do not score NaN, or others do")
    elif not close(got[~expect_nan], want[~expect_nan]).all():
        fail(label, "the other rows of a block with missing values changed")
    print(f"ok {label}: max abs diff {np.max(np.abs(rankd_scores(path, features) - want)):.3g}")


for opset, hidden, bn, sig in [(11, [8], False, False), (13, [16, 8], True, True),
                               (15, [32, 16, 8], False, True), (17, [24, 16, 12, 8], True, False)]:
    m = Mlp(6, hidden, bn, sig)
    randomize_batchnorm(m)
    check(f"mlp{len(hidden)}_bn{int(bn)}_sig{int(sig)}_op{opset}", m, 6, opset)
m = Mlp(5, [8], False, True, input_bn=True)
randomize_batchnorm(m)
check("input_batchnorm_op13", m, 5, 13)
for opset in (11, 14):
    check(f"embedding_op{opset}", Embedded(6, 50, 4), 6, opset, emb_rows=50)
for opset in (11, 13, 17):
    check(f"every_op_op{opset}", EveryOp(5), 5, opset)

# --- load errors ---------------------------------------------------------------------


def graph_model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def f32(name, *dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))


def weights(name, *shape, value=None):
    a = np.full(shape, value, np.float32) if value is not None else RNG.normal(size=shape).astype(np.float32)
    return numpy_helper.from_array(a, name)


def gemm_model(k=4, w=None, extra_nodes=()):
    nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc", transB=1)] + list(extra_nodes)
    return graph_model(nodes, [f32("x", "N", 4)], [f32("y", "N", 1)],
                       [w if w is not None else weights("W", 1, k), weights("B", 1)])


def expect_error(label, model_or_bytes, *needles, max_bytes=None):
    path = os.path.join(TMP, f"{label}.onnx")
    with open(path, "wb") as f:
        f.write(model_or_bytes if isinstance(model_or_bytes, bytes)
                else model_or_bytes.SerializeToString())
    np.zeros(4, "<f4").tofile(path + ".rows")
    cmd = [SCORE, path, path + ".rows"] + ([str(max_bytes), "64"] if max_bytes else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    message = out.stderr.strip()
    if out.returncode != 1:
        fail(label, f"loaded (exit {out.returncode}), expected a load error")
    elif not message.startswith(path + ": ") or not all(n in message for n in needles):
        fail(label, f"message {message!r} lacks {needles}")
    else:
        print(f"ok {label}: {message[len(TMP) + 1:]}")


relu = lambda: helper.make_node("Relu", ["h"], ["y"], name="act")
expect_error("unsupported_op",
             gemm_model(extra_nodes=[helper.make_node("Softmax", ["h"], ["y"], name="sm")]),
             "node 'sm' (Softmax): operator not supported")
expect_error("other_domain",
             gemm_model(extra_nodes=[helper.make_node("Relu", ["h"], ["y"], name="r", domain="com.x")]),
             "node 'r' (com.x.Relu): operator not supported")
expect_error("dynamic_width",
             graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [f32("x", "N", "F")],
                         [f32("y", "N", 1)]), "input 'x'", "fixed F")
expect_error("dynamic_reshape",
             graph_model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                          helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)]),
             "node 'shape' (Shape): operator not supported")
expect_error("mismatched_gemm", gemm_model(k=3), "node 'fc' (Gemm): mismatched shapes")
expect_error("nan_weight", gemm_model(w=weights("W", 1, 4, value=np.nan)),
             "node 'fc' (Gemm)", "NaN or infinite")
expect_error("cycle",
             graph_model([helper.make_node("Relu", ["x2"], ["a"], name="n1"),
                          helper.make_node("Add", ["a", "c"], ["x2"], name="n2"),
                          helper.make_node("Identity", ["a"], ["y"], name="n3")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)], [weights("c", 1)]),
             "(Relu)", "cycle")
expect_error("undefined_input",
             graph_model([helper.make_node("Relu", ["nope"], ["y"], name="r")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)]),
             "node 'r' (Relu): input 'nope' is not defined")
expect_error("output_width",
             graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                         [f32("x", "N", 2)], [f32("y", "N", 2)]), "output 'y'", "[N] or [N, 1]")
expect_error("opset_10", graph_model([relu()], [f32("h", "N", 1)], [f32("y", "N", 1)], opset=10),
             "opset 10")
expect_error("opset_18", graph_model([relu()], [f32("h", "N", 1)], [f32("y", "N", 1)], opset=18),
             "opset 18")
expect_error("int32_input",
             graph_model([relu()], [helper.make_tensor_value_info("h", TensorProto.INT32, ["N"])],
                         [f32("y", "N", 1)]), "input 'h'", "element type 6")
expect_error("two_computed",
             graph_model([helper.make_node("Add", ["x", "x"], ["y"], name="add")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)]),
             "node 'add' (Add): both operands are computed")
expect_error("div_zero",
             graph_model([helper.make_node("Div", ["x", "z"], ["y"], name="div")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)], [weights("z", 1, value=0)]),
             "node 'div' (Div): division by a constant zero")
expect_error("gather_float_index",
             graph_model([helper.make_node("Gather", ["T", "x"], ["y"], name="g")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)], [weights("T", 5, 1)]),
             "node 'g' (Gather)", "int64 input")
expect_error("bad_broadcast",
             graph_model([helper.make_node("Mul", ["x", "c"], ["y"], name="mul")],
                         [f32("x", "N", 1)], [f32("y", "N", 1)], [weights("c", 3)]),
             "node 'mul' (Mul): mismatched shapes")
good = gemm_model(extra_nodes=[relu()]).SerializeToString()
expect_error("truncated", good[: len(good) // 2], "truncated or malformed")
expect_error("garbage", b"\x08\x07\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage", "truncated or malformed")
expect_error("empty", b"", "no graph")
expect_error("over_max_bytes", good, "bytes, over the limit of 64", max_bytes=64)

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("all ONNX checks passed")
