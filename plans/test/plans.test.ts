// The plans of this folder: committed JSON matches the sources, the feed matches its pinned JSON,
// and `check` fails, naming the file, when a JSON differs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { compileFile, planNames } from "../lib/cli.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = path.join(ROOT, "dist", "lib", "cli.js");
/** The test fixtures: plans that use the test-only ops, which a production rankd refuses. */
const TEST_PLANS = path.resolve(ROOT, "..", "tests", "plans");
const TEST_OPS = ["sleep", "busy_cpu", "fixed_source"];
const read = (name: string, dir = ROOT) => fs.readFileSync(path.join(dir, `${name}.plan.json`), "utf8");

test("the expected plans exist", () => {
  for (const n of ["simple_viewer", "viewer_filter", "parallel_fanout", "mixed_pipeline", "diamond", "complex_dag", "feed", "feed_quality", "rerank"])
    assert.ok(planNames().includes(n), n);
  for (const n of ["fixed_rank", "fixed_simple", "e2e_rank", "e2e_slow"]) assert.ok(planNames(TEST_PLANS).includes(n), n);
});

test("no plan of this folder uses a test-only op; each test fixture does", () => {
  const ops = (name: string, dir: string) => JSON.parse(read(name, dir)).nodes.map((n: any) => n.op);
  for (const name of planNames()) assert.deepEqual(ops(name, ROOT).filter((op: string) => TEST_OPS.includes(op)), [], name);
  for (const name of planNames(TEST_PLANS)) assert.ok(ops(name, TEST_PLANS).some((op: string) => TEST_OPS.includes(op)), name);
});

for (const name of planNames()) {
  test(`${name}.plan.json is what ${name}.plan.ts compiles to, byte for byte`, async () => {
    const text = await compileFile(name);
    assert.equal(read(name), text);
    assert.equal(await compileFile(name), text, "deterministic");
    assert.ok(text.endsWith("}\n"));
  });
}

test("feed compiles to exactly its pinned JSON", () => {
  const want = {
    schema_version: 1,
    name: "feed",
    description: "home feed: follow graph + recs, hydrated, scored, filtered, diversified by author",
    params: {
      weight: { type: "f64", default: 0.5 },
      limit: { type: "i64", default: 50, min: 1, max: 500 },
      country: { type: "str", default: "US" },
    },
    nodes: [
      { node_id: "v", op: "viewer", inputs: [], params: { endpoint: "redis_default" } },
      { node_id: "f", op: "follow", inputs: ["v"], params: { endpoint: "redis_default", fanout: 100 } },
      { node_id: "m", op: "media", inputs: ["f"], params: { endpoint: "redis_default", cache: true, per_author: 5 } },
      { node_id: "r", op: "recommendation", inputs: ["v"], params: { endpoint: "redis_default", fanout: 100 }, optional: true, timeout_ms: 30 },
      { node_id: "c", op: "concat", inputs: ["m", "r"], params: {} },
      { node_id: "d", op: "dedupe", inputs: ["c"], params: { key: "id" } },
      { node_id: "h", op: "features", inputs: ["d"], params: { endpoint: "redis_default", cache: true, fields: ["likes", "age_s", "quality", "country", "nsfw"] } },
      { node_id: "s", op: "vm", inputs: ["h"], params: { out_key: "score", expr: "e0" } },
      { node_id: "ok", op: "filter", inputs: ["s"], params: { pred: "p0" } },
      { node_id: "o", op: "sort", inputs: ["ok"], params: { key: "score", order: "desc" } },
      { node_id: "div", op: "diversify", inputs: ["o"], params: { key: "author", score: "score", decay: 0.5, floor: 0.25 } },
      { node_id: "t", op: "take", inputs: ["div"], params: { count: { param: "limit" } } },
    ],
    expr_table: {
      e0: { op: "+", args: [
        { op: "*", args: [{ op: "log1p", args: [{ key: "likes" }] }, { param: "weight" }] },
        { op: "coalesce", args: [{ key: "quality" }, { const: 0 }] }] },
    },
    pred_table: {
      p0: { op: "and", args: [
        { op: "cmp", cmp: "==", lhs: { key: "nsfw" }, rhs: { const: 0 } },
        { op: "cmp", cmp: ">=", lhs: { key: "score" }, rhs: { const: 0.1 } }] },
    },
    output: { node: "t", columns: ["id", "score", "author"] },
  };
  assert.deepEqual(JSON.parse(read("feed")), want);
});

