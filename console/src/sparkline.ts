// A small SVG line of a series of values (null: a gap). Called from the page's one thread.

import { s } from "./dom.js";

const W = 160;
const H = 28;

export function sparkline(values: (number | null)[], cls: string): SVGSVGElement {
  const svg = s("svg", { class: `spark ${cls}`, width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  const finite = values.filter((v): v is number => v !== null);
  const max = Math.max(0, ...finite);
  const step = values.length > 1 ? W / (values.length - 1) : 0;
  // Each run of values without a gap is its own polyline.
  let run: string[] = [];
  const flush = (): void => {
    if (run.length > 1) svg.appendChild(s("polyline", { points: run.join(" ") }));
    if (run.length === 1) svg.appendChild(s("circle", { cx: run[0]!.split(",")[0]!, cy: run[0]!.split(",")[1]!, r: 1.5 }));
    run = [];
  };
  values.forEach((v, i) => {
    if (v === null) return flush();
    const y = max > 0 ? H - 2 - (v / max) * (H - 4) : H - 2;
    run.push(`${(i * step).toFixed(1)},${y.toFixed(1)}`);
  });
  flush();
  return svg;
}
