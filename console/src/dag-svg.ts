// Draws a plan's DAG as SVG from its layered layout (dag-layout.ts), top to bottom: a box per node with
// its id, op, key params and model; an arrow per input edge. Called from the page's one thread.

import { layout, type Slot } from "./dag-layout.js";
import { clip, s } from "./dom.js";
import { opInfo } from "./plan-info.js";
import type { PlanFile, PlanNode } from "./types.js";

const BOX_W = 190;
const BOX_H = 66;
const GAP_X = 24;
const GAP_Y = 30;
const PAD = 12;

/** A short text for a param value: refs to request params as $name. */
function paramText(v: unknown): string {
  if (v && typeof v === "object" && !Array.isArray(v) && "param" in v) return `$${String((v as { param: unknown }).param)}`;
  if (Array.isArray(v)) return v.map(paramText).join(",");
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The lines under a node's op: its params but the endpoint (the same for almost every
 *  node), at most three, each cut to fit the box. */
export function keyParams(node: PlanNode): string[] {
  const lines = Object.entries(node.params)
    .filter(([k]) => k !== "endpoint" && k !== "model")
    .map(([k, v]) => `${k}: ${paramText(v)}`);
  if (node.optional) lines.push("optional");
  if (node.timeout_ms !== undefined) lines.push(`timeout ${node.timeout_ms} ms`);
  const shown = lines.slice(0, 3).map((l) => clip(l, 30));
  if (lines.length > 3) shown[2] = clip(`${shown[2]} (+${lines.length - 3})`, 30);
  return shown;
}

function nodeBox(node: PlanNode, x: number, y: number, isOutput: boolean): SVGGElement {
  const model = typeof node.params["model"] === "string" ? (node.params["model"] as string) : null;
  const cls = ["dag-node", `op-${node.op}`, node.optional ? "optional" : "", isOutput ? "output" : ""];
  const g = s("g", { class: cls.filter(Boolean).join(" "), "data-node-id": node.node_id, transform: `translate(${x},${y})` });
  // The tooltip: the op's line of doc from the server's catalogue, then the node's JSON.
  const doc = opInfo(node.op)?.doc;
  const json = JSON.stringify({ node_id: node.node_id, op: node.op, inputs: node.inputs, params: node.params }, null, 1);
  g.appendChild(s("title", {}, doc ? `${node.op}: ${doc}\n${json}` : json));
  g.appendChild(s("rect", { width: BOX_W, height: BOX_H, rx: 6 }));
  g.appendChild(s("text", { x: 8, y: 16, class: "node-id" }, clip(node.node_id, 18)));
  g.appendChild(s("text", { x: BOX_W - 8, y: 16, class: "node-op", "text-anchor": "end" }, clip(node.op, 16)));
  const lines = model ? [`model: ${clip(model, 22)}`, ...keyParams(node).slice(0, 2)] : keyParams(node);
  lines.forEach((line, i) => g.appendChild(s("text", { x: 8, y: 32 + i * 13, class: model && i === 0 ? "node-model" : "node-param" }, line)));
  return g;
}

/** A vertical S-curve from (x1, y1) down to (x2, y2). */
function curve(x1: number, y1: number, x2: number, y2: number): string {
  const mid = (y1 + y2) / 2;
  return `C${x1},${mid} ${x2},${mid} ${x2},${y2}`;
}

/** The SVG of the plan's DAG, top to bottom; nodes carry data-node-id, edges data-from
 *  and data-to. Each layer is centred under the widest one. */
export function dagSvg(plan: PlanFile): SVGSVGElement {
  const { nodes, edges, widths } = layout(plan.nodes.map((n) => ({ id: n.node_id, inputs: n.inputs })));
  const widest = Math.max(1, ...widths);
  const at = (slot: Slot): { x: number; y: number } => ({
    x: PAD + ((widest - (widths[slot.layer] ?? 1)) / 2 + slot.row) * (BOX_W + GAP_X),
    y: PAD + slot.layer * (BOX_H + GAP_Y),
  });
  const width = PAD * 2 + widest * (BOX_W + GAP_X) - GAP_X;
  const height = PAD * 2 + widths.length * (BOX_H + GAP_Y) - GAP_Y;
  const svg = s("svg", { class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  svg.appendChild(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
    s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow-head" }))));
  for (const e of edges) {
    const from = at(nodes.get(e.from)!), to = at(nodes.get(e.to)!);
    let x = from.x + BOX_W / 2, y = from.y + BOX_H;
    let d = `M${x},${y}`;
    // Through each waypoint's slot: a curve down to its top, a straight line through it.
    for (const w of e.via.map(at)) {
      d += ` ${curve(x, y, w.x + BOX_W / 2, w.y)} L${w.x + BOX_W / 2},${w.y + BOX_H}`;
      x = w.x + BOX_W / 2;
      y = w.y + BOX_H;
    }
    d += ` ${curve(x, y, to.x + BOX_W / 2, to.y)}`;
    svg.appendChild(s("path", { class: "dag-edge", "data-from": e.from, "data-to": e.to, d, "marker-end": "url(#arrow)" }));
  }
  for (const node of plan.nodes) {
    const p = at(nodes.get(node.node_id)!);
    svg.appendChild(nodeBox(node, p.x, p.y, node.node_id === plan.output.node));
  }
  return svg;
}
