// Experiments (docs/experiments.md, docs/plans.md "Experiments"): the JSON defineExperiments
// compiles to, the compiler's checks (each a PlanError naming the experiment and the field),
// the demo's experiments.json, and the cli's build/check of experiments.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { definePlan, withPlans, withSchema, PlanError, type ExperimentSpec } from "../lib/index.js";
import { compileExperimentsFile } from "../lib/cli.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = path.join(ROOT, "dist", "lib", "cli.js");

type J = any;
const base = definePlan({
  name: "base",
  params: {
    weight: { type: "f64", default: 0.5, min: 0, max: 1 },
    limit: { type: "i64", default: 50, min: 1, max: 100 },
    tag: { type: "str", default: "x" },
    on: { type: "bool", default: false },
    free: { type: "f64", default: 1 },
  },
  build: (c) => c.fixedSource(),
});
const other = definePlan({ name: "other", build: (c) => c.fixedSource() });
const third = definePlan({ name: "third", params: { limit: { type: "i64", default: 5 } }, build: (c) => c.fixedSource() });
const { defineExperiments } = withPlans({ base, other, third });
type Spec = ExperimentSpec<{ base: typeof base; other: typeof other; third: typeof third }>;

const one: Spec = {
  name: "e",
  plan: "base",
  salt: "s1",
  variants: [
    { name: "heavy", plan: "base", params: { weight: 0.9, limit: 20 }, weight: 2500 },
    { name: "alt", plan: "other", weight: 2500 },
  ],
};

function compile(xs: unknown): J {
  return JSON.parse(defineExperiments(xs as Spec[]).text());
}
function compileErr(xs: unknown): string {
  try {
    compile(xs);
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    assert.match(e.message, /^defineExperiments at test\/experiments\.test\.ts:\d+:\d+: /);
    return e.message;
  }
  assert.fail("compiled without error");
}
/** `one` with its fields replaced by `o` (a field set to undefined is removed). */
const exp = (o: Record<string, unknown>): Record<string, unknown> => {
  const x: Record<string, unknown> = { ...one, ...o };
  for (const k of Object.keys(x)) if (x[k] === undefined) delete x[k];
  return x;
};
/** `one` with its first variant replaced by `v`. */
const variant = (v: Record<string, unknown>) => exp({ variants: [v, one.variants[1]] });

test("an experiment compiles to the file's fields, in order; params default to {}", () => {
  const j = compile([one]);
  assert.deepEqual(j, {
    experiments: [
      {
        name: "e",
        plan: "base",
        salt: "s1",
        variants: [
          { name: "heavy", plan: "base", params: { weight: 0.9, limit: 20 }, weight: 2500 },
          { name: "alt", plan: "other", params: {}, weight: 2500 },
        ],
      },
    ],
  });
  assert.deepEqual(Object.keys(j.experiments[0]), ["name", "plan", "salt", "variants"]);
  assert.deepEqual(Object.keys(j.experiments[0].variants[0]), ["name", "plan", "params", "weight"]);
});

test("shadow, start_ms and end_ms are written only when given; compare_top defaults to 10", () => {
  const j = compile([{ ...one, shadow: [{ plan: "third", percent: 5 }, { plan: "base", percent: 0.5, compareTop: 1000 }], startMs: 1795000000000, endMs: 1800000000000 }]);
  const e = j.experiments[0];
  assert.deepEqual(Object.keys(e), ["name", "plan", "salt", "variants", "shadow", "start_ms", "end_ms"]);
  assert.deepEqual(e.shadow, [{ plan: "third", percent: 5, compare_top: 10 }, { plan: "base", percent: 0.5, compare_top: 1000 }]);
  assert.equal(e.start_ms, 1795000000000);
  assert.equal(e.end_ms, 1800000000000);
  assert.deepEqual(Object.keys(compile([{ ...one, startMs: 7 }]).experiments[0]), ["name", "plan", "salt", "variants", "start_ms"]);
  assert.deepEqual(compile([{ ...one, shadow: [] }]).experiments[0].shadow, []);
});

