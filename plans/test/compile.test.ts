// The JSON each construct of the DSL compiles to (the forms of docs/plan.md).
import { test } from "node:test";
import assert from "node:assert/strict";
import { definePlan, planText, E, Pred, EP, parseExpr, parsePred, type Ctx, type Node, type Output, type ParamDecls, type ParamRefs } from "../lib/index.js";

type J = any;
function plan<const Ps extends ParamDecls = {}>(build: (ctx: Ctx, P: ParamRefs<Ps>) => Node<any> | Output<any>, params?: Ps): J {
  return JSON.parse(planText(definePlan({ name: "t", params, build })));
}
const node = (p: J, id: string) => p.nodes.find((n: J) => n.node_id === id);

test("plan header, params and default output", () => {
  const p = plan((c) => c.fixedSource(), {
    i: { type: "i64", default: 3, min: 1, max: 9 },
    f: { type: "f64", default: 1, min: 0, max: 2.5 },
    s: { type: "str", default: "US" },
    b: { type: "bool", default: true },
  });
  assert.deepEqual(Object.keys(p), ["schema_version", "name", "params", "nodes", "expr_table", "pred_table", "output"]);
  assert.equal(p.schema_version, 1);
  assert.deepEqual(p.params, {
    i: { type: "i64", default: 3, min: 1, max: 9 },
    f: { type: "f64", default: 1, min: 0, max: 2.5 },
    s: { type: "str", default: "US" },
    b: { type: "bool", default: true },
  });
  assert.deepEqual(p.output, { node: "fixed_source" });
});

test("f64 values that are integral are written as doubles", () => {
  const text = planText(
    definePlan({
      name: "t",
      params: { f: { type: "f64", default: 1, max: 3 } },
      build: (c) => c.fixedSource().vm({ outKey: "x", expr: (r) => r.score.mul(E.f64(2), 2) }),
    }),
  );
  assert.match(text, /"default": 1\.0,/);
  assert.match(text, /"max": 3\.0\n/);
  assert.match(text, /"const": 2\.0\n[\s\S]*"const": 2\n/);
});

test("every task and its params, with defaults filled in", () => {
  const p = plan((c) => {
    const v = c.viewer();
    const f = v.follow();
    const r = v.recommendation({ fanout: 7, endpoint: EP.redis.redis_default });
    const m = f.media();
    const x = m.concat(r).dedupe().seenFilter().features({ fields: ["likes", "category"] });
    const s = c.sleep({ durationMs: 5, failAfterSleep: true });
    const b = c.busyCpu({ durationMs: 3 });
    const chain = x.sleep({ durationMs: 1 }).busyCpu({ durationMs: 2 }).sort({ key: "likes", order: "asc" }).take({ count: 3 });
    return c.concat([chain, s, b, c.fixedSource({ count: 0 })]);
  });
  const ops = p.nodes.map((n: J) => [n.node_id, n.op, n.inputs, n.params]);
  assert.deepEqual(ops, [
    ["viewer", "viewer", [], { endpoint: "redis_default" }],
    ["follow", "follow", ["viewer"], { endpoint: "redis_default", fanout: 100 }],
    ["recommendation", "recommendation", ["viewer"], { endpoint: "redis_default", fanout: 7 }],
    ["media", "media", ["follow"], { endpoint: "redis_default", per_author: 10 }],
    ["concat", "concat", ["media", "recommendation"], {}],
    ["dedupe", "dedupe", ["concat"], { key: "id" }],
    ["seen_filter", "seen_filter", ["dedupe"], { endpoint: "redis_default" }],
    ["features", "features", ["seen_filter"], { endpoint: "redis_default", fields: ["likes", "category"] }],
    ["sleep", "sleep", [], { duration_ms: 5, fail_after_sleep: true }],
    ["busy_cpu", "busy_cpu", [], { duration_ms: 3 }],
    ["sleep_2", "sleep", ["features"], { duration_ms: 1, fail_after_sleep: false }],
    ["busy_cpu_2", "busy_cpu", ["sleep_2"], { duration_ms: 2 }],
    ["sort", "sort", ["busy_cpu_2"], { key: "likes", order: "asc" }],
    ["take", "take", ["sort"], { count: 3 }],
    ["fixed_source", "fixed_source", [], { count: 0 }],
    ["concat_2", "concat", ["take", "sleep", "busy_cpu", "fixed_source"], {}],
  ]);
});

