// definePlan's `log` option (served-item logging, docs/plan.md "log"): its JSON, and the
// compiler's checks of what the plan shows (sample, sink name, columns of the output node,
// the candidates node); a plan without `log` compiles as before.
import { test } from "node:test";
import assert from "node:assert/strict";
import { definePlan, planText, PlanError, type Ctx, type LogSpec, type Node, type Output } from "../lib/index.js";

type J = any;
/** fixed_source → vm "bonus" → sort → take "top_k" → output [id, score]. */
const ranked = (c: Ctx) =>
  c.fixedSource({ count: 50 })
    .vm({ outKey: "bonus", expr: "score * 2.0" })
    .sort({ key: "score", order: "desc" })
    .take({ id: "top_k", count: 10 });
const withOutput = (c: Ctx) => ranked(c).output(["id", "score"]);

function compile(log: unknown, build: (c: Ctx) => Node<any> | Output<any> = withOutput): J {
  return JSON.parse(planText(definePlan({ name: "t", build, log: log as LogSpec })));
}
function compileErr(log: unknown, build: (c: Ctx) => Node<any> | Output<any> = withOutput): string {
  try {
    compile(log, build);
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    assert.match(e.message, /^plan 't': definePlan at test\/log\.test\.ts:\d+:\d+: /);
    return e.message;
  }
  assert.fail("compiled without error");
}

test("log is the last top-level key, with every field given", () => {
  const p = compile({ sample: 0.01, sink: "main", columns: ["id", "score", "bonus"], candidates: { node: "top_k", top: 20 } });
  assert.deepEqual(Object.keys(p), ["schema_version", "name", "params", "nodes", "expr_table", "pred_table", "output", "log"]);
  assert.deepEqual(p.log, { sample: 0.01, sink: "main", columns: ["id", "score", "bonus"], candidates: { node: "top_k", top: 20 } });
});

test("sample defaults to 0 and is written as a double; columns and candidates only when given", () => {
  const text = planText(definePlan({ name: "t", build: withOutput, log: { sink: "main" } }));
  assert.match(text, /"log": \{\n {4}"sample": 0\.0,\n {4}"sink": "main"\n {2}\}\n\}\n$/);
  assert.match(planText(definePlan({ name: "t", build: withOutput, log: { sample: 1, sink: "a.b-c_9" } })), /"sample": 1\.0,/);
});

test("candidates may name any node, by its explicit or derived id", () => {
  assert.deepEqual(compile({ sink: "s", candidates: { node: "sort", top: 10000 } }).log.candidates, { node: "sort", top: 10000 });
  assert.deepEqual(compile({ sink: "s", candidates: { node: "fixed_source", top: 1 } }).log.candidates, { node: "fixed_source", top: 1 });
});

test("logged columns are the output node's, not only the response's", () => {
  // `bonus` is a column of top_k that output() leaves out of the response: it may be logged.
  assert.deepEqual(compile({ sink: "s", columns: ["bonus"] }).log.columns, ["bonus"]);
  // Without output(), the output node's columns are all there are.
  assert.deepEqual(compile({ sink: "s", columns: ["score", "id"] }, ranked).log.columns, ["score", "id"]);
});

test("a plan without log has no log key: its text is what it was before the option existed", () => {
  const text = planText(definePlan({ name: "t", build: withOutput }));
  assert.doesNotMatch(text, /"log"/);
  assert.equal(text, planText(definePlan({ name: "t", build: withOutput, log: undefined })));
});

const cases: [string, unknown, RegExp][] = [
  // sample
  ["sample above 1", { sample: 1.5, sink: "s" }, /log\.sample 1\.5 is out of bounds 0\.\.1/],
  ["sample negative", { sample: -0.1, sink: "s" }, /log\.sample -0\.1 is out of bounds 0\.\.1/],
  ["sample not a number", { sample: "0.1", sink: "s" }, /log\.sample must be a number 0\.\.1 \(the share of requests logged\), got "0\.1"/],
  ["sample NaN", { sample: NaN, sink: "s" }, /log\.sample must be a number 0\.\.1/],
  ["sample null", { sample: null, sink: "s" }, /log\.sample must be a number 0\.\.1 .*got null/],
  // sink
  ["sink missing", { sample: 0.1 }, /log\.sink is required: the name of a sink the server is started with/],
  ["sink empty", { sink: "" }, /log\.sink must be a sink name \(1\.\.64 letters, digits, _, \. or -\), got ""/],
  ["sink with a slash", { sink: "a/b" }, /log\.sink must be a sink name .*got "a\/b"/],
  ["sink too long", { sink: "s".repeat(65) }, /log\.sink must be a sink name/],
  ["sink not a string", { sink: 1 }, /log\.sink must be a sink name .*got 1/],
  // columns
  ["columns empty", { sink: "s", columns: [] }, /log\.columns must be a non-empty list of columns \(columns of the output node 'top_k': id, score, bonus\)/],
  ["columns not a list", { sink: "s", columns: "id" }, /log\.columns must be a non-empty list/],
  ["columns unknown", { sink: "s", columns: ["id", "likes"] }, /log\.columns: unknown column 'likes' \(columns of the output node 'top_k': id, score, bonus\)/],
  ["columns empty name", { sink: "s", columns: [""] }, /log\.columns: "" is not a column name/],
  ["columns twice", { sink: "s", columns: ["id", "id"] }, /log\.columns: 'id' is listed twice/],
  // candidates
  ["candidates unknown node", { sink: "s", candidates: { node: "topk", top: 5 } }, /log\.candidates\.node: unknown node 'topk' \(nodes: fixed_source, vm, sort, top_k\)/],
  ["candidates node missing", { sink: "s", candidates: { top: 5 } }, /log\.candidates\.node must be a node id, got undefined/],
  ["candidates top 0", { sink: "s", candidates: { node: "top_k", top: 0 } }, /log\.candidates\.top 0 is out of bounds 1\.\.10000/],
  ["candidates top 10001", { sink: "s", candidates: { node: "top_k", top: 10001 } }, /log\.candidates\.top 10001 is out of bounds 1\.\.10000/],
  ["candidates top fractional", { sink: "s", candidates: { node: "top_k", top: 2.5 } }, /log\.candidates\.top must be an integer 1\.\.10000, got 2\.5/],
  ["candidates top missing", { sink: "s", candidates: { node: "top_k" } }, /log\.candidates\.top must be an integer 1\.\.10000, got undefined/],
  ["candidates unknown field", { sink: "s", candidates: { node: "top_k", top: 5, served: true } }, /log\.candidates: unknown field 'served' \(allowed: node, top\)/],
  ["candidates not an object", { sink: "s", candidates: "top_k" }, /log\.candidates must be an object \{node, top\}/],
  // the object itself
  ["unknown field", { sink: "s", rate: 0.1 }, /log: unknown field 'rate' \(allowed: sample, sink, columns, candidates\)/],
  ["not an object", "main", /log must be an object \{sample\?, sink, columns\?, candidates\?\}, got "main"/],
  ["null", null, /log must be an object/],
];

for (const [name, log, want] of cases) {
  test(`log error: ${name}`, () => {
    assert.match(compileErr(log), want);
  });
}