test("f64 values are written as doubles (percent, f64 params), i64 as integers", () => {
  const text = defineExperiments([
    {
      ...one,
      variants: [{ name: "v", plan: "base", params: { weight: 1, limit: 3, free: -2, tag: "t", on: true }, weight: 1 }],
      shadow: [{ plan: "other", percent: 100 }],
    },
  ]).text();
  assert.match(text, /"params": \{\n {12}"weight": 1\.0,\n {12}"limit": 3,\n {12}"free": -2\.0,\n {12}"tag": "t",\n {12}"on": true\n {10}\}/);
  assert.match(text, /"percent": 100\.0,\n {10}"compare_top": 10\n/);
  assert.ok(text.endsWith("}\n"));
});

test("no experiments, no variants, weight 0, and weights summing to exactly 10000 are fine", () => {
  assert.equal(defineExperiments([]).text(), '{\n  "experiments": []\n}\n');
  assert.deepEqual(compile([{ ...one, variants: [] }]).experiments[0].variants, []);
  const full = compile([{ ...one, variants: [{ name: "a", plan: "other", weight: 10000 }, { name: "b", plan: "third", weight: 0 }] }]);
  assert.deepEqual(full.experiments[0].variants.map((v: J) => v.weight), [10000, 0]);
  // A variant may serve the experiment's own plan, and shadow it.
  assert.equal(compile([{ ...one, shadow: [{ plan: "base", percent: 1 }] }]).experiments[0].shadow[0].plan, "base");
});

test("several experiments, one per plan", () => {
  const j = compile([one, { name: "f", plan: "other", salt: "s2", variants: [{ name: "v", plan: "third", params: { limit: -3 }, weight: 1 }] }]);
  assert.deepEqual(j.experiments.map((e: J) => [e.name, e.plan]), [["e", "base"], ["f", "other"]]);
});

test("variant and shadow plans take the requested plan's user_id type", () => {
  // `accounts` reads a viewer family keyed by str ids: its requests carry a string user_id.
  const strIds = withSchema({ schema_version: 1, families: { user: { type: "hash", key: "acct:{id}", id: "str", fields: { tier: "str" } } } });
  const accounts = strIds.definePlan({ name: "accounts", build: (c) => c.viewer() });
  const accounts2 = strIds.definePlan({ name: "accounts2", build: (c) => c.viewer().take({ count: 1 }) });
  // A plan that does not compile reports its own error (as a plan); the experiment does not repeat it.
  const broken = definePlan({ name: "broken", build: (c) => c.fixedSource().take({ count: 0 }) });
  const mixed = withPlans({ base, accounts, accounts2, broken });
  const err = (x: unknown) => {
    try {
      mixed.defineExperiments([x] as never).compile();
    } catch (e) {
      assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
      return e.message;
    }
    assert.fail("compiled without error");
  };
  const x = { name: "x", plan: "accounts", salt: "s", variants: [] as unknown[] };
  assert.match(err({ ...x, variants: [{ name: "v", plan: "base", weight: 1 }] }),
    /experiment 'x': variants\[0\] 'v': plan: plan 'base' takes i64 user ids, plan 'accounts' str; a variant runs on the requests for 'accounts', so their user_id types must agree/);
  assert.match(err({ ...x, shadow: [{ plan: "base", percent: 1 }] }),
    /experiment 'x': shadow\[0\]\.plan: plan 'base' takes i64 user ids, plan 'accounts' str; a shadow plan runs on the requests for 'accounts'/);
  assert.match(err({ ...x, plan: "base", variants: [{ name: "v", plan: "accounts2", weight: 1 }] }), /plan 'accounts2' takes str user ids, plan 'base' i64/);
  const ok = JSON.parse(mixed.defineExperiments([{ ...x, variants: [{ name: "v", plan: "accounts2", weight: 1 }], shadow: [{ plan: "broken", percent: 1 }] }] as never).text());
  assert.deepEqual(ok.experiments[0].variants, [{ name: "v", plan: "accounts2", params: {}, weight: 1 }]);
  assert.equal(ok.experiments[0].shadow[0].plan, "broken");
});