test("diversify and cap: params with defaults filled in, out_key only when given", () => {
  const p = plan(
    (c, P) => {
      const items = c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" });
      return items
        .diversify({ key: "author", score: "s" })
        .diversify({ id: "d2", key: "author", score: "s", outKey: "div", decay: P.d, floor: 1 })
        .cap({ key: "author", max: 2, window: P.w })
        .cap({ id: "c2", key: "author", max: 1, window: 1, defer: true });
    },
    { d: { type: "f64", default: 0.3, min: 0, max: 1 }, w: { type: "i64", default: 10, min: 1, max: 100 } },
  );
  assert.deepEqual(node(p, "diversify").params, { key: "author", score: "s", decay: 0.5, floor: 0.25 });
  assert.deepEqual(node(p, "d2").params, { key: "author", score: "s", out_key: "div", decay: { param: "d" }, floor: 1 });
  assert.deepEqual(node(p, "cap").params, { key: "author", max: 2, window: { param: "w" }, defer: false });
  assert.deepEqual(node(p, "c2").params, { key: "author", max: 1, window: 1, defer: true });
  assert.deepEqual(node(p, "c2").inputs, ["cap"]);
});

test("diversify's f64 options are written as doubles", () => {
  const text = planText(definePlan({ name: "t", build: (c) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: 1, floor: 0 }) }));
  assert.match(text, /"decay": 1\.0,\n\s*"floor": 0\.0\n/);
});

test("node options: id, optional, timeout_ms", () => {
  const p = plan((c) => c.viewer({ id: "v" }).follow({ optional: true, timeoutMs: 25 }).take({ count: 1, id: "follow_done", optional: false }));
  assert.deepEqual(node(p, "follow"), { node_id: "follow", op: "follow", inputs: ["v"], params: { endpoint: "redis_default", fanout: 100 }, optional: true, timeout_ms: 25 });
  assert.equal(node(p, "follow_done").optional, false);
});

test("cache on the IO ops: written only when given, after endpoint", () => {
  const p = plan((c) => {
    const v = c.viewer({ cache: false });
    const m = v.follow({ cache: true, fanout: 5 }).media({ perAuthor: 3, cache: true });
    const r = v.recommendation({ cache: false, optional: true });
    return m.concat(r).features({ fields: ["likes"], cache: true }).seenFilter().features({ id: "f2", fields: ["quality"] });
  });
  const ops = p.nodes.map((n: J) => [n.node_id, n.params]);
  assert.deepEqual(ops, [
    ["viewer", { endpoint: "redis_default", cache: false }],
    ["follow", { endpoint: "redis_default", cache: true, fanout: 5 }],
    ["media", { endpoint: "redis_default", cache: true, per_author: 3 }],
    ["recommendation", { endpoint: "redis_default", cache: false, fanout: 100 }],
    ["concat", {}],
    ["features", { endpoint: "redis_default", cache: true, fields: ["likes"] }],
    ["seen_filter", { endpoint: "redis_default" }],
    ["f2", { endpoint: "redis_default", fields: ["quality"] }],
  ]);
  assert.deepEqual(Object.keys(node(p, "media").params), ["endpoint", "cache", "per_author"]);
  assert.equal(node(p, "recommendation").optional, true);
  // Without `cache` the text is what it was before the option existed.
  const text = planText(definePlan({ name: "t", build: (c) => c.viewer().follow().media().features({ fields: ["likes"] }) }));
  assert.doesNotMatch(text, /"cache"/);
});

test("explicit ids win over derived ones", () => {
  const p = plan((c) => c.fixedSource().take({ count: 1, id: "fixed_source_x" }).take({ count: 2 }).take({ count: 3, id: "take" }));
  assert.deepEqual(p.nodes.map((n: J) => n.node_id), ["fixed_source", "fixed_source_x", "take_2", "take"]);
});