test("feed_quality is feed, its fan-outs scaled under load: the same DAG plus a quality block", () => {
  const { name, description, quality, ...rest } = JSON.parse(read("feed_quality"));
  const { name: _n, description: _d, ...feed } = JSON.parse(read("feed"));
  assert.equal(name, "feed_quality");
  assert.match(description, /bends under load/);
  assert.deepEqual(rest, feed);
  assert.deepEqual(quality, {
    target_p95_ms: 60,
    min: 0.3,
    scale: [{ node: "f", param: "fanout" }, { node: "r", param: "fanout" }, { node: "m", param: "per_author" }],
  });
  assert.match(read("feed_quality"), /"target_p95_ms": 60\.0,\n {4}"min": 0\.3,/);
  // Only feed_quality has one.
  for (const n of planNames().filter((n) => n !== "feed_quality")) assert.doesNotMatch(read(n), /"quality": \{/, n);
});

test("fixed_rank and fixed_simple have the agreed shape", () => {
  const r = JSON.parse(read("fixed_rank", TEST_PLANS));
  assert.deepEqual(r.nodes.map((n: any) => [n.op, n.params]), [
    ["fixed_source", { count: 100 }],
    ["vm", { out_key: "score", expr: "e0" }],
    ["sort", { key: "score", order: "desc" }],
    ["take", { count: 20 }],
  ]);
  assert.deepEqual(r.output.columns, ["id", "score"]);
  const s = JSON.parse(read("fixed_simple", TEST_PLANS));
  assert.deepEqual(s.nodes.map((n: any) => [n.op, n.params]), [["fixed_source", { count: 10 }], ["take", { count: 5 }]]);
});

test("rerank is two-phase: cheap score, take k, model features, model, take limit", () => {
  const r = JSON.parse(read("rerank"));
  assert.deepEqual(r.params, {
    k: { type: "i64", default: 200, min: 1, max: 1000 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
  });
  const tail = r.nodes.slice(-7).map((n: any) => [n.op, n.params]);
  assert.deepEqual(tail, [
    ["vm", { out_key: "prescore", expr: "e0" }],
    ["sort", { key: "prescore", order: "desc" }],
    ["take", { count: { param: "k" } }],
    ["features", { endpoint: "redis_default", cache: true, fields: ["age_s", "nsfw"] }],
    ["model", { model: "rerank", out_key: "score", output: "default" }],
    ["sort", { key: "score", order: "desc" }],
    ["take", { count: { param: "limit" } }],
  ]);
  assert.ok(fs.existsSync(path.join(ROOT, "rerank.model.json")), "the demo model is committed next to the plan");
});

test("the feeds cache the shared reads (media, features), not the per-viewer ones nor counters", () => {
  const io = ["viewer", "follow", "recommendation", "media", "features"];
  const feeds = ["feed", "feed_quality", "home_light", "rerank", "rerank_nn", "for_you", "discover"];
  for (const name of feeds) {
    const got = JSON.parse(read(name))
      .nodes.filter((n: any) => io.includes(n.op))
      .map((n: any) => [n.op, n.params.cache, n.params.family]);
    const shared = (op: string, family?: string) => op === "media" || (op === "features" && family !== "item_counts");
    const want = got.map(([op, , family]: [string, unknown, string?]) => [op, shared(op, family) ? true : undefined, family]);
    assert.deepEqual(got, want, name);
    assert.ok(got.some(([op]: [string]) => op === "media") && got.some(([op]: [string]) => op === "features"), name);
  }
  // The other plans are as they were before `cache` existed.
  for (const name of planNames().filter((n) => !feeds.includes(n)))
    assert.doesNotMatch(read(name), /"cache"/, name);
});

test("check fails, naming the file, when a JSON differs or is missing or has no source", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-check-"));
  try {
    const run = (...a: string[]) => spawnSync(process.execPath, [CLI, ...a], { encoding: "utf8" });
    fs.writeFileSync(path.join(dir, "simple_viewer.plan.json"), read("simple_viewer"));
    assert.equal(run("check", "--json-dir", dir, "simple_viewer").status, 0);
    fs.writeFileSync(path.join(dir, "simple_viewer.plan.json"), read("simple_viewer").replace('"node_id": "viewer"', '"node_id": "v"'));
    const differs = run("check", "--json-dir", dir, "simple_viewer");
    assert.equal(differs.status, 1);
    assert.match(differs.stderr, /simple_viewer\.plan\.json: differs from what simple_viewer\.plan\.ts compiles to/);
    const missing = run("check", "--json-dir", dir, "viewer_filter");
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /viewer_filter\.plan\.json: missing/);
    fs.writeFileSync(path.join(dir, "orphan.plan.json"), "{}\n");
    const all = run("check", "--json-dir", dir);
    assert.equal(all.status, 1);
    assert.match(all.stderr, /orphan\.plan\.json: has no orphan\.plan\.ts source/);
    const built = run("build", "--json-dir", dir, "simple_viewer");
    assert.equal(built.status, 0);
    assert.equal(fs.readFileSync(path.join(dir, "simple_viewer.plan.json"), "utf8"), read("simple_viewer"));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("the test fixtures of tests/plans match their sources (cli check --dir)", () => {
  const r = spawnSync(process.execPath, [CLI, "check", "--dir", TEST_PLANS], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /ok: 4 plans of \S*tests\/plans\S* match their sources/);
});

test("the plans folders of examples/ match their sources (cli check --examples)", () => {
  const r = spawnSync(process.execPath, [CLI, "check", "--examples"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /ok: 1 plans of \S*examples\/marketplace\/plans\S* match their sources/);
  assert.match(r.stdout, /ok: 1 plans of \S*examples\/marketplace\/i64\S* match their sources/);
});

test("the marketplace's i64 twin is the same plan: the same JSON over another schema", () => {
  const ex = path.resolve(ROOT, "..", "examples", "marketplace");
  const native = fs.readFileSync(path.join(ex, "plans", "market.plan.json"), "utf8");
  assert.equal(fs.readFileSync(path.join(ex, "i64", "market.plan.json"), "utf8"), native);
  const src = (d: string) => fs.readFileSync(path.join(ex, d, "market.plan.ts"), "utf8").replace(/^(\/\/.*\n)+/, "");
  assert.equal(src("i64"), src("plans"));
  const schemas = ["plans", "i64"].map((d) => JSON.parse(fs.readFileSync(path.join(ex, d, "schema.json"), "utf8")).families);
  assert.deepEqual(Object.keys(schemas[0]), Object.keys(schemas[1]));
});

test("a plan typed with another schema than its folder's fails check, naming the fix", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-other-"));
  try {
    fs.writeFileSync(path.join(dir, "schema.json"), JSON.stringify({ schema_version: 1, families: { user: { type: "hash", key: "u:{id}", fields: { a: "i64" } } } }));
    const lib = path.relative(dir, path.join(ROOT, "lib", "index.js")).split(path.sep).join("/");
    fs.writeFileSync(path.join(dir, "p.plan.ts"), `import { definePlan } from "${lib}";\nexport default definePlan({ name: "p", build: (c) => c.fixedSource() });\n`);
    const r = spawnSync(process.execPath, [CLI, "build", "--dir", dir], { encoding: "utf8" });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /p\.plan\.ts: error: the plan is typed with another schema than this folder's schema\.json; import definePlan from "\.\/schema\.gen\.js"/);
    fs.writeFileSync(path.join(dir, "p.plan.ts"), `import { definePlan } from "./schema.gen.js";\nexport default definePlan({ name: "p", build: (c) => c.viewer().vm({ outKey: "b", expr: (r) => r.a.add(1) }) });\n`);
    const ok = spawnSync(process.execPath, [CLI, "build", "--dir", dir], { encoding: "utf8" });
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, "p.plan.json"), "utf8")).nodes[0].params, { endpoint: "redis_default" });
    fs.writeFileSync(path.join(dir, "p.plan.ts"), `import { definePlan } from "./schema.gen.js";\nexport default definePlan({ name: "p", build: (c) => c.viewer({ fields: ["b"] }) });\n`);
    const bad = spawnSync(process.execPath, [CLI, "build", "--dir", dir], { encoding: "utf8" });
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /tsc failed:[\s\S]*p\.plan\.ts\(2,\d+\): error TS2322: Type '"b"' is not assignable/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