test("defineExperiments is lazy and deterministic: the same source gives the same bytes", () => {
  const def = defineExperiments([one]);
  assert.equal(def.kind, "rankd-experiments");
  assert.deepEqual(def.plans, ["base", "other", "third"]);
  assert.equal(def.text(), def.text());
  // Misuse is reported when it compiles, not when it is defined.
  const bad = defineExperiments([exp({ salt: "" })] as never);
  assert.throws(() => bad.compile(), PlanError);
});

const cases: [string, unknown, RegExp][] = [
  // the list and the experiment
  ["not a list", { experiments: [] }, /expects an array of experiments \[\{name, plan, salt, variants, …\}\], got \{"experiments":\[\]\}/],
  ["experiment not an object", ["e"], /experiments\[0\] must be an object \{name, plan, salt, variants, …\}, got "e"/],
  ["name missing", [exp({ name: undefined })], /experiments\[0\]\.name must be a non-empty string, got undefined/],
  ["name empty", [exp({ name: "" })], /experiments\[0\]\.name must be a non-empty string, got ""/],
  ["name twice", [one, exp({ plan: "other" })], /experiment 'e': the name is also experiments\[0\]'s; experiment names are unique \(experiments\[1\]\)/],
  ["two experiments on a plan", [one, exp({ name: "e2" })], /experiment 'e2': plan 'base' already has experiment 'e'; a plan has at most one experiment/],
  ["unknown field", [exp({ buckets: 100 })], /experiment 'e': unknown field 'buckets' \(allowed: name, plan, salt, variants, shadow, startMs, endMs\)/],
  ["snake_case field", [exp({ start_ms: 1 })], /experiment 'e': unknown field 'start_ms' \(allowed: .*startMs, endMs; the DSL writes it startMs\)/],
  // plan
  ["plan unknown", [exp({ plan: "nope" })], /experiment 'e': plan: unknown plan 'nope' \(plans of this folder: base, other, third\)/],
  ["plan missing", [exp({ plan: undefined })], /experiment 'e': plan: must be a plan name, got undefined/],
  // salt
  ["salt missing", [exp({ salt: undefined })], /experiment 'e': salt must be a non-empty string, got undefined/],
  ["salt empty", [exp({ salt: "" })], /experiment 'e': salt must be a non-empty string, got ""/],
  ["salt not a string", [exp({ salt: 7 })], /experiment 'e': salt must be a non-empty string, got 7/],
  // variants
  ["variants missing", [exp({ variants: undefined })], /experiment 'e': variants must be an array of \{name, plan, params\?, weight\} \(it may be empty\), got undefined/],
  ["variant not an object", [exp({ variants: ["heavy"] })], /experiment 'e': variants\[0\] must be an object \{name, plan, params\?, weight\}, got "heavy"/],
  ["variant name empty", [variant({ name: "", plan: "base", weight: 1 })], /experiment 'e': variants\[0\]\.name must be a non-empty string, got ""/],
  ["variant name control", [variant({ name: "control", plan: "base", weight: 1 })], /experiment 'e': variants\[0\]\.name 'control' is reserved: it names the buckets the experiment's own plan serves/],
  ["variant name twice", [exp({ variants: [one.variants[0], { ...one.variants[1], name: "heavy" }] })], /experiment 'e': variants\[1\] 'heavy': the name is also variants\[0\]'s; variant names are unique within an experiment/],
  ["variant plan unknown", [variant({ name: "v", plan: "nope", weight: 1 })], /experiment 'e': variants\[0\] 'v': plan: unknown plan 'nope' \(plans of this folder: base, other, third\)/],
  ["variant unknown field", [variant({ name: "v", plan: "base", weight: 1, percent: 3 })], /experiment 'e': variants\[0\]: unknown field 'percent' \(allowed: name, plan, params, weight\)/],
  ["weight missing", [variant({ name: "v", plan: "base" })], /experiment 'e': variants\[0\] 'v': weight must be an integer 0\.\.10000, got undefined/],
  ["weight fractional", [variant({ name: "v", plan: "base", weight: 2.5 })], /variants\[0\] 'v': weight must be an integer 0\.\.10000, got 2\.5/],
  ["weight negative", [variant({ name: "v", plan: "base", weight: -1 })], /variants\[0\] 'v': weight -1 is out of bounds 0\.\.10000/],
  ["weight above 10000", [variant({ name: "v", plan: "base", weight: 10001 })], /variants\[0\] 'v': weight 10001 is out of bounds 0\.\.10000/],
  ["weights sum above 10000", [exp({ variants: [{ name: "a", plan: "base", weight: 6000 }, { name: "b", plan: "other", weight: 4001 }] })], /experiment 'e': the variants' weights sum to 10001, more than the 10000 buckets \(a \+ b; the control gets what is left\)/],
  // params
  ["params not an object", [variant({ name: "v", plan: "base", params: [1], weight: 1 })], /variants\[0\] 'v': params must be an object \{param: value\}, got \[1\]/],
  ["param unknown", [variant({ name: "v", plan: "base", params: { wieght: 0.9 }, weight: 1 })], /experiment 'e': variants\[0\] 'v': params\.wieght: plan 'base' declares no parameter 'wieght' \(its parameters: weight, limit, tag, on, free\)/],
  ["param of a plan without params", [variant({ name: "v", plan: "other", params: { limit: 5 }, weight: 1 })], /variants\[0\] 'v': params\.limit: plan 'other' declares no parameter 'limit' \(it has no parameters\)/],
  ["param of the experiment's plan, not the variant's", [variant({ name: "v", plan: "third", params: { weight: 0.9 }, weight: 1 })], /params\.weight: plan 'third' declares no parameter 'weight' \(its parameters: limit\)/],
  ["f64 param a string", [variant({ name: "v", plan: "base", params: { weight: "0.9" }, weight: 1 })], /variants\[0\] 'v': params\.weight must be a finite number \(plan 'base' declares weight f64\), got "0\.9"/],
  ["f64 param NaN", [variant({ name: "v", plan: "base", params: { free: NaN }, weight: 1 })], /params\.free must be a finite number/],
  ["f64 param above max", [variant({ name: "v", plan: "base", params: { weight: 1.5 }, weight: 1 })], /variants\[0\] 'v': params\.weight 1\.5 is outside 0\.\.1 \(the min\/max plan 'base' declares for weight\)/],
  ["i64 param below min", [variant({ name: "v", plan: "base", params: { limit: 0 }, weight: 1 })], /params\.limit 0 is outside 1\.\.100 \(the min\/max plan 'base' declares for limit\)/],
  ["i64 param fractional", [variant({ name: "v", plan: "base", params: { limit: 2.5 }, weight: 1 })], /params\.limit must be an integer \(plan 'base' declares limit i64\), got 2\.5/],
  ["str param a number", [variant({ name: "v", plan: "base", params: { tag: 1 }, weight: 1 })], /params\.tag must be a string \(plan 'base' declares tag str\), got 1/],
  ["bool param a number", [variant({ name: "v", plan: "base", params: { on: 1 }, weight: 1 })], /params\.on must be a boolean \(plan 'base' declares on bool\), got 1/],
  // shadow
  ["shadow not a list", [exp({ shadow: { plan: "other", percent: 1 } })], /experiment 'e': shadow must be an array of \{plan, percent, compareTop\?\}/],
  ["shadow not an object", [exp({ shadow: ["other"] })], /experiment 'e': shadow\[0\] must be an object \{plan, percent, compareTop\?\}, got "other"/],
  ["shadow plan unknown", [exp({ shadow: [{ plan: "nope", percent: 1 }] })], /experiment 'e': shadow\[0\]\.plan: unknown plan 'nope' \(plans of this folder: base, other, third\)/],
  ["shadow percent missing", [exp({ shadow: [{ plan: "other" }] })], /experiment 'e': shadow\[0\]\.percent must be a number 0\.\.100, got undefined/],
  ["shadow percent above 100", [exp({ shadow: [{ plan: "other", percent: 100.5 }] })], /shadow\[0\]\.percent 100\.5 is out of bounds 0\.\.100/],
  ["shadow percent negative", [exp({ shadow: [{ plan: "other", percent: -1 }] })], /shadow\[0\]\.percent -1 is out of bounds 0\.\.100/],
  ["shadow compareTop 0", [exp({ shadow: [{ plan: "other", percent: 1, compareTop: 0 }] })], /experiment 'e': shadow\[0\]\.compareTop 0 is out of bounds 1\.\.1000/],
  ["shadow compareTop 1001", [exp({ shadow: [{ plan: "other", percent: 1, compareTop: 1001 }] })], /shadow\[0\]\.compareTop 1001 is out of bounds 1\.\.1000/],
  ["shadow compareTop fractional", [exp({ shadow: [{ plan: "other", percent: 1, compareTop: 1.5 }] })], /shadow\[0\]\.compareTop must be an integer 1\.\.1000, got 1\.5/],
  ["shadow snake_case field", [exp({ shadow: [{ plan: "other", percent: 1, compare_top: 5 }] })], /shadow\[0\]: unknown field 'compare_top' \(allowed: plan, percent, compareTop; the DSL writes it compareTop\)/],
  // start and end
  ["startMs fractional", [exp({ startMs: 1.5 })], /experiment 'e': startMs must be an integer \(Unix ms\), got 1\.5/],
  ["endMs a string", [exp({ endMs: "2026-11-01" })], /experiment 'e': endMs must be an integer \(Unix ms\), got "2026-11-01"/],
  ["startMs after endMs", [exp({ startMs: 1800000000000, endMs: 1795000000000 })], /experiment 'e': startMs 1800000000000 is not before endMs 1795000000000/],
  ["startMs equal to endMs", [exp({ startMs: 5, endMs: 5 })], /experiment 'e': startMs 5 is not before endMs 5/],
];

for (const [name, xs, want] of cases) {
  test(`experiments error: ${name}`, () => {
    assert.match(compileErr(xs), want);
  });
}

// ---- the demo's experiments.ts and the cli ------------------------------------------------

const demoText = () => fs.readFileSync(path.join(ROOT, "experiments.json"), "utf8");

test("experiments.json is what experiments.ts compiles to, byte for byte", async () => {
  assert.equal(demoText(), await compileExperimentsFile());
});

test("the demo runs an experiment on feed (two quarter variants and a rerank shadow) and one shadowing rerank with rerank_nn", () => {
  assert.deepEqual(JSON.parse(demoText()), {
    experiments: [
      {
        name: "feed_weight",
        plan: "feed",
        salt: "feed-weight-1",
        variants: [
          { name: "more_likes", plan: "feed", params: { weight: 0.8 }, weight: 2500 },
          { name: "home_light", plan: "home_light", params: { limit: 50 }, weight: 2500 },
        ],
        shadow: [{ plan: "rerank", percent: 5, compare_top: 10 }],
      },
      {
        name: "rerank_nn_shadow",
        plan: "rerank",
        salt: "rerank-nn-1",
        variants: [],
        shadow: [{ plan: "rerank_nn", percent: 10, compare_top: 10 }],
      },
    ],
  });
  assert.match(demoText(), /"percent": 5\.0,/);
});

const run = (...a: string[]) => spawnSync(process.execPath, [CLI, ...a], { encoding: "utf8" });

test("check fails, naming experiments.json, when it differs, is missing or has no source", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "experiments-check-"));
  try {
    const out = path.join(dir, "experiments.json");
    fs.writeFileSync(out, demoText());
    const ok = run("check", "--json-dir", dir, "experiments.ts");
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /ok: 0 plans and experiments\.json match their sources/);
    fs.writeFileSync(out, demoText().replace('"weight": 2500', '"weight": 2000'));
    const differs = run("check", "--json-dir", dir, "experiments.ts");
    assert.equal(differs.status, 1);
    assert.match(differs.stderr, /experiments\.json: differs from what experiments\.ts compiles to; run npm --prefix plans run build and commit it/);
    fs.rmSync(out);
    const missing = run("check", "--json-dir", dir, "experiments.json");
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /experiments\.json: missing; run npm --prefix plans run build/);
    const built = run("build", "--json-dir", dir, "experiments.ts");
    assert.equal(built.status, 0, built.stdout + built.stderr);
    assert.match(built.stdout, /wrote experiments\.json/);
    assert.equal(fs.readFileSync(out, "utf8"), demoText());
    assert.deepEqual(fs.readdirSync(dir), ["experiments.json"], "naming the experiments builds no plan");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a plans folder with experiments.ts: plans.gen.ts types it, build writes experiments.json; without, none", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "experiments-dir-"));
  try {
    fs.writeFileSync(path.join(dir, "a.plan.ts"), `import { definePlan } from "./schema.gen.js";\nexport default definePlan({ name: "a", params: { n: { type: "i64", default: 5, min: 1, max: 9 } }, build: (c) => c.fixedSource() });\n`);
    fs.writeFileSync(path.join(dir, "b-2.plan.ts"), `import { definePlan } from "./schema.gen.js";\nexport default definePlan({ name: "b-2", build: (c) => c.fixedSource() });\n`);
    // No experiments.ts: no experiments.json.
    const plain = run("build", "--dir", dir);
    assert.equal(plain.status, 0, plain.stdout + plain.stderr);
    assert.ok(!fs.existsSync(path.join(dir, "experiments.json")));
    assert.match(fs.readFileSync(path.join(dir, "plans.gen.ts"), "utf8"), /import plan_b\$2 from "\.\/b-2\.plan\.js";[\s\S]*"b-2": plan_b\$2,/);
    assert.equal(run("check", "--dir", dir).status, 0);

    const src = (n: number) =>
      `import { defineExperiments } from "./plans.gen.js";\nexport default defineExperiments([{ name: "x", plan: "a", salt: "s", variants: [{ name: "v", plan: "a", params: { n: ${n} }, weight: 10 }], shadow: [{ plan: "b-2", percent: 1 }] }]);\n`;
    fs.writeFileSync(path.join(dir, "experiments.ts"), src(9));
    const built = run("build", "--dir", dir);
    assert.equal(built.status, 0, built.stdout + built.stderr);
    const j = JSON.parse(fs.readFileSync(path.join(dir, "experiments.json"), "utf8"));
    assert.deepEqual(j.experiments[0].variants, [{ name: "v", plan: "a", params: { n: 9 }, weight: 10 }]);
    const checked = run("check", "--dir", dir);
    assert.equal(checked.status, 0, checked.stdout + checked.stderr);
    assert.match(checked.stdout, /ok: 2 plans and experiments\.json of \S+ match their sources/);

    // A value outside the declared bounds: the compiler names the file, experiment and field.
    fs.writeFileSync(path.join(dir, "experiments.ts"), src(10));
    const bad = run("build", "--dir", dir);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /experiments\.ts: error: defineExperiments at \S*experiments\.ts:2:\d+: experiment 'x': variants\[0\] 'v': params\.n 10 is outside 1\.\.9 \(the min\/max plan 'a' declares for n\)/);

    // An unknown plan is a tsc error.
    fs.writeFileSync(path.join(dir, "experiments.ts"), src(9).replace('plan: "b-2"', 'plan: "b"'));
    const typed = run("build", "--dir", dir);
    assert.equal(typed.status, 1);
    assert.match(typed.stderr, /tsc failed:[\s\S]*experiments\.ts\(2,\d+\): error TS2322: Type '"b"' is not assignable to type '"a" \| "b-2"'/);

    // Typed with another folder's plans.
    const lib = path.relative(dir, path.join(ROOT, "lib", "index.js")).split(path.sep).join("/");
    fs.writeFileSync(path.join(dir, "experiments.ts"), `import { withPlans } from "${lib}";\nexport default withPlans({}).defineExperiments([]);\n`);
    const other = run("build", "--dir", dir);
    assert.equal(other.status, 1);
    assert.match(other.stderr, /experiments\.ts: error: the experiments are typed with other plans than this folder's \(a, b-2\); import defineExperiments from "\.\/plans\.gen\.js"/);

    // experiments.json without experiments.ts.
    fs.rmSync(path.join(dir, "experiments.ts"));
    const orphan = run("check", "--dir", dir);
    assert.equal(orphan.status, 1);
    assert.match(orphan.stderr, /experiments\.json: has no experiments\.ts source/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("the plans folders of examples/ have no experiments and write none", () => {
  const r = run("check", "--examples");
  assert.equal(r.status, 0, r.stdout + r.stderr);
  for (const d of ["plans", "i64"]) assert.ok(!fs.existsSync(path.resolve(ROOT, "..", "examples", "marketplace", d, "experiments.json")), d);
});
