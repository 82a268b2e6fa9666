// definePlan's `quality` option (work that bends under load, docs/plan.md "quality"): its
// JSON, and the compiler's checks of what the plan shows (the target's and min's bounds,
// each scaled param a node id of the plan and an integer param of its op, in the DSL's
// spelling, no pair twice); a plan without `quality` compiles as before.
import { test } from "node:test";
import assert from "node:assert/strict";
import { definePlan, planText, PlanError, type Ctx, type Node, type Output, type QualitySpec } from "../lib/index.js";

type J = any;
/** viewer "v" → follow "f" → media "m"; viewer → recommendation "r" (fanout: the request's
 *  `n`); concat → features "h" → cap "k" → take "t" (count: the request's `limit`). */
const feed = (c: Ctx, P: any) => {
  const v = c.viewer({ id: "v" });
  const m = v.follow({ id: "f", fanout: 50 }).media({ id: "m", perAuthor: 5 });
  const r = v.recommendation({ id: "r", fanout: P.n });
  return m
    .concat(r, { id: "c" })
    .features({ id: "h", fields: ["likes", "author"] })
    .cap({ id: "k", key: "author", max: 2, window: 10 })
    .take({ id: "t", count: P.limit })
    .output(["id", "likes"]);
};
const params = {
  n: { type: "i64", default: 100, min: 1, max: 1000 },
  limit: { type: "i64", default: 20, min: 1, max: 500 },
} as const;
type Build = (c: Ctx, P: any) => Node<any> | Output<any>;

function plan(quality: unknown, build: Build = feed, log?: unknown) {
  return definePlan({ name: "t", params, build, quality: quality as QualitySpec, ...(log ? { log: log as never } : {}) });
}
function compile(quality: unknown, build: Build = feed, log?: unknown): J {
  return JSON.parse(planText(plan(quality, build, log)));
}
function compileErr(quality: unknown, build: Build = feed): string {
  try {
    compile(quality, build);
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    assert.match(e.message, /^plan 't': definePlan at test\/quality\.test\.ts:\d+:\d+: /);
    return e.message;
  }
  assert.fail("compiled without error");
}

test("quality is the last top-level key, after log, with the JSON names of the params", () => {
  const p = compile(
    { targetP95Ms: 60, min: 0.25, scale: [{ node: "f", param: "fanout" }, { node: "m", param: "perAuthor" }, { node: "r", param: "fanout" }] },
    feed,
    { sink: "main" },
  );
  assert.deepEqual(Object.keys(p), ["schema_version", "name", "params", "nodes", "expr_table", "pred_table", "output", "log", "quality"]);
  assert.deepEqual(p.quality, {
    target_p95_ms: 60,
    min: 0.25,
    scale: [{ node: "f", param: "fanout" }, { node: "m", param: "per_author" }, { node: "r", param: "fanout" }],
  });
  // Without log, quality follows output.
  assert.deepEqual(Object.keys(compile({ targetP95Ms: 60, scale: [{ node: "f", param: "fanout" }] })).slice(-2), ["output", "quality"]);
});

test("min defaults to 0.3; the target and min are written as doubles", () => {
  const text = planText(plan({ targetP95Ms: 60, scale: [{ node: "f", param: "fanout" }] }));
  assert.match(
    text,
    /\n {2}"quality": \{\n {4}"target_p95_ms": 60\.0,\n {4}"min": 0\.3,\n {4}"scale": \[\n {6}\{\n {8}"node": "f",\n {8}"param": "fanout"\n {6}\}\n {4}\]\n {2}\}\n\}\n$/,
  );
  assert.match(planText(plan({ targetP95Ms: 12.5, min: 1, scale: [{ node: "f", param: "fanout" }] })), /"target_p95_ms": 12\.5,\n {4}"min": 1\.0,/);
});

test("the bounds are inclusive: targetP95Ms 1..60000, min 0.01..1", () => {
  const s = [{ node: "t", param: "count" }];
  assert.equal(compile({ targetP95Ms: 1, min: 0.01, scale: s }).quality.target_p95_ms, 1);
  assert.equal(compile({ targetP95Ms: 1, min: 0.01, scale: s }).quality.min, 0.01);
  assert.equal(compile({ targetP95Ms: 60000, min: 1, scale: s }).quality.target_p95_ms, 60000);
});

