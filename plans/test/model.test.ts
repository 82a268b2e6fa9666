// The model op: its JSON, and the compiler's checks against the model file in the plan
// folder (its presence and its feature names), on model files written to a temporary folder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { definePlan, planText, E, PlanError, type Ctx, type Node } from "../lib/index.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = path.join(ROOT, "dist", "lib", "cli.js");

/** A plan folder holding model files with these learner sections (all the compiler reads). */
function planDir(models: Record<string, object | string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-model-"));
  for (const [name, learner] of Object.entries(models))
    fs.writeFileSync(path.join(dir, `${name}.model.json`), typeof learner === "string" ? learner : JSON.stringify({ version: [1, 7, 4], learner }));
  return dir;
}
const named = (...names: string[]) => ({ feature_names: names, learner_model_param: { num_feature: String(names.length) } });
const unnamed = (n: number) => ({ feature_names: [], learner_model_param: { num_feature: String(n) } });

function compileIn(dir: string, build: (c: Ctx) => Node<any>): any {
  try {
    return JSON.parse(planText(definePlan({ name: "t", build }), { planDir: dir }));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
function errorIn(dir: string, build: (c: Ctx) => Node<any>): string {
  try {
    compileIn(dir, build);
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    return e.message;
  }
  assert.fail("compiled without error");
}
const hydrated = (c: Ctx) => c.viewer().follow().media().features({ fields: ["likes", "quality", "nsfw", "country"] });

test("model compiles to its node, output default filled in, features only when given", () => {
  const p = compileIn(planDir({ m: named("likes", "quality") }), (c) =>
    hydrated(c)
      .model({ model: "m", outKey: "score" })
      .model({ id: "raw", model: "m", outKey: "margin", features: { likes: "nsfw", quality: "score" }, output: "margin" })
      .sort({ key: "margin", order: "desc" }),
  );
  const nodes = p.nodes.filter((n: any) => n.op === "model");
  assert.deepEqual(nodes, [
    { node_id: "model", op: "model", inputs: ["features"], params: { model: "m", out_key: "score", output: "default" } },
    { node_id: "raw", op: "model", inputs: ["model"], params: { model: "m", out_key: "margin", features: { likes: "nsfw", quality: "score" }, output: "margin" } },
  ]);
});

test("a model saved without feature names reads f0..fN-1", () => {
  const p = compileIn(planDir({ m: unnamed(2) }), (c) => c.fixedSource().model({ model: "m", outKey: "s", features: { f0: "score", f1: "id" } }));
  assert.deepEqual(p.nodes[1].params.features, { f0: "score", f1: "id" });
  assert.match(errorIn(planDir({ m: unnamed(2) }), (c) => c.fixedSource().model({ model: "m", outKey: "s" })), /model 'm' feature 'f0' reads column 'f0', which is not known here \(columns here: id, score\)/);
});

test("a bool column is a valid model input", () => {
  const p = compileIn(planDir({ m: named("flag") }), (c) =>
    c.fixedSource().vm({ outKey: "flag", expr: (r) => E.if(r.score.gt(1), true, false) }).model({ model: "m", outKey: "s" }),
  );
  assert.equal(p.nodes[2].op, "model");
});

test("a missing model file is an error naming the plan, the node, the file and the folder", () => {
  const dir = planDir({});
  const msg = errorIn(dir, (c) => hydrated(c).model({ id: "rank", model: "ranker", outKey: "score" }));
  assert.match(msg, /^plan 't': model\(\) at test\/model\.test\.ts:\d+:\d+: node 'rank': model file ranker\.model\.json is missing from the plan folder /);
  assert.ok(msg.includes(dir), msg);
});

test("model files are checked against the node's columns", () => {
  const cases: [Record<string, object | string>, (c: Ctx) => Node<any>, RegExp][] = [
    [{ m: named("likes", "age_s") }, (c) => hydrated(c).model({ model: "m", outKey: "s" }), /node 'model': model 'm' feature 'age_s' reads column 'age_s', which is not known here/],
    [{ m: named("country") }, (c) => hydrated(c).model({ model: "m", outKey: "s" }), /model 'm' feature 'country' reads column 'country', which is str/],
    [{ m: named("likes") }, (c) => hydrated(c).model({ model: "m", outKey: "s", features: { lkes: "likes" } }), /features: 'lkes' is not a feature of model 'm' \(its features: likes\)/],
    [{ m: "{" }, (c) => hydrated(c).model({ model: "m", outKey: "s" }), /model file m\.model\.json is not JSON/],
    [{ m: { feature_names: [] } }, (c) => hydrated(c).model({ model: "m", outKey: "s" }), /m\.model\.json has neither learner\.feature_names nor a positive/],
  ];
  for (const [models, build, want] of cases) assert.match(errorIn(planDir(models), build), want);
});

test("cli check looks for model files next to the JSON (--json-dir)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-check-"));
  try {
    const run = () => spawnSync(process.execPath, [CLI, "check", "--json-dir", dir, "rerank"], { encoding: "utf8" });
    fs.copyFileSync(path.join(ROOT, "rerank.plan.json"), path.join(dir, "rerank.plan.json"));
    const missing = run();
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /rerank\.plan\.ts: error: plan 'rerank': model\(\) at rerank\.plan\.ts:\d+:\d+: node 'model': model file rerank\.model\.json is missing from the plan folder /);
    fs.copyFileSync(path.join(ROOT, "rerank.model.json"), path.join(dir, "rerank.model.json"));
    assert.equal(run().status, 0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** A plan folder with an ONNX model NAME.onnx (the compiler only sees that it is there). */
function onnxDir(...names: string[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-onnx-"));
  for (const name of names) fs.writeFileSync(path.join(dir, `${name}.onnx`), "not parsed by the compiler");
  return dir;
}

test("an ONNX model takes each input's column list and fill, compiled as given", () => {
  const p = compileIn(onnxDir("nn"), (c) =>
    hydrated(c).model({ model: "nn", outKey: "score", features: { x: ["likes", "quality", "nsfw"], ids: "id" }, fill: { quality: 0.5 } }),
  );
  const node = p.nodes.find((n: any) => n.op === "model");
  assert.deepEqual(node.params, {
    model: "nn", out_key: "score", features: { x: ["likes", "quality", "nsfw"], ids: "id" }, fill: { quality: 0.5 }, output: "default",
  });
});

test("ONNX binding errors: no features, a str column, a bad fill; a tree model given a list", () => {
  assert.match(errorIn(onnxDir("nn"), (c) => hydrated(c).model({ model: "nn", outKey: "s" })), /model 'nn' is an ONNX model: features must map each of its inputs to columns/);
  assert.match(errorIn(onnxDir("nn"), (c) => hydrated(c).model({ model: "nn", outKey: "s", features: { x: ["likes", "country" as any] } })), /features: 'x' reads column 'country', which is str/);
  assert.match(errorIn(onnxDir("nn"), (c) => hydrated(c).model({ model: "nn", outKey: "s", features: { x: ["likes"] }, fill: { likes: NaN } })), /fill: 'likes' must be a finite number/);
  assert.match(errorIn(planDir({ m: named("likes") }), (c) => hydrated(c).model({ model: "m", outKey: "s", features: { likes: ["likes", "nsfw"] } })), /lists 2 columns, but model 'm' is a tree model/);
  const both = onnxDir("m");
  fs.writeFileSync(path.join(both, "m.model.json"), JSON.stringify({ version: [1, 7, 4], learner: named("likes") }));
  assert.match(errorIn(both, (c) => hydrated(c).model({ model: "m", outKey: "s" })), /holds both m\.model\.json and m\.onnx/);
});