test("task params may be request params", () => {
  const p = plan(
    (c, P) => c.fixedSource({ count: P.n }).take({ count: P.k }).sleep({ durationMs: P.ms, failAfterSleep: P.fail }),
    { n: { type: "i64", default: 10 }, k: { type: "i64", default: 5, min: 1, max: 10 }, ms: { type: "i64", default: 0 }, fail: { type: "bool", default: false } },
  );
  assert.deepEqual(p.nodes.map((n: J) => n.params), [
    { count: { param: "n" } },
    { count: { param: "k" } },
    { duration_ms: { param: "ms" }, fail_after_sleep: { param: "fail" } },
  ]);
});

test("output columns", () => {
  const p = plan((c) => c.viewer().output(["id", "country"]));
  assert.deepEqual(p.output, { node: "viewer", columns: ["id", "country"] });
});

test("expression forms", () => {
  const cases: [string, (c: any, P: any) => any, J][] = [
    ["const i64", () => E.const(3), { const: 3 }],
    ["const f64", () => E.const(0.25), { const: 0.25 }],
    ["const str", () => E.const("x"), { const: "x" }],
    ["key", (c) => c.likes, { key: "likes" }],
    ["E.key", () => E.key("likes"), { key: "likes" }],
    ["param", (_c, P) => P.w, { param: "w" }],
    ["E.param", () => E.param("w"), { param: "w" }],
    ["+ n-ary", (c) => c.likes.add(1, c.nsfw), { op: "+", args: [{ key: "likes" }, { const: 1 }, { key: "nsfw" }] }],
    ["+ chained is flattened", (c) => c.likes.add(1).add(2), { op: "+", args: [{ key: "likes" }, { const: 1 }, { const: 2 }] }],
    ["- keeps right nesting", (c) => c.likes.sub(E.sub(c.nsfw, 1)), { op: "-", args: [{ key: "likes" }, { op: "-", args: [{ key: "nsfw" }, { const: 1 }] }] }],
    ["*", (c) => E.mul(c.likes, 2), { op: "*", args: [{ key: "likes" }, { const: 2 }] }],
    ["/", (c) => c.likes.div(2), { op: "/", args: [{ key: "likes" }, { const: 2 }] }],
    ["min", (c) => c.quality.min(1), { op: "min", args: [{ key: "quality" }, { const: 1 }] }],
    ["max", (c) => E.max(c.quality, 0, 0.5), { op: "max", args: [{ key: "quality" }, { const: 0 }, { const: 0.5 }] }],
    ["neg", (c) => c.likes.neg(), { op: "neg", args: [{ key: "likes" }] }],
    ["abs", (c) => E.abs(c.likes), { op: "abs", args: [{ key: "likes" }] }],
    ["log", (c) => c.likes.log(), { op: "log", args: [{ key: "likes" }] }],
    ["log1p", (c) => E.log1p(c.likes), { op: "log1p", args: [{ key: "likes" }] }],
    ["exp", (c) => c.quality.exp(), { op: "exp", args: [{ key: "quality" }] }],
    ["sqrt", (c) => E.sqrt(c.likes), { op: "sqrt", args: [{ key: "likes" }] }],
    ["pow", (c) => c.likes.pow(0.5), { op: "pow", args: [{ key: "likes" }, { const: 0.5 }] }],
    ["coalesce", (c) => c.quality.coalesce(0), { op: "coalesce", args: [{ key: "quality" }, { const: 0 }] }],
    ["coalesce str", (c) => E.coalesce(c.category, "none"), { op: "coalesce", args: [{ key: "category" }, { const: "none" }] }],
    ["if", (c) => E.if(c.nsfw.eq(1), 0, c.quality), {
      op: "if",
      args: [{ op: "cmp", cmp: "==", lhs: { key: "nsfw" }, rhs: { const: 1 } }, { const: 0 }, { key: "quality" }],
    }],
  ];
  for (const [name, f, want] of cases) {
    const p = plan(
      (c, P) => c.fixedSource().features({ fields: ["likes", "quality", "nsfw", "category"] }).vm({ outKey: "x", expr: (r) => f(r, P) }),
      { w: { type: "f64", default: 1.5 } },
    );
    assert.deepEqual(p.expr_table, { e0: want }, name);
  }
});