test("every integer param of every op may be scaled, literal or a request param", () => {
  // cap's max and window, take's count given as {param: limit}, recommendation's as {param: n}.
  const scale = [
    { node: "k", param: "max" },
    { node: "k", param: "window" },
    { node: "t", param: "count" },
    { node: "r", param: "fanout" },
  ];
  assert.deepEqual(compile({ targetP95Ms: 100, scale }).quality.scale, scale);
  // The test ops: fixed_source's count, sleep's and busy_cpu's duration_ms; derived node ids.
  const testOps: Build = (c) => c.fixedSource({ count: 5 }).sleep({ durationMs: 3 }).busyCpu({ durationMs: 2 });
  assert.deepEqual(
    compile({ targetP95Ms: 100, scale: [{ node: "fixed_source", param: "count" }, { node: "sleep", param: "durationMs" }, { node: "busy_cpu", param: "durationMs" }] }, testOps).quality.scale,
    [{ node: "fixed_source", param: "count" }, { node: "sleep", param: "duration_ms" }, { node: "busy_cpu", param: "duration_ms" }],
  );
  // Defaults are written, so a param the node was not given may be scaled too (follow's fanout d 100).
  const dflt: Build = (c) => c.viewer().follow().media();
  const p = compile({ targetP95Ms: 100, scale: [{ node: "follow", param: "fanout" }, { node: "media", param: "perAuthor" }] }, dflt);
  assert.equal(p.nodes[1].params.fanout, 100);
  assert.deepEqual(p.quality.scale, [{ node: "follow", param: "fanout" }, { node: "media", param: "per_author" }]);
});

test("the same param of two nodes, or two params of one node, are distinct pairs", () => {
  const scale = [{ node: "f", param: "fanout" }, { node: "r", param: "fanout" }, { node: "k", param: "max" }, { node: "k", param: "window" }];
  assert.equal(compile({ targetP95Ms: 60, scale }).quality.scale.length, 4);
});

