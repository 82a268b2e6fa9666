// The op catalogue in the DSL (plans/ops.json → lib/ops.gen.ts): the hand-written methods take
// their defaults and bounds from it, and an op without one gets a generated method (normalize):
// its options written under their JSON names, checked as the catalogue says, its column added.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ctx, Node, definePlan, planText, PlanError } from "../lib/index.js";
import { GENERATED_METHODS, OPS } from "../lib/ops.gen.js";

type J = any;
const params = { k: { type: "f64", default: 10, min: 0, max: 100 }, n: { type: "i64", default: 5 } } as const;

function compile(build: (c: Ctx, P: any) => any): J {
  return JSON.parse(planText(definePlan({ name: "t", params, build })));
}
function compileErr(build: (c: Ctx, P: any) => any): string {
  try {
    compile(build);
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    return e.message;
  }
  assert.fail("compiled");
}
const hydrated = (c: Ctx) => c.viewer().follow().features({ fields: ["likes", "category", "quality"] });

test("every op of the catalogue has a DSL method (hand-written or generated)", () => {
  const methods = new Set([...Object.getOwnPropertyNames(Node.prototype), ...Object.getOwnPropertyNames(Ctx.prototype)]);
  for (const op of Object.keys(OPS)) {
    const name = op.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    assert.ok(methods.has(name), `op '${op}' has no method '${name}'`);
  }
});

test("the catalogue's defaults and bounds reach the hand-written methods", () => {
  assert.equal(OPS.follow.params.fanout.default, 100);
  assert.match(compileErr((c) => c.viewer().follow({ fanout: 1001 })), /fanout 1001 is out of bounds 1\.\.1000/);
  assert.match(compileErr((c) => c.viewer().follow().take({ count: 0 })), /count 0 is out of bounds 1\.\.10000/);
});

test("normalize: a generated method writes the options given and adds out_key f64", () => {
  assert.equal(GENERATED_METHODS.normalize, "normalize");
  const plan = compile((c, P) =>
    hydrated(c)
      .normalize({ key: "likes", outKey: "likes_n", method: "zscore" })
      .normalize({ id: "rr", key: "quality", outKey: "q", method: "reciprocal_rank", k: P.k })
      .sort({ key: "likes_n", order: "desc" })
      .output(["id", "likes_n", "q"]),
  );
  const n = plan.nodes.find((x: J) => x.op === "normalize");
  assert.deepEqual(n.params, { key: "likes", out_key: "likes_n", method: "zscore" });
  assert.deepEqual(plan.nodes.find((x: J) => x.node_id === "rr").params, { key: "quality", out_key: "q", method: "reciprocal_rank", k: { param: "k" } });
});

test("normalize: the catalogue's checks", () => {
  const bad = (o: J) => compileErr((c, P) => (hydrated(c) as J).normalize(typeof o === "function" ? o(P) : o));
  assert.match(bad({ key: "category", outKey: "x", method: "rank" }), /key: column 'category' is str; normalize takes an i64 or f64 or bool column/);
  assert.match(bad({ key: "nope", outKey: "x", method: "rank" }), /key: unknown column 'nope'/);
  assert.match(bad({ key: "likes", outKey: "x", method: "max" }), /method must be one of "minmax", "zscore", "rank", "reciprocal_rank"/);
  assert.match(bad({ key: "likes", outKey: "id", method: "rank" }), /outKey: normalize may not replace the id column/);
  assert.match(bad({ key: "likes", method: "rank" }), /outKey is required/);
  assert.match(bad({ key: "likes", outKey: "x", method: "rank", k: -1 }), /k -1 is out of bounds 0\.\.1000000000/);
  assert.match(bad((P: J) => ({ key: "likes", outKey: "x", method: "rank", k: P.n })), /parameter 'n' is i64; k needs an f64/);
  assert.match(bad({ key: "likes", outKey: "x", method: "rank", scale: 2 }), /unknown option 'scale'/);
});
