// schema.json: the families the IO ops read, their JSON params (family, fields, score_as,
// source_as, written only when not the default), the compiler's checks (with the call site),
// the schema's own checks, and the generated schema.gen.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { definePlan, planText, withSchema, checkSchema, DEMO_SCHEMA, PlanError } from "../lib/index.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

const market = withSchema({
  schema_version: 1,
  families: {
    account: { type: "json", key: "mk:account:{id}", id: "str", fields: { region: "str", tier: "str", vip: "bool" } },
    listing: { type: "json", key: "mk:listing:{id}", id: "str", fields: { seller: "str", price: "f64", title: "str", in_stock: "bool" } },
    watch: { type: "zset", key: "mk:watch:{id}", id: "str", members: "str" },
    shop: { type: "zset", key: "mk:shop:{id}", id: "str", members: "str" },
    recs: { type: "zset", key: "mk:recs:{id}", id: "str", members: "str" },
    hidden: { type: "set", key: "mk:hidden:{id}", id: "str", members: "str" },
    legacy: { type: "list", key: "mk:legacy:{id}" },
    nums: { type: "zset", key: "mk:nums:{id}", id: "str" },
    legacy_seen: { type: "set", key: "mk:ls:{id}", members: "str" },
    odd: { type: "hash", key: "mk:odd:{id}", id: "str", fields: { id: "i64", x: "f64" } },
  },
});

type B = (ctx: any, P: any) => any;
const json = (text: string) => JSON.parse(text);
const io = (p: any) => p.nodes.map((n: any) => [n.op, n.params]);
function err(build: B, def: (spec: any) => any = definePlan as never): string {
  try {
    planText(def({ name: "bad", build }));
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    return e.message;
  }
  assert.fail("compiled without error");
}
const AT = "at test/schema\\.test\\.ts:\\d+:\\d+: ";

test("plans/schema.json is the demo schema, member for member and in order", () => {
  const file = JSON.parse(fs.readFileSync(path.join(ROOT, "schema.json"), "utf8"));
  assert.equal(JSON.stringify(file), JSON.stringify(DEMO_SCHEMA));
});

test("default families are not written: the demo plans compile as before", () => {
  const p = json(planText(definePlan({
    name: "t",
    build: (c) => c.viewer({ family: "user" }).follow({ family: "follow" }).media({ family: "media", sourceAs: "author" })
      .concat(c.viewer().recommendation({ family: "recs" })).seenFilter({ family: "seen" }).features({ family: "item", fields: ["likes"] }),
  })));
  assert.deepEqual(io(p), [
    ["viewer", { endpoint: "redis_default" }],
    ["follow", { endpoint: "redis_default", fanout: 100 }],
    ["media", { endpoint: "redis_default", per_author: 10 }],
    ["viewer", { endpoint: "redis_default" }],
    ["recommendation", { endpoint: "redis_default", fanout: 100 }],
    ["concat", {}],
    ["seen_filter", { endpoint: "redis_default" }],
    ["features", { endpoint: "redis_default", fields: ["likes"] }],
  ]);
});

test("family, fields, score_as, source_as: the JSON and the columns", () => {
  const def = market.definePlan({
    name: "m",
    build: (c) => {
      const v = c.viewer({ family: "account", fields: ["vip", "region"] });
      const s = v.follow({ family: "watch", fanout: 5, scoreAs: "affinity", cache: true }).media({ family: "shop", perAuthor: 3, sourceAs: "seller_id", scoreAs: "recency" });
      const r = v.recommendation({ scoreAs: "rec_score" });
      return s.concat(r).dedupe().seenFilter({ family: "hidden" }).features({ family: "listing", fields: ["in_stock", "price"] })
        .vm({ outKey: "x", expr: (k) => k.in_stock.add(1).mul(k.recency.coalesce(k.rec_score, 0)) })
        .filter({ pred: "in_stock == 1 && seller_id != ''" });
    },
  });
  const p = json(planText(def));
  assert.deepEqual(io(p), [
    ["viewer", { endpoint: "redis_default", family: "account", fields: ["vip", "region"] }],
    ["follow", { endpoint: "redis_default", family: "watch", cache: true, fanout: 5, score_as: "affinity" }],
    ["media", { endpoint: "redis_default", family: "shop", per_author: 3, source_as: "seller_id", score_as: "recency" }],
    ["recommendation", { endpoint: "redis_default", fanout: 100, score_as: "rec_score" }],
    ["concat", {}],
    ["dedupe", { key: "id" }],
    ["seen_filter", { endpoint: "redis_default", family: "hidden" }],
    ["features", { endpoint: "redis_default", family: "listing", fields: ["in_stock", "price"] }],
    ["vm", { out_key: "x", expr: "e0" }],
    ["filter", { pred: "p0" }],
  ]);
  assert.deepEqual(def.schema, market.schema);
});

