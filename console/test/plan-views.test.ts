/// <reference types="node" />
// The DAG layout, the critical path and the request checks.
import assert from "node:assert/strict";
import { test } from "node:test";
import { criticalPath } from "../src/critical-path.js";
import { layout } from "../src/dag-layout.js";
import { familyOf, opInfo, takesStringIds } from "../src/plan-info.js";
import { parseParams, parseUserId } from "../src/request-check.js";
import type { PlanFile } from "../src/types.js";

test("layers by depth; a long edge passes through waypoints", () => {
  const l = layout([{ id: "v", inputs: [] }, { id: "f", inputs: ["v"] }, { id: "m", inputs: ["f"] },
    { id: "r", inputs: ["v"] }, { id: "c", inputs: ["m", "r"] }]);
  assert.deepEqual([...l.nodes].map(([id, s]) => [id, s.layer]), [["v", 0], ["f", 1], ["m", 2], ["r", 1], ["c", 3]]);
  assert.deepEqual(l.widths, [1, 2, 2, 1]);
  const rc = l.edges.find((e) => e.from === "r")!;
  assert.deepEqual(rc.via.map((s) => s.layer), [2]);
  assert.notEqual(rc.via[0]!.row, l.nodes.get("m")!.row);
});

test("the critical path walks back through the input that ended last", () => {
  const n = (id: string, inputs: string[], start: number, took: number, status = "ok") => ({ id, inputs, start_us: start, took_us: took, status });
  assert.deepEqual(criticalPath([n("v", [], 0, 10), n("f", ["v"], 10, 50), n("r", ["v"], 10, 5), n("c", ["f", "r"], 60, 1), n("t", ["c"], 61, 0)]),
    ["v", "f", "c", "t"]);
  assert.deepEqual(criticalPath([n("v", [], 0, 10), n("s", ["v"], 0, 0, "skipped")]), ["v"]);
});

const feed = { name: "feed", params: { limit: { type: "i64", min: 1, max: 500 }, weight: { type: "f64" }, country: { type: "str" } },
  nodes: [], output: { node: "t" } } as unknown as PlanFile;

test("user_id as the plan expects it", () => {
  assert.deepEqual(parseUserId(" 42 ", false), { value: 42 });
  assert.ok("error" in parseUserId("", false));
  assert.ok("error" in parseUserId("4.2", false));
  assert.ok("error" in parseUserId("-1", false));
  assert.ok("error" in parseUserId("9223372036854775808", false));
  assert.deepEqual(parseUserId("u-7", true), { value: "u-7" });
  assert.ok("error" in parseUserId("a{b", true));
  assert.ok("error" in parseUserId("x".repeat(257), true));
});

test("params: a JSON object of declared params of the right type within bounds", () => {
  assert.deepEqual(parseParams("", feed), { value: {} });
  assert.deepEqual(parseParams('{"limit": 20, "country": "FR"}', feed), { value: { limit: 20, country: "FR" } });
  for (const bad of ["[1]", "{", '"x"', '{"limit": 0}', '{"limit": 2.5}', '{"weight": "1"}', '{"nope": 1}', '{"country": 3}']) {
    assert.ok("error" in parseParams(bad, feed), bad);
  }
});

test("families and docs come from the server's op catalogue (plans/ops.json)", () => {
  const node = (op: string, params: Record<string, unknown> = {}) => ({ node_id: op, op, inputs: [], params }) as unknown as PlanFile["nodes"][number];
  assert.equal(familyOf(node("viewer")), "user");
  assert.equal(familyOf(node("recommendation")), "recs");
  assert.equal(familyOf(node("features", { family: "item_json" })), "item_json");
  assert.equal(familyOf(node("take")), null);
  assert.equal(familyOf(node("no_such_op")), null);
  assert.ok(opInfo("sort")?.doc.length);
  const plan = { nodes: [node("seen_filter", { family: "seen_s" })] } as unknown as PlanFile;
  const schema = (id: string) => ({ schema: { families: { seen_s: { type: "set", id } } } }) as never;
  assert.equal(takesStringIds(plan, schema("str")), true);
  assert.equal(takesStringIds(plan, schema("i64")), false);
});
