// Draws a run's node waterfall as SVG from explain's `nodes`: one row per node, its bar
// from start_us for took_us, the critical path marked, each node's status and rows beside
// it, its time and cache hits/misses after the bar. Called from the page's one thread.

import { criticalPath } from "./critical-path.js";
import { clip, s } from "./dom.js";
import type { NodeTiming, PlanFile } from "./types.js";
import { ms } from "./ui.js";

const LABEL_W = 300;
const BARS_W = 560;
const ROW_H = 22;
const TOP = 24;

function label(n: NodeTiming, degraded: boolean): string {
  const parts = [`${n.node_id} · ${n.op}`];
  if (n.status !== "ok") parts.push(n.status);
  if (degraded) parts.push("degraded");
  parts.push(`${n.rows} rows`);
  return clip(parts.join(" · "), 48);
}

/** "cache 3 hit / 97 miss" for a node that read through the shard's cache, else "". */
function cacheText(n: NodeTiming): string {
  if (n.cache_hits === undefined && n.cache_misses === undefined) return "";
  return `cache ${n.cache_hits ?? 0} hit / ${n.cache_misses ?? 0} miss`;
}

/** The waterfall; each bar is a `.wf-bar[data-node-id]`, `.critical` on the critical path. */
export function waterfallSvg(nodes: NodeTiming[], plan: PlanFile, degraded: string[], tookUs: number): SVGSVGElement {
  const inputs = new Map(plan.nodes.map((n) => [n.node_id, n.inputs]));
  const critical = new Set(criticalPath(nodes.map((n) => ({ id: n.node_id, inputs: inputs.get(n.node_id) ?? [], start_us: n.start_us, took_us: n.took_us, status: n.status }))));
  const span = Math.max(1, tookUs, ...nodes.map((n) => n.start_us + n.took_us));
  const x = (us: number): number => LABEL_W + (us / span) * BARS_W;
  const width = LABEL_W + BARS_W + (nodes.some((n) => cacheText(n)) ? 260 : 90);
  const height = TOP + nodes.length * ROW_H + 8;
  const svg = s("svg", { class: "waterfall", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  svg.appendChild(s("text", { x: LABEL_W, y: 14, class: "axis" }, "0"));
  svg.appendChild(s("text", { x: LABEL_W + BARS_W, y: 14, class: "axis", "text-anchor": "end" }, ms(span)));
  svg.appendChild(s("line", { x1: LABEL_W, y1: TOP - 4, x2: LABEL_W + BARS_W, y2: TOP - 4, class: "axis-line" }));
  nodes.forEach((n, i) => {
    const y = TOP + i * ROW_H;
    const isDegraded = degraded.includes(n.node_id);
    const cls = ["wf-bar", `status-${n.status}`, critical.has(n.node_id) ? "critical" : "", isDegraded ? "degraded" : ""].filter(Boolean).join(" ");
    const g = s("g", { class: cls, "data-node-id": n.node_id, "data-status": n.status, "data-start-us": n.start_us, "data-took-us": n.took_us });
    g.appendChild(s("title", {}, `${n.node_id} (${n.op}): ${n.status}, start ${ms(n.start_us)}, took ${ms(n.took_us)}, ${n.rows} rows` +
      (n.rows_in !== undefined ? ` from ${n.rows_in}` : "") + (cacheText(n) ? `, ${cacheText(n)}` : "") +
      (critical.has(n.node_id) ? " — on the critical path" : "")));
    g.appendChild(s("text", { x: 4, y: y + 15, class: "wf-label" }, label(n, isDegraded)));
    const bx = x(n.start_us);
    g.appendChild(s("rect", { x: bx, y: y + 4, width: Math.max(2, x(n.start_us + n.took_us) - bx), height: ROW_H - 8, rx: 2 }));
    g.appendChild(s("text", { x: Math.min(x(n.start_us + n.took_us) + 4, LABEL_W + BARS_W + 4), y: y + 15, class: "wf-took" },
      [ms(n.took_us), cacheText(n)].filter(Boolean).join(" · ")));
    svg.appendChild(g);
  });
  return svg;
}
