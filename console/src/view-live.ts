// #/live: polls /console/api/metrics every 2 s and shows the server's requests/s and
// events/s (POST /events accepted), then, per plan, requests/s, p50 and p99 latency and
// the error rate of the last interval, with sparklines of the last 10 minutes
// (live-stats.ts). Polling stops when the page leaves the view.
// Called from the page's one thread.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { LiveSeries, type Point, type TotalPoint } from "./live-stats.js";
import { sparkline } from "./sparkline.js";
import { errorBox, fmt } from "./ui.js";

const POLL_MS = 2000;

function planRow(plan: string, points: Point[]): HTMLElement {
  const last = points[points.length - 1];
  const pct = (v: number | null | undefined): string => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)}%`);
  return h("tr", { "data-plan": plan },
    h("td", {}, plan),
    h("td", { class: "num rps" }, fmt(last?.rps, 2)),
    h("td", { class: "num p50" }, fmt(last?.p50, 2)),
    h("td", { class: "num p99" }, fmt(last?.p99, 2)),
    h("td", { class: "num errors" }, pct(last?.errorRate)),
    h("td", {}, sparkline(points.map((p) => p.rps), "rps")),
    h("td", {}, sparkline(points.map((p) => p.p99), "p99")));
}

function totals(points: TotalPoint[]): HTMLElement {
  const last = points[points.length - 1];
  return h("table", { class: "live-totals" },
    h("thead", {}, h("tr", {}, ...["server", "req/s", "events/s", "req/s (10 min)", "events/s (10 min)"].map((t) => h("th", {}, t)))),
    h("tbody", {}, h("tr", {},
      h("td", {}, "all plans"),
      h("td", { class: "num rps" }, fmt(last?.rps, 2)),
      h("td", { class: "num eps" }, fmt(last?.eps, 2)),
      h("td", {}, sparkline(points.map((p) => p.rps), "rps")),
      h("td", {}, sparkline(points.map((p) => p.eps), "eps")))));
}

function table(series: LiveSeries): HTMLElement {
  const plans = [...series.points.keys()].sort();
  return h("table", { class: "live" },
    h("thead", {}, h("tr", {}, ...["plan", "req/s", "p50 ms", "p99 ms", "errors", "req/s (10 min)", "p99 (10 min)"].map((t) => h("th", {}, t)))),
    h("tbody", {}, ...plans.map((p) => planRow(p, series.points.get(p) ?? []))));
}

/** Starts polling into `root`; returns the function that stops it. */
export function renderLive(root: HTMLElement): () => void {
  const series = new LiveSeries();
  const status = h("p", { class: "muted live-status" }, "waiting for the first two polls…");
  const body = h("div", {});
  replace(root, h("h2", {}, "Live"), h("p", { class: "muted" }, "Rates between successive polls of /console/api/metrics (every 2 s; the last 10 minutes kept)."), status, body);
  let stopped = false;
  let timer = 0;
  const poll = async (): Promise<void> => {
    try {
      const snap = await api.metrics();
      if (stopped) return;
      series.add(snap);
      replace(status, `last poll ${new Date(snap.now_ms).toISOString().slice(11, 19)} UTC`);
      replace(body, totals(series.totals), table(series));
    } catch (e) {
      if (!stopped) replace(status, errorBox(e));
    }
    // The next poll starts after this one ends: a slow answer never stacks polls.
    if (!stopped) timer = window.setTimeout(() => void poll(), POLL_MS);
  };
  void poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
