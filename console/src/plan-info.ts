// What a plan reads, derived from its JSON, the loaded schema (docs/plan.md "Tasks",
// docs/data.md) and the server's op catalogue (plans/ops.json, `rankd ops --json`, which
// the build bundles). Pure: no DOM.

import catalogue from "../../plans/ops.json";
import type { PlanFile, PlanNode, SchemaAnswer } from "./types.js";

/** One op of the catalogue, as far as the console reads it. */
export interface OpInfo {
  readonly doc: string;
  readonly family: { readonly types: readonly string[]; readonly keyed_by: string } | null;
  readonly params: Readonly<Record<string, { readonly type: string; readonly default?: unknown }>>;
}

const OPS: Readonly<Record<string, OpInfo>> = catalogue.ops;

/** The catalogue's entry of `op`, or undefined for an op this console does not know. */
export function opInfo(op: string): OpInfo | undefined {
  return OPS[op];
}

/** The Redis family a node reads (its `family` param, else its op's default), or null for
 *  a node that reads none. */
export function familyOf(node: PlanNode): string | null {
  const info = OPS[node.op];
  if (!info?.family) return null;
  const given = node.params["family"];
  return typeof given === "string" ? given : String(info.params["family"]?.default ?? "");
}

/** The families a plan reads, each with the nodes that read it. */
export function familiesOf(plan: PlanFile): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const node of plan.nodes) {
    const family = familyOf(node);
    if (family) out.set(family, [...(out.get(family) ?? []), node.node_id]);
  }
  return out;
}

/** Whether the plan is keyed by string ids: a node that reads a family keyed by the
 *  user_id (viewer, seen_filter) reads one with "id": "str" (docs/data.md "String ids"). */
export function takesStringIds(plan: PlanFile, schema: SchemaAnswer | null): boolean {
  return plan.nodes.some((node) => {
    const family = OPS[node.op]?.family?.keyed_by === "user_id" ? familyOf(node) : null;
    return family !== null && schema?.schema.families[family]?.id === "str";
  });
}