test("predicate forms", () => {
  const cmp = (op: string, rhs: J) => ({ op: "cmp", cmp: op, lhs: { key: "likes" }, rhs });
  const cases: [string, (c: any) => Pred, J][] = [
    ["==", (c) => c.likes.eq(1), cmp("==", { const: 1 })],
    ["!=", (c) => c.likes.ne(1), cmp("!=", { const: 1 })],
    ["<", (c) => c.likes.lt(1), cmp("<", { const: 1 })],
    ["<=", (c) => c.likes.le(1), cmp("<=", { const: 1 })],
    [">", (c) => c.likes.gt(1), cmp(">", { const: 1 })],
    [">=", (c) => Pred.cmp(">=", c.likes, 1), cmp(">=", { const: 1 })],
    ["and", (c) => c.likes.gt(1).and(c.likes.lt(9)), { op: "and", args: [cmp(">", { const: 1 }), cmp("<", { const: 9 })] }],
    ["and flattened", (c) => Pred.and(c.likes.gt(1).and(c.likes.lt(9)), c.likes.ne(5)), { op: "and", args: [cmp(">", { const: 1 }), cmp("<", { const: 9 }), cmp("!=", { const: 5 })] }],
    ["or", (c) => Pred.or(c.likes.gt(1), c.likes.lt(0)), { op: "or", args: [cmp(">", { const: 1 }), cmp("<", { const: 0 })] }],
    ["not", (c) => c.likes.gt(1).not(), { op: "not", arg: cmp(">", { const: 1 }) }],
    ["in", (c) => c.category.in(["a", "b"]), { op: "in", lhs: { key: "category" }, values: ["a", "b"] }],
    ["is_null", (c) => c.likes.isNull(), { op: "is_null", arg: { key: "likes" } }],
    ["regex", (c) => c.category.matches("^sp"), { op: "regex", lhs: { key: "category" }, pattern: "^sp" }],
    ["regex RegExp/i", (c) => Pred.regex(c.category, /^sp/i), { op: "regex", lhs: { key: "category" }, pattern: "(?i)^sp" }],
  ];
  for (const [name, f, want] of cases) {
    const p = plan((c) => c.fixedSource().features({ fields: ["likes", "category"] }).filter({ pred: f }));
    assert.deepEqual(p.pred_table, { p0: want }, name);
  }
});

test("expression strings parse to the same trees as the builder", () => {
  const pairs: [string, J][] = [
    ["log1p(likes) * $w + coalesce(quality, 0)", (c: any, P: any) => c.likes.log1p().mul(P.w).add(c.quality.coalesce(0))],
    ["a - b - c", (c: any) => c.a.sub(c.b, c.c)],
    ["a - (b - c)", (c: any) => c.a.sub(c.b.sub(c.c))],
    ["-a + -2 * 3.0", (c: any) => c.a.neg().add(E.mul(-2, E.f64(3)))],
    ["if(a > 1 && !(b == 2), min(a, b), max(a, 1))", (c: any) => E.if(c.a.gt(1).and(c.b.eq(2).not()), E.min(c.a, c.b), E.max(c.a, 1))],
    ["pow(sqrt(abs(a)), 2) / exp(log(b))", (c: any) => E.pow(E.sqrt(E.abs(c.a)), 2).div(E.exp(E.log(c.b)))],
    ["neg(a)", (c: any) => E.neg(c.a)],
  ];
  const cols = ["a", "b", "c", "likes", "quality"].map((k) => [k, E.key(k)]);
  const refs = Object.fromEntries(cols);
  for (const [src, f] of pairs) assert.deepEqual(parseExpr(src), f(refs, { w: E.param("w") }).node, src);
  const preds: [string, Pred][] = [
    ["a >= 1 || b < 2 && c != 3", Pred.or(E.key("a").ge(1), E.key("b").lt(2).and(E.key("c").ne(3)))],
    ["a in [1, -2, 3.5]", E.key("a").in([1, -2, 3.5])],
    ["s in ['x', \"y\"]", E.key("s").in(["x", "y"])],
    ["is_null(a) || s ~ '^a.*b$'", Pred.or(E.key("a").isNull(), Pred.regex(E.key("s"), "^a.*b$"))],
    ["regex(s, 'x')", Pred.regex(E.key("s"), "x")],
    ["!is_null(a)", E.key("a").isNull().not()],
  ];
  for (const [src, p] of preds) assert.deepEqual(parsePred(src), p.node, src);
});