test("a plan without quality has no quality key: its text is what it was before the option existed", () => {
  const text = planText(definePlan({ name: "t", params, build: feed }));
  assert.doesNotMatch(text, /"quality": \{/);
  assert.equal(text, planText(definePlan({ name: "t", params, build: feed, quality: undefined })));
});

const F = [{ node: "f", param: "fanout" }];
const cases: [string, unknown, RegExp][] = [
  // the object itself
  ["not an object", 60, /quality must be an object \{targetP95Ms, min\?, scale\}, got 60/],
  ["null", null, /quality must be an object .*got null/],
  ["a list", [F], /quality must be an object/],
  ["unknown field", { targetP95Ms: 60, scale: F, max: 1 }, /quality: unknown field 'max' \(allowed: targetP95Ms, min, scale\)$/],
  ["the JSON name of the target", { target_p95_ms: 60, scale: F }, /quality: unknown field 'target_p95_ms' \(allowed: targetP95Ms, min, scale; the DSL writes it targetP95Ms\)/],
  // targetP95Ms
  ["target missing", { scale: F }, /quality\.targetP95Ms is required: the plan's p95 latency target in milliseconds, 1\.\.60000/],
  ["target 0", { targetP95Ms: 0, scale: F }, /quality\.targetP95Ms 0 is out of bounds 1\.\.60000 \(milliseconds\)/],
  ["target 0.5", { targetP95Ms: 0.5, scale: F }, /quality\.targetP95Ms 0\.5 is out of bounds 1\.\.60000/],
  ["target 60001", { targetP95Ms: 60001, scale: F }, /quality\.targetP95Ms 60001 is out of bounds 1\.\.60000/],
  ["target a string", { targetP95Ms: "60", scale: F }, /quality\.targetP95Ms must be a number 1\.\.60000 \(milliseconds\), got "60"/],
  ["target NaN", { targetP95Ms: NaN, scale: F }, /quality\.targetP95Ms must be a number 1\.\.60000/],
  ["target Infinity", { targetP95Ms: Infinity, scale: F }, /quality\.targetP95Ms must be a number 1\.\.60000/],
  // min
  ["min 0", { targetP95Ms: 60, min: 0, scale: F }, /quality\.min 0 is out of bounds 0\.01\.\.1 \(the lowest quality factor\)/],
  ["min 0.009", { targetP95Ms: 60, min: 0.009, scale: F }, /quality\.min 0\.009 is out of bounds 0\.01\.\.1/],
  ["min 1.5", { targetP95Ms: 60, min: 1.5, scale: F }, /quality\.min 1\.5 is out of bounds 0\.01\.\.1/],
  ["min negative", { targetP95Ms: 60, min: -0.3, scale: F }, /quality\.min -0\.3 is out of bounds 0\.01\.\.1/],
  ["min a string", { targetP95Ms: 60, min: "0.3", scale: F }, /quality\.min must be a number 0\.01\.\.1 \(the lowest quality factor\), got "0\.3"/],
  ["min null", { targetP95Ms: 60, min: null, scale: F }, /quality\.min must be a number 0\.01\.\.1 .*got null/],
  // scale
  ["scale missing", { targetP95Ms: 60 }, /quality\.scale must be a non-empty list of \{node, param\}, got undefined \(nodes: v, f, m, r, c, h, k, t\)/],
  ["scale empty", { targetP95Ms: 60, scale: [] }, /quality\.scale must be a non-empty list of \{node, param\}, got \[\]/],
  ["scale an object", { targetP95Ms: 60, scale: F[0] }, /quality\.scale must be a non-empty list/],
  ["entry not an object", { targetP95Ms: 60, scale: [...F, "r"] }, /quality\.scale\[1\] must be an object \{node, param\}, got "r"/],
  ["entry unknown field", { targetP95Ms: 60, scale: [{ node: "f", param: "fanout", factor: 2 }] }, /quality\.scale\[0\]: unknown field 'factor' \(allowed: node, param\)/],
  ["node missing", { targetP95Ms: 60, scale: [{ param: "fanout" }] }, /quality\.scale\[0\]\.node must be a node id, got undefined \(nodes: v, f, m, r, c, h, k, t\)/],
  ["unknown node", { targetP95Ms: 60, scale: [...F, { node: "follow", param: "fanout" }] }, /quality\.scale\[1\]\.node: unknown node 'follow' \(nodes: v, f, m, r, c, h, k, t\)/],
  ["param missing", { targetP95Ms: 60, scale: [{ node: "f" }] }, /quality\.scale\[0\]\.param must be an integer param of node 'f', got undefined \(integer params of follow: fanout\)/],
  ["param of another op", { targetP95Ms: 60, scale: [{ node: "f", param: "perAuthor" }] }, /quality\.scale\[0\]\.param: node 'f' has no integer param 'perAuthor' \(integer params of follow: fanout\)/],
  ["param not an integer param", { targetP95Ms: 60, scale: [{ node: "k", param: "key" }] }, /quality\.scale\[0\]\.param: node 'k' has no integer param 'key' \(integer params of cap: max, window\)/],
  ["node without integer params", { targetP95Ms: 60, scale: [{ node: "h", param: "fields" }] }, /quality\.scale\[0\]\.param: node 'h' has no integer param 'fields' \(features has no integer param\)/],
  ["param in the JSON's spelling", { targetP95Ms: 60, scale: [{ node: "m", param: "per_author" }] }, /quality\.scale\[0\]\.param: 'per_author' is the JSON name; the DSL writes it perAuthor/],
  ["a pair listed twice", { targetP95Ms: 60, scale: [...F, { node: "r", param: "fanout" }, { node: "f", param: "fanout" }] }, /quality\.scale\[2\]: node 'f' param 'fanout' is listed twice/],
];

for (const [name, quality, want] of cases) {
  test(`quality error: ${name}`, () => {
    assert.match(compileErr(quality), want);
  });
}

test("quality error: the JSON spelling of a test op's param", () => {
  const testOps: Build = (c) => c.fixedSource().sleep({ durationMs: 1 });
  assert.match(compileErr({ targetP95Ms: 60, scale: [{ node: "sleep", param: "duration_ms" }] }, testOps), /'duration_ms' is the JSON name; the DSL writes it durationMs/);
});
