// What a plan reads, derived from its JSON and the loaded schema (docs/plan.md "Tasks",
// docs/data.md). Pure: no DOM.

import type { PlanFile, PlanNode, SchemaAnswer } from "./types.js";

// The family each IO op reads when its node names none.
const DEFAULT_FAMILY: Record<string, string> = {
  viewer: "user", follow: "follow", recommendation: "recs", media: "media", features: "item", seen_filter: "seen",
};

/** The Redis family a node reads, or null for a node that reads none. */
export function familyOf(node: PlanNode): string | null {
  const fallback = DEFAULT_FAMILY[node.op];
  if (!fallback) return null;
  return typeof node.params["family"] === "string" ? (node.params["family"] as string) : fallback;
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

/** Whether the plan is keyed by string ids: its viewer or seen_filter reads a family
 *  with "id": "str" (docs/data.md "String ids"). */
export function takesStringIds(plan: PlanFile, schema: SchemaAnswer | null): boolean {
  return plan.nodes.some((node) => {
    const family = node.op === "viewer" || node.op === "seen_filter" ? familyOf(node) : null;
    return family !== null && schema?.schema.families[family]?.id === "str";
  });
}