test("string, callback and builder forms share one table entry", () => {
  const p = plan(
    (c, P) => {
      const h = c.viewer().follow().features({ fields: ["likes", "quality", "nsfw"] });
      const a = h.vm({ outKey: "score", expr: "log1p(likes) * $w + coalesce(quality, 0)" }).filter({ pred: "nsfw == 0" });
      const b = h.vm({ outKey: "score", expr: (r) => r.likes.log1p().mul(P.w).add(r.quality.coalesce(0)) }).filter({ pred: (r) => r.nsfw.eq(0) });
      const d = h.vm({ outKey: "score", expr: E.log1p(E.key("likes")).mul(P.w).add(E.coalesce(E.key("quality"), 0)) }).filter({ pred: (r) => r.score.gt(1) });
      return c.concat([a, b, d]);
    },
    { w: { type: "f64", default: 0.5 } },
  );
  assert.deepEqual(Object.keys(p.expr_table), ["e0"]);
  assert.deepEqual(Object.keys(p.pred_table), ["p0", "p1"]);
  assert.deepEqual(p.nodes.filter((n: J) => n.op === "filter").map((n: J) => n.params.pred), ["p0", "p0", "p1"]);
});

test("the same source compiles to the same bytes", () => {
  const def = definePlan({ name: "t", build: (c) => c.viewer().follow().concat(c.viewer().recommendation()) });
  assert.equal(planText(def), planText(def));
});

test("E.from: a viewer's column, by node or explicit id, in vm and filter", () => {
  const p = plan((c) => {
    const v = c.viewer({ id: "v" });
    return v.follow().media()
      .vm({ outKey: "s", expr: E.add(E.key("author"), E.from(v, "age")) })
      .filter({ pred: E.key("author").gt(E.from("v", "age")) });
  });
  assert.deepEqual(p.expr_table.e0, { op: "+", args: [{ key: "author" }, { from: "v", key: "age" }] });
  assert.deepEqual(p.pred_table.p0, { op: "cmp", cmp: ">", lhs: { key: "author" }, rhs: { from: "v", key: "age" } });
  // An auto-named viewer is named in the JSON by its derived id.
  const q = plan((c) => {
    const v = c.viewer();
    return v.follow().vm({ outKey: "a", expr: E.from(v, "country") });
  });
  assert.deepEqual(q.expr_table.e0, { from: "viewer", key: "country" });
  assert.equal(node(q, "vm").params.out_key, "a");
});

test("E.from: refused unless a viewer the node reads, and one of its columns", () => {
  const err = (build: (c: Ctx) => Node<any>, want: RegExp) =>
    assert.throws(() => plan(build), (e: Error) => want.test(e.message) || assert.fail(e.message));
  err((c) => {
    const v = c.viewer();
    return c.fixedSource().vm({ outKey: "a", expr: E.from(v, "age") }).concat(v.follow());
  }, /E\.from\(viewer, age\): that node is not an input of this one/);
  err((c) => {
    const f = c.viewer().follow({ id: "f" });
    return f.media().vm({ outKey: "a", expr: E.from(f, "id") });
  }, /E\.from\(f, id\): a follow node; E\.from reads a viewer node/);
  err((c) => c.viewer().follow().vm({ outKey: "a", expr: E.from(c.viewer(), "age") }), /not an input of this one/);
  err((c) => {
    const v = c.viewer({ id: "v" });
    return v.follow().vm({ outKey: "a", expr: E.from(v, "nope") });
  }, /E\.from\(v, nope\): the viewer has no column 'nope' \(it has id, country/);
  err((c) => c.viewer().follow().vm({ outKey: "a", expr: E.from("w", "age") }), /E\.from: no node has the id 'w'/);
});

test("seenFilter withinS: within_s on a zset family only", () => {
  const err = (build: (c: Ctx) => Node<any>, want: RegExp) =>
    assert.throws(() => plan(build), (e: Error) => want.test(e.message) || assert.fail(e.message));
  err((c) => c.viewer().follow().seenFilter({ withinS: 60 }), /withinS needs a zset family \(scored by time\); 'seen' is a set family/);
  err((c) => c.viewer().follow().seenFilter({ withinS: -1 }), /withinS -1 is out of bounds 0\.\.315360000/);
  const p = plan((c) => c.viewer().follow().seenFilter({ withinS: 0 }));
  assert.deepEqual(node(p, "seen_filter").params, { endpoint: "redis_default" });
});
