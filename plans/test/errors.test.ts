// Misuse that only the compiler can see (literal bounds, columns of strings, parse errors, …):
// each is a PlanError naming the plan, the call and, where there is one, its source location.
import { test } from "node:test";
import assert from "node:assert/strict";
import { definePlan, planText, E, PlanError, type ParamDecls } from "../lib/index.js";

type B = (ctx: any, P: any) => any;
function compileErr(build: B, params?: ParamDecls): string {
  try {
    planText(definePlan({ name: "bad", params, build } as any));
  } catch (e) {
    assert.ok(e instanceof PlanError, `not a PlanError: ${e}`);
    assert.match(e.message, /^plan 'bad': /);
    return e.message;
  }
  assert.fail("compiled without error");
}
const AT = /at test\/errors\.test\.ts:\d+:\d+: /; // the call site, mapped to the .ts source

const cases: [string, B, RegExp, ParamDecls?][] = [
  // literal bounds of the task table (docs/plan.md)
  ["take count 0", (c) => c.fixedSource().take({ count: 0 }), /take\(\) .*count 0 is out of bounds 1\.\.10000/],
  ["take count 10001", (c) => c.fixedSource().take({ count: 10001 }), /count 10001 is out of bounds 1\.\.10000/],
  ["take count 2.5", (c) => c.fixedSource().take({ count: 2.5 }), /count must be an integer/],
  ["follow fanout 0", (c) => c.viewer().follow({ fanout: 0 }), /follow\(\) .*fanout 0 is out of bounds 1\.\.1000/],
  ["recommendation fanout 1001", (c) => c.viewer().recommendation({ fanout: 1001 }), /recommendation\(\) .*fanout 1001 is out of bounds 1\.\.1000/],
  ["media per_author 101", (c) => c.viewer().follow().media({ perAuthor: 101 }), /media\(\) .*perAuthor 101 is out of bounds 1\.\.100/],
  ["fixed_source count -1", (c) => c.fixedSource({ count: -1 }), /fixed_source\(\) .*count -1 is out of bounds 0\.\.100000/],
  ["fixed_source count 100001", (c) => c.fixedSource({ count: 100001 }), /count 100001 is out of bounds 0\.\.100000/],
  ["sleep 60001", (c) => c.sleep({ durationMs: 60001 }), /sleep\(\) .*durationMs 60001 is out of bounds 0\.\.60000/],
  ["busy_cpu -1", (c) => c.fixedSource().busyCpu({ durationMs: -1 }), /busy_cpu\(\) .*durationMs -1 is out of bounds 0\.\.60000/],
  ["sleep fail_after_sleep not bool", (c) => c.sleep({ durationMs: 1, failAfterSleep: 1 }), /failAfterSleep must be a boolean/],
  ["timeoutMs 0", (c) => c.viewer({ timeoutMs: 0 }), /timeoutMs 0 is out of bounds/],
  ["timeoutMs past the server's bound", (c) => c.viewer({ timeoutMs: 60_001 }), /timeoutMs 60001 is out of bounds 1\.\.60000/],
  ["unknown option", (c) => c.fixedSource().take({ count: 1, cnt: 2 }), /unknown option 'cnt'/],
  ["bad endpoint", (c) => c.viewer({ endpoint: "" }), /endpoint must be an endpoint name/],
  ["cache not a bool", (c) => c.viewer().follow().media({ cache: "yes" }), /media\(\) .*cache must be a boolean, got "yes"/],
  ["cache as a request param", (c, P) => c.viewer({ cache: P.warm }), /viewer\(\) .*cache takes a literal boolean, not a request parameter \('warm'\)/, { warm: { type: "bool", default: true } }],
  ["cache on seen_filter", (c) => c.viewer().follow().seenFilter({ cache: true }), /seen_filter\(\) .*unknown option 'cache' \(allowed: endpoint, family, withinS, id, optional, timeoutMs\)/],
  ["cache on a CPU task", (c) => c.fixedSource().take({ count: 1, cache: true }), /take\(\) .*unknown option 'cache'/],
  ["sort order", (c) => c.fixedSource().sort({ key: "score", order: "up" }), /order must be "desc" or "asc"/],
  // diversify and cap (the column and bounds checks tsc cannot make on an untyped call)
  ["diversify key f64", (c) => c.fixedSource().diversify({ key: "score", score: "score" }), /diversify\(\) .*key: column 'score' is f64; diversify takes an i64 or str key column/],
  ["diversify score i64", (c) => c.viewer().follow().media().diversify({ key: "author", score: "id" }), /score: column 'id' is i64; diversify takes an f64 score column/],
  ["diversify unknown key", (c) => c.fixedSource().diversify({ key: "author", score: "score" }), /key: unknown column 'author' \(columns here: id, score\)/],
  ["diversify decay 1.5", (c) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: 1.5 }), /decay 1\.5 is out of bounds 0\.\.1/],
  ["diversify floor -0.1", (c) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", floor: -0.1 }), /floor -0\.1 is out of bounds 0\.\.1/],
  ["diversify decay NaN", (c) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: NaN }), /decay must be a number or an f64 parameter/],
  ["diversify decay param i64", (c, P) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: P.n }), /decay: parameter 'n' is i64; decay needs an f64/, { n: { type: "i64", default: 1 } }],
  ["diversify decay param default", (c, P) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: P.d }), /decay: the default 2 of parameter 'd' is outside 0\.\.1/, { d: { type: "f64", default: 2 } }],
  ["diversify decay param range", (c, P) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", decay: P.d }), /parameter 'd' allows 0\.\.2, wider than decay's bounds 0\.\.1/, { d: { type: "f64", default: 0.5, min: 0, max: 2 } }],
  ["diversify replaces id", (c) => c.viewer().follow().media().vm({ outKey: "s", expr: "1.0" }).diversify({ key: "author", score: "s", outKey: "id" }), /diversify may not replace the id column/],
  ["cap max 0", (c) => c.viewer().follow().media().cap({ key: "author", max: 0, window: 10 }), /cap\(\) .*max 0 is out of bounds 1\.\.10000/],
  ["cap window 10001", (c) => c.viewer().follow().media().cap({ key: "author", max: 1, window: 10001 }), /window 10001 is out of bounds 1\.\.10000/],
  ["cap key f64", (c) => c.fixedSource().cap({ key: "score", max: 1, window: 2 }), /key: column 'score' is f64; cap takes an i64 or str key column/],
  ["cap defer param", (c, P) => c.viewer().follow().media().cap({ key: "author", max: 1, window: 2, defer: P.b }), /defer takes a literal boolean, not a request parameter \('b'\)/, { b: { type: "bool", default: true } }],
  ["cap defer not bool", (c) => c.viewer().follow().media().cap({ key: "author", max: 1, window: 2, defer: 1 }), /defer must be a boolean, got 1/],
  // params
  ["undeclared P.x", (c, P) => c.fixedSource().take({ count: P.limit }), /parameter 'limit' is used at test\/errors\.test\.ts:\d+:\d+ but not declared/],
  ["undeclared E.param", (c) => c.fixedSource().vm({ outKey: "s", expr: E.param("w") }), /vm\(\) .*parameter 'w' is not declared/],
  ["undeclared $param", (c) => c.fixedSource().vm({ outKey: "s", expr: "score * $w" }), /parameter 'w' is not declared/],
  ["f64 param as count", (c, P) => c.fixedSource().take({ count: P.w }), /count: parameter 'w' is f64; count needs an i64/, { w: { type: "f64", default: 1 } }],
  ["param default out of task bounds", (c, P) => c.fixedSource().take({ count: P.n }), /count: the default 0 of parameter 'n' is outside 1\.\.10000/, { n: { type: "i64", default: 0 } }],
  ["param range wider than task bounds", (c, P) => c.fixedSource().take({ count: P.n }), /parameter 'n' allows 1\.\.20000, wider than count's bounds 1\.\.10000/, { n: { type: "i64", default: 5, min: 1, max: 20000 } }],
  ["i64 default not integer", (c) => c.fixedSource(), /params\.n: default 2\.5 is not an integer/, { n: { type: "i64", default: 2.5 } }],
  ["default outside min/max", (c) => c.fixedSource(), /params\.n: default 0 is outside 1\.\.5/, { n: { type: "i64", default: 0, min: 1, max: 5 } }],
  ["min > max", (c) => c.fixedSource(), /params\.n: min 5 > max 1/, { n: { type: "f64", default: 1, min: 5, max: 1 } }],
  ["unknown param type", (c) => c.fixedSource(), /params\.n: type "int" is not one of/, { n: { type: "int", default: 1 } as any }],
  ["str default not string", (c) => c.fixedSource(), /params\.s: default 1 is not a string/, { s: { type: "str", default: 1 } as any }],
  ["bad param name", (c) => c.fixedSource(), /params\.a-b: not a valid parameter name/, { "a-b": { type: "i64", default: 1 } }],
  // columns
  ["sort unknown column", (c) => c.fixedSource().sort({ key: "scor", order: "desc" }), /sort\(\) .*key: unknown column 'scor' \(columns here: id, score\)/],
  ["dedupe unknown column", (c) => c.viewer().follow().dedupe({ key: "author" }), /dedupe\(\) .*unknown column 'author'/],
  ["E.key unknown column", (c) => c.fixedSource().vm({ outKey: "s", expr: E.key("likes") }), /vm\(\) .*unknown column 'likes' \(columns here: id, score\)/],
  ["callback unknown column", (c) => c.fixedSource().vm({ outKey: "s", expr: (r: any) => r.likes }), /vm\(\) .*unknown column 'likes'/],
  ["string unknown column", (c) => c.fixedSource().filter({ pred: "likes > 1" }), /filter\(\) .*unknown column 'likes'/],
  ["output unknown column", (c) => c.fixedSource().output(["id", "likes"]), /output\(\) .*unknown column "likes"/],
  ["output duplicate column", (c) => c.fixedSource().output(["id", "id"]), /column 'id' is listed twice/],
  ["features empty", (c) => c.viewer().follow().features({ fields: [] }), /fields must be a non-empty list/],
  ["features unknown field", (c) => c.viewer().follow().features({ fields: ["views"] }), /fields: "views" is not a field of 'item' \(author, likes, age_s, category, country, quality, nsfw\)/],
  ["features duplicate field", (c) => c.viewer().follow().features({ fields: ["likes", "likes"] }), /fields: 'likes' is listed twice/],
  ["vm replaces id", (c) => c.fixedSource().vm({ outKey: "id", expr: "id + 1" }), /vm may not replace the id column/],
  ["vm bad outKey", (c) => c.fixedSource().vm({ outKey: "a b", expr: "id" }), /outKey "a b" is not a valid column name/],
  ["concat type conflict", (c) => c.fixedSource().concat(c.fixedSource().vm({ outKey: "score", expr: "'x'" })), /concat\(\) .*column 'score' is f64 in an earlier input but str in input 2/],
  // model (the file must be in the plan folder, plans/ here; test/model.test.ts has more)
  ["model name with a path", (c) => c.fixedSource().model({ model: "../x", outKey: "s" }), /model\(\) .*model "\.\.\/x" is not a model name/],
  ["model replaces id", (c) => c.fixedSource().model({ model: "rerank", outKey: "id" }), /model may not replace the id column/],
  ["model output", (c) => c.fixedSource().model({ model: "rerank", outKey: "s", output: "prob" }), /output must be "default" or "margin", got "prob"/],
  ["model feature on a str column", (c) => c.viewer().model({ model: "rerank", outKey: "s", features: { likes: "country" } }), /model\(\) .*features: 'likes' reads column 'country', which is str; model features need an i64, f64 or bool column/],
  ["model feature on an unknown column", (c) => c.viewer().model({ model: "rerank", outKey: "s", features: { likes: "views" } }), /features: 'likes' reads column 'views', which is not known here \(columns here: id, country, lang, age, premium\)/],
  ["model file missing", (c) => c.fixedSource().model({ model: "no_such_model", outKey: "s" }), /model\(\) at test\/errors\.test\.ts:\d+:\d+: node 'model': model file no_such_model\.model\.json is missing from the plan folder \S*plans;/],
  ["model feature column not fetched", (c) => c.viewer().follow().features({ fields: ["likes"] }).model({ model: "rerank", outKey: "s" }), /node 'model': model 'rerank' feature 'age_s' reads column 'age_s', which is not known here/],
  // expression typing (the server's load-time rules, docs/plan.md)
  ["arithmetic on str", (c) => c.viewer().vm({ outKey: "s", expr: "country + 1" }), /\+: operand country is str; arithmetic needs numbers/],
  ["log of str", (c) => c.viewer().vm({ outKey: "s", expr: E.log(E.key("lang")) }), /log: operand lang is str/],
  ["coalesce mixes types", (c) => c.viewer().vm({ outKey: "s", expr: "coalesce(country, 0)" }), /coalesce: operands mix types str and i64/],
  ["if mixes types", (c) => c.viewer().vm({ outKey: "s", expr: "if(age > 1, age, lang)" }), /if: operands mix types i64 and str/],
  ["always null", (c) => c.viewer().vm({ outKey: "s", expr: "coalesce(null, null)" }), /expr is always null/],
  ["cmp str with number", (c) => c.viewer().filter({ pred: "country == 1" }), /cmp ==: country is str but 1 is i64/],
  ["cmp with null", (c) => c.viewer().filter({ pred: "age == null" }), /comparing with null is always false \(use is_null\)/],
  ["in wrong type", (c) => c.viewer().filter({ pred: "country in ['US', 2]" }), /in: country is str but value 2 is i64/],
  ["in empty", (c) => c.viewer().filter({ pred: "age in []" }), /in: the list of values is empty/],
  ["regex on number", (c) => c.viewer().filter({ pred: "age ~ '1'" }), /regex: age is i64; regex matches strings/],
  ["regex bad pattern", (c) => c.viewer().filter({ pred: "lang ~ '('" }), /regex: bad pattern "\("/],
  ["regex lookahead", (c) => c.viewer().filter({ pred: "lang ~ 'a(?=b)'" }), /lookaround is not supported by RE2/],
  ["regex flags", (c) => c.viewer().filter({ pred: (r: any) => r.lang.matches(/a/g) }), /flags \/g are not supported/],
  ["expr not an expression", (c) => c.viewer().vm({ outKey: "s", expr: 42 }), /expr must be an expression/],
  ["callback returns a non-expression", (c) => c.viewer().filter({ pred: () => 1 }), /pred must be a predicate/],
  // expression strings
  ["parse error", (c) => c.viewer().vm({ outKey: "s", expr: "log1p(age" }), /cannot parse "log1p\(age": expected "\)" at column 10/],
  ["unknown function", (c) => c.viewer().vm({ outKey: "s", expr: "log2(age)" }), /unknown function log2 at column 1/],
  ["wrong arity", (c) => c.viewer().vm({ outKey: "s", expr: "pow(age)" }), /pow takes 2 argument\(s\), got 1/],
  ["condition as value", (c) => c.viewer().vm({ outKey: "s", expr: "age > 1" }), /"age > 1" is a condition; an expression \(a value\) is needed here/],
  ["value as condition", (c) => c.viewer().filter({ pred: "age + 1" }), /"age \+ 1" is a value; a condition/],
  ["bad character", (c) => c.viewer().filter({ pred: "age # 1" }), /unexpected character "#" at column 5/],
  // graph
  ["dead node", (c) => { const v = c.viewer(); v.follow(); return v.recommendation(); }, /follow\(\) at test\/errors\.test\.ts:\d+:\d+: this node does not reach the output node/],
  ["returns an array", (c) => [c.viewer(), c.viewer()], /build returned 2 nodes; a plan has one output node/],
  ["returns nothing", () => undefined, /build must return a node/],
  ["duplicate ids", (c) => c.viewer({ id: "v" }).follow({ id: "v" }), /node id 'v' is used twice/],
  ["bad id", (c) => c.viewer({ id: "my node" }), /id "my node" is not a valid node id/],
  ["concat of one", (c) => c.concat([c.viewer()]), /concat needs at least 2 inputs, got 1/],
  ["input not a node", (c) => c.viewer().concat({} as any), /input 2 is not a node/],
];

for (const [name, build, want, params] of cases) {
  test(`compile error: ${name}`, () => {
    const msg = compileErr(build, params);
    assert.match(msg, want);
  });
}

test("errors name the call site in the .ts source", () => {
  assert.match(compileErr((c) => c.fixedSource().take({ count: 0 })), AT);
});

test("a node of another plan is rejected", () => {
  let other: any;
  planText(definePlan({ name: "a", build: (c) => (other = c.viewer()) }));
  assert.match(compileErr((c) => c.viewer().concat(other)), /input 2 is a node of another plan/);
});

test("plan name and fields are checked", () => {
  assert.throws(() => planText(definePlan({ name: "bad name", build: (c) => c.viewer() })), /name must be letters, digits/);
  assert.throws(() => planText(definePlan({ name: "x", build: (c: any) => c.viewer(), outputs: 1 } as any)), /unknown field 'outputs'/);
});