test("viewer: all declared fields in declaration order, or the given ones in their order", () => {
  const p1 = json(planText(definePlan({ name: "t", build: (c) => c.viewer().output(["id", "country", "lang", "age", "premium"]) })));
  assert.deepEqual(p1.output.columns, ["id", "country", "lang", "age", "premium"]);
  // a bool field is an i64 column (0/1): arithmetic on it types as i64
  const p2 = json(planText(market.definePlan({ name: "t", build: (c) => c.viewer({ family: "account", fields: ["vip"] }).vm({ outKey: "v", expr: (k) => k.vip.add(1) }) })));
  assert.deepEqual(p2.expr_table.e0, { op: "+", args: [{ key: "vip" }, { const: 1 }] });
  assert.match(err((c) => c.viewer({ family: "account", fields: ["vip"] }).vm({ outKey: "v", expr: "region + 1" }), market.definePlan), /unknown column 'region' \(columns here: id, vip\)/);
});

const cases: [string, B, RegExp, ((spec: any) => any)?][] = [
  ["misspelled family", (c) => c.viewer().follow({ family: "folow" }), new RegExp(`follow\\(\\) ${AT}family: unknown family "folow" \\(list or zset families in the demo schema: follow, recs, media, served\\)`)],
  ["family of the wrong type", (c) => c.viewer({ family: "follow" }), /viewer\(\) .*family 'follow' is a list family; viewer reads a hash, json or counters family \(hash, json or counters families in the demo schema: user, item, user_emb, item_emb, item_counts, user_counts\)/],
  ["set family for features", (c) => c.viewer().follow().features({ family: "seen", fields: ["likes"] }), /features\(\) .*family 'seen' is a set family; features reads a hash, json or counters family/],
  ["list family for seen_filter", (c) => c.viewer().follow().seenFilter({ family: "recs" }), /seen_filter\(\) .*family 'recs' is a list family; seen_filter reads a set or zset family/],
  ["family not a string", (c) => c.viewer({ family: 3 }), /family must be a family name, got 3/],
  ["undeclared viewer field", (c) => c.viewer({ fields: ["country", "height"] }), /viewer\(\) .*fields: "height" is not a field of 'user' \(country, lang, age, premium\)/],
  ["empty viewer fields", (c) => c.viewer({ fields: [] }), /fields must be a non-empty list of fields of 'user'/],
  ["field of another family", (c) => c.viewer().follow().features({ fields: ["lang"] }), /fields: "lang" is not a field of 'item'/],
  ["score_as on a list", (c) => c.viewer().follow({ scoreAs: "affinity" }), new RegExp(`follow\\(\\) ${AT}scoreAs: family 'follow' is a list; only a zset family has scores`)],
  ["score_as on a list (market)", (c) => c.fixedSource().follow({ family: "legacy", scoreAs: "s" }), /scoreAs: family 'legacy' is a list; only a zset family has scores/, market.definePlan],
  ["score_as = id", (c) => c.viewer({ family: "account" }).follow({ family: "watch", scoreAs: "id" }), /scoreAs: the id column is the member's id/, market.definePlan],
  ["score_as = source_as", (c) => c.viewer({ family: "account" }).follow({ family: "watch" }).media({ family: "shop", scoreAs: "author" }), /scoreAs: column 'author' is also the sourceAs column/, market.definePlan],
  ["bad source_as", (c) => c.viewer().follow().media({ sourceAs: "a b" }), /sourceAs "a b" is not a valid column name/],
  ["source_as on follow", (c) => c.viewer().follow({ sourceAs: "x" }), /unknown option 'sourceAs'/],
  ["str ids into an i64-keyed family", (c) => c.viewer({ family: "account" }).follow({ family: "legacy" }), /follow\(\) .*family 'legacy' is keyed by i64 ids but the input's id column is str/, market.definePlan],
  ["i64 ids into a str-keyed family", (c) => c.fixedSource().follow({ family: "watch" }), /family 'watch' is keyed by str ids but the input's id column is i64/, market.definePlan],
  ["i64 members into features of str ids", (c) => c.viewer({ family: "account" }).follow({ family: "nums" }).features({ family: "listing", fields: ["price"] }), /features\(\) .*family 'listing' is keyed by str ids but the input's id column is i64/, market.definePlan],
  ["seen set of another member type", (c) => c.fixedSource().seenFilter({ family: "hidden" }), /seen_filter\(\) .*family 'hidden' holds str members but the input's id column is i64/, market.definePlan],
  ["no default family in this schema", (c) => c.viewer(), /viewer\(\) .*family: schema\.json has no family 'user' \(the default\); give family \(hash, json or counters families in schema\.json: account, listing, odd\)/, market.definePlan],
  ["str field in arithmetic", (c) => c.viewer({ family: "account" }).recommendation().features({ family: "listing", fields: ["title"] }).vm({ outKey: "s", expr: "title * 2" }), /vm\(\) .*\*: operand title is str; arithmetic needs numbers/, market.definePlan],
  ["seen set keyed by another type than user_id", (c) => c.viewer({ family: "account" }).recommendation().seenFilter({ family: "legacy_seen" }), /seen_filter\(\) at test\/schema\.test\.ts:\d+:\d+: family 'legacy_seen' is keyed by i64 ids, but the request's user_id is str \(the viewer family 'account' is keyed by str ids\)/, market.definePlan],
  ["viewer of a family with a field named id", (c) => c.viewer({ family: "odd" }), /family 'odd' has a field 'id', which would replace the id column/, market.definePlan],
  ["features field named id", (c) => c.viewer({ family: "account" }).recommendation().features({ family: "odd", fields: ["x", "id"] }), /fields: field 'id' of 'odd' would replace the id column/, market.definePlan],
  ["concat of str and i64 ids", (c) => c.viewer({ family: "account" }).recommendation().concat(c.fixedSource()), /concat\(\) .*column 'id' is str in an earlier input but i64 in input 2/, market.definePlan],
];
for (const [name, build, want, def] of cases) {
  test(`compile error: ${name}`, () => assert.match(err(build, def), want));
}

test("the schema is checked when a plan compiles, naming the member", () => {
  const bad = (schema: any, want: RegExp) => {
    const s = withSchema(schema as never, "x/schema.json");
    assert.throws(() => planText(s.definePlan({ name: "t", build: (c: any) => c.fixedSource() })), (e: Error) => e instanceof PlanError && want.test(e.message));
  };
  const fam = (f: object) => ({ schema_version: 1, families: { a: f } });
  bad({ schema_version: 2, families: {} }, /^plan 't': x\/schema\.json: schema_version: must be 1, got 2/);
  bad({ schema_version: 1, families: {}, extra: 1 }, /extra: unknown member/);
  bad({ schema_version: 1, families: { "A-b": { type: "set", key: "s:{id}" } } }, /families\.A-b: a family name must match/);
  bad(fam({ type: "hsh", key: "a:{id}" }), /families\.a\.type: "hsh" is not one of hash, json, list, zset, set/);
  bad(fam({ type: "list", key: "a:{id}:{id}" }), /families\.a\.key: "a:\{id\}:\{id\}" must hold exactly one \{id\}, it has 2/);
  bad(fam({ type: "list", key: "a" }), /families\.a\.key: "a" must hold exactly one \{id\}, it has 0/);
  bad(fam({ type: "list", key: "rankd:{id}" }), /must not start with rankd:/);
  bad(fam({ type: "list", key: "x".repeat(254) + "{id}" }), /longer than 256 bytes/);
  bad(fam({ type: "list", key: "a:{id}", fields: { x: "i64" } }), /families\.a\.fields: unknown member for a list family \(allowed: type, key, id, members\)/);
  bad(fam({ type: "hash", key: "a:{id}", members: "str" }), /families\.a\.members: unknown member for a hash family/);
  bad(fam({ type: "hash", key: "a:{id}" }), /families\.a\.fields: a hash family needs fields/);
  bad(fam({ type: "json", key: "a:{id}", fields: { x: "int" } }), /families\.a\.fields\.x: "int" is not one of i64, f64, str, bool/);
  bad(fam({ type: "json", key: "a:{id}", fields: { X: "i64" } }), /families\.a\.fields\.X: a field name must match/);
  bad(fam({ type: "set", key: "a:{id}", id: "u64" }), /families\.a\.id: "u64" is not one of i64, str/);
  bad(fam({ type: "zset", key: "a:{id}", members: "f64" }), /families\.a\.members: "f64" is not one of i64, str/);
  assert.equal(checkSchema(DEMO_SCHEMA, "demo").families.get("item")!.fields.get("quality"), "f64");
});

test("gen-schema writes schema.gen.ts: the folder's schema as const, or the demo schema", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plans-gen-"));
  try {
    const gen = path.join(ROOT, "lib", "gen-schema.mjs");
    execFileSync(process.execPath, [gen, dir]);
    const demo = fs.readFileSync(path.join(dir, "schema.gen.ts"), "utf8");
    assert.match(demo, /export const SCHEMA = DEMO_SCHEMA;/);
    assert.match(demo, new RegExp(`from "${path.relative(dir, path.join(ROOT, "lib", "index.js")).split(path.sep).join("/").replace(/\./g, "\\.")}"`));
    fs.writeFileSync(path.join(dir, "schema.json"), JSON.stringify({ schema_version: 1, families: { s: { type: "set", key: "s:{\"id\"}:{id}", members: "str" } } }));
    execFileSync(process.execPath, [gen, dir]);
    const text = fs.readFileSync(path.join(dir, "schema.gen.ts"), "utf8");
    assert.match(text, /^ {4}"s": \{"type": "set", "key": "s:\{\\"id\\"\}:\{id\}", "members": "str"\},$/m);
    assert.match(text, /\} as const;\nexport const \{ definePlan \} = withSchema\(SCHEMA, ".*schema\.json"\);\n$/);
    fs.writeFileSync(path.join(dir, "schema.json"), "{");
    assert.throws(() => execFileSync(process.execPath, [gen, dir], { stdio: "pipe" }), /schema\.json: not valid JSON/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  // the plans folder's own module: loads, and is bound to plans/schema.json
  const mod = await import(pathToFileURL(path.join(ROOT, "dist", "schema.gen.js")).href);
  assert.equal(JSON.stringify(mod.SCHEMA), JSON.stringify(JSON.parse(fs.readFileSync(path.join(ROOT, "schema.json"), "utf8"))));
});

test("servedState: the served_state block, checked as the server checks it", () => {
  const ev = withSchema({
    schema_version: 1,
    families: {
      user: { type: "hash", key: "user:{id}", fields: { age: "i64" } },
      seen: { type: "set", key: "seen:{id}" },
      served: { type: "zset", key: "served:{id}" },
      names: { type: "zset", key: "names:{id}", members: "str" },
    },
  } as const);
  const build = (c: any) => c.viewer().recommendation({ family: "served" }).seenFilter({ family: "served", withinS: 3600 });
  const p = json(planText(ev.definePlan({ name: "s", build, servedState: { family: "served", max: 500, ttlS: 604800 } })));
  assert.deepEqual(p.served_state, { family: "served", max: 500, ttl_s: 604800 });
  assert.deepEqual(p.nodes.find((n: any) => n.op === "seen_filter").params, { endpoint: "redis_default", family: "served", within_s: 3600 });
  const err = (servedState: unknown, want: RegExp) =>
    assert.throws(() => planText(ev.definePlan({ name: "s", build, servedState } as any)), (e: Error) => want.test(e.message) || assert.fail(e.message));
  err({ family: "seen", max: 5, ttlS: 5 }, /servedState\.family: family 'seen' is a set family; served state is kept in a zset/);
  err({ family: "names", max: 5, ttlS: 5 }, /family 'names' holds str members but the output's ids are i64/);
  err({ family: "nope", max: 5, ttlS: 5 }, /servedState\.family: "nope" is not a family/);
  err({ family: "served", max: 0, ttlS: 5 }, /servedState\.max must be an integer 1\.\.100000, got 0/);
  err({ family: "served", max: 5, ttl_s: 5 }, /unknown .*ttl_s.*the DSL writes it ttlS/);
});
