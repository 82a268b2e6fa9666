// Vector fields in the DSL (docs/vectors.md): "vec:D" in a schema becomes a column of type
// "vec:D"; dot, cosine and l2 take two of one dimension (a column, or the viewer's through
// E.from); anything else on a vector is a compile error, as the server's load would say.
import { test } from "node:test";
import assert from "node:assert/strict";
import { planText, withSchema, checkSchema, E, PlanError } from "../lib/index.js";

const emb = withSchema({
  schema_version: 1,
  families: {
    user_emb: { type: "hash", key: "ue:{id}", fields: { emb: "vec:4" } },
    item_emb: { type: "hash", key: "ie:{id}", fields: { emb: "vec:4", small: "vec:2", likes: "i64" } },
    item_doc: { type: "json", key: "id:{id}", fields: { jemb: "vec:4" } },
    recs: { type: "list", key: "r:{id}" },
  },
});

type B = (ctx: any, P: any) => any;
const json = (text: string) => JSON.parse(text);
function err(build: B): string {
  try {
    planText(emb.definePlan({ name: "bad", build }));
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    return e.message;
  }
  assert.fail("compiled without error");
}

// The viewer, its candidates and their vectors (the viewer reaches them through the concat).
function scored(c: any) {
  const v = c.viewer({ family: "user_emb" });
  const items = v.recommendation({ family: "recs" }).features({ family: "item_emb", fields: ["emb", "small", "likes"] })
    .features({ family: "item_doc", fields: ["jemb"] });
  return { v, items };
}

test("dot, cosine, l2 of a viewer's vector and a column: the JSON the server loads", () => {
  const p = json(planText(emb.definePlan({
    name: "t",
    build: (c) => {
      const { v, items } = scored(c);
      return items
        .vm({ outKey: "d", expr: (k: any) => E.from(v, "emb").dot(k.emb) })
        .vm({ outKey: "c", expr: (k: any) => E.cosine(k.emb, k.jemb) })
        .vm({ outKey: "l", expr: "l2(jemb, emb) + likes" })
        .sort({ key: "d", order: "desc" });
    },
  })));
  const ids = Object.keys(p.expr_table);
  assert.deepEqual(p.expr_table[ids[0]], { op: "dot", args: [{ from: p.nodes[0].node_id, key: "emb" }, { key: "emb" }] });
  assert.deepEqual(p.expr_table[ids[1]], { op: "cosine", args: [{ key: "emb" }, { key: "jemb" }] });
  assert.deepEqual(p.expr_table[ids[2]], { op: "+", args: [{ op: "l2", args: [{ key: "jemb" }, { key: "emb" }] }, { key: "likes" }] });
});

test("vectors go into dot, cosine and l2 only, of one dimension", () => {
  const cases: [B, RegExp][] = [
    [(c) => scored(c).items.vm({ outKey: "x", expr: "dot(emb, small)" }), /dot: emb is vec:4 but small is vec:2; the dimensions must agree/],
    [(c) => scored(c).items.vm({ outKey: "x", expr: "cosine(emb, likes)" }), /cosine: operand likes is i64; cosine needs two vectors/],
    [(c) => scored(c).items.vm({ outKey: "x", expr: "emb + 1" }), /\+: operand emb is vec:4; arithmetic needs numbers/],
    [(c) => scored(c).items.vm({ outKey: "x", expr: "coalesce(emb, jemb)" }), /coalesce: operand emb is vec:4; vectors go into dot, cosine and l2 only/],
    [(c) => scored(c).items.vm({ outKey: "x", expr: "emb" }), /expr is a vector \(vec:4\)/],
    [(c) => scored(c).items.filter({ pred: "emb == jemb" }), /cmp ==: emb is vec:4; vectors go into dot, cosine and l2 only/],
    [(c) => scored(c).items.sort({ key: "emb", order: "desc" }), /key: column 'emb' is vec:4; sort takes an i64, f64, str or bool column/],
    [(c) => scored(c).items.dedupe({ key: "jemb" }), /key: column 'jemb' is vec:4; dedupe takes an i64, f64, str or bool column/],
  ];
  for (const [build, want] of cases) assert.match(err(build), want);
  // is_null of a vector is allowed: rows without an embedding.
  planText(emb.definePlan({ name: "t", build: (c) => scored(c).items.filter({ pred: (k: any) => k.emb.isNull().not() }) }));
});

test("schema: vec:D with D 1..4096 in hash and json families", () => {
  const fam = (t: string) => ({ schema_version: 1, families: { e: { type: "hash", key: "e:{id}", fields: { v: t } } } });
  for (const ok of ["vec:1", "vec:64", "vec:4096"]) checkSchema(fam(ok), "s.json");
  for (const bad of ["vec", "vec:0", "vec:4097", "vec:08", "vec:x", "vec:-1"])
    assert.throws(() => checkSchema(fam(bad), "s.json"), new RegExp(`s\\.json: families\\.e\\.fields\\.v: "${bad}" is not one of i64, f64, str, bool, vec:D`));
});

// ann (docs/vectors.md, "Indexes"): a viewer's vector against an index of the schema.
const indexed = withSchema({
  schema_version: 1,
  families: {
    user_emb: { type: "hash", key: "ue:{id}", fields: { emb: "vec:4", small: "vec:2" } },
    item_emb: { type: "hash", key: "ie:{id}", fields: { emb: "vec:4" } },
    seen: { type: "set", key: "s:{id}" },
    recs: { type: "list", key: "r:{id}" },
  },
  indexes: { items: { family: "item_emb", field: "emb", metric: "cosine" } },
});

test("ann: the JSON the server loads, and its errors", () => {
  const p = json(planText(indexed.definePlan({
    name: "t",
    build: (c) => {
      const v = c.viewer({ family: "user_emb" });
      const byFamily = v.ann({ index: "items", key: "emb", k: 50, exclude: { family: "seen" } });
      const seen = v.recommendation({ family: "recs" });
      const byNode = v.ann({ index: "items", key: "emb", exclude: seen, withVectors: true });
      return c.concat([byFamily, byNode]);
    },
  })));
  const [v, a, r, b] = p.nodes;
  assert.deepEqual(a.inputs, [v.node_id]);
  assert.deepEqual(a.params, { endpoint: "redis_default", index: "items", query: { from: v.node_id, key: "emb" }, k: 50, exclude: { family: "seen" } });
  assert.deepEqual(b.inputs, [v.node_id, r.node_id]);
  assert.deepEqual(b.params.exclude, r.node_id);
  assert.equal(b.params.with_vectors, true);
  const bad = (build: B) => {
    try {
      planText(indexed.definePlan({ name: "bad", build }));
    } catch (e) {
      return (e as Error).message;
    }
    assert.fail("compiled without error");
  };
  assert.match(bad((c) => c.viewer({ family: "user_emb" }).ann({ index: "nope", key: "emb" })), /declares no index "nope" \(items\)/);
  assert.match(bad((c) => c.viewer({ family: "user_emb" }).ann({ index: "items", key: "small" })), /'small' is vec:2 but index 'items' holds vec:4/);
  assert.match(bad((c) => c.viewer({ family: "user_emb" }).ann({ index: "items", key: "emb", k: 10001 })), /k/);
  assert.match(bad((c) => c.viewer({ family: "user_emb" }).ann({ index: "items", key: "emb", exclude: { family: "recs" } })), /no set or zset family/);
});
