// Rates from the cumulative counters of /console/api/metrics: each poll is compared with
// the one before it, as Prometheus' rate() and histogram_quantile() would over that
// interval. Keeps at most WINDOW_MS of points per plan, and of the whole server's
// requests/s and events/s. Pure: no DOM.

import type { MetricsSnapshot, PlanMetrics } from "./types.js";

export const WINDOW_MS = 10 * 60 * 1000;

export interface Point {
  t_ms: number;
  rps: number;
  errorRate: number | null; // errors / requests in the interval; null without requests
  p50: number | null; // ms; null without requests
  p99: number | null;
}

/** The whole server between two polls: requests/s over every plan, events/s accepted. */
export interface TotalPoint {
  t_ms: number;
  rps: number;
  eps: number | null; // null when the server counts no events (an older rankd)
}

/** The q-quantile (0..1) of the requests counted between two cumulative histograms,
 *  interpolated linearly inside its bucket (from 0 for the first). A quantile in the
 *  +Inf bucket is the highest finite bound, as histogram_quantile answers. Null when no
 *  request was counted. `le` has one entry less than the counts (the +Inf bucket). */
export function quantileOfDelta(le: number[], before: number[], after: number[], q: number): number | null {
  const delta = after.map((c, i) => c - (before[i] ?? 0));
  const total = delta[delta.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  for (let i = 0; i < le.length; i++) {
    if (delta[i]! >= rank) {
      const lower = i === 0 ? 0 : le[i - 1]!;
      const below = i === 0 ? 0 : delta[i - 1]!;
      const inBucket = delta[i]! - below;
      return inBucket > 0 ? lower + (le[i]! - lower) * ((rank - below) / inBucket) : le[i]!;
    }
  }
  return le[le.length - 1] ?? null;
}

/** The point between two polls of one plan, or null when the counters went back (rankd
 *  restarted) or no time passed. */
export function pointBetween(before: PlanMetrics, after: PlanMetrics, dtMs: number, tMs: number): Point | null {
  const requests = after.requests - before.requests;
  const errors = after.errors - before.errors;
  if (dtMs <= 0 || requests < 0 || errors < 0) return null;
  const { le } = after.duration_ms;
  const b = before.duration_ms.counts;
  const a = after.duration_ms.counts;
  return {
    t_ms: tMs,
    rps: (requests * 1000) / dtMs,
    errorRate: requests > 0 ? errors / requests : null,
    p50: quantileOfDelta(le, b, a, 0.5),
    p99: quantileOfDelta(le, b, a, 0.99),
  };
}

/** The server's point between two polls, or null when a counter went back (rankd
 *  restarted) or no time passed. Requests of plans in both polls; events accepted (POST
 *  /events answered 200), as rate(rankd_events_total{outcome="accepted"}). */
export function totalBetween(before: MetricsSnapshot, after: MetricsSnapshot): TotalPoint | null {
  const dtMs = after.now_ms - before.now_ms;
  if (dtMs <= 0) return null;
  let requests = 0;
  for (const [plan, now] of Object.entries(after.plans)) {
    const was = before.plans[plan];
    if (was) requests += now.requests - was.requests;
  }
  const events = before.events && after.events ? after.events.accepted - before.events.accepted : null;
  if (requests < 0 || (events !== null && events < 0)) return null;
  return { t_ms: after.now_ms, rps: (requests * 1000) / dtMs, eps: events === null ? null : (events * 1000) / dtMs };
}

/** Per-plan series built from successive snapshots, and the server's. */
export class LiveSeries {
  private last: MetricsSnapshot | null = null;
  readonly points = new Map<string, Point[]>();
  readonly totals: TotalPoint[] = [];

  /** Adds the deltas from the previous snapshot; drops points older than WINDOW_MS. */
  add(snap: MetricsSnapshot): void {
    const prev = this.last;
    this.last = snap;
    const total = prev ? totalBetween(prev, snap) : null;
    if (total) this.totals.push(total);
    while (this.totals.length && this.totals[0]!.t_ms < snap.now_ms - WINDOW_MS) this.totals.shift();
    for (const [plan, now] of Object.entries(snap.plans)) {
      const series = this.points.get(plan) ?? [];
      this.points.set(plan, series);
      const before = prev?.plans[plan];
      if (!prev || !before) continue;
      const p = pointBetween(before, now, snap.now_ms - prev.now_ms, snap.now_ms);
      if (p) series.push(p);
      while (series.length && series[0]!.t_ms < snap.now_ms - WINDOW_MS) series.shift();
    }
    // A plan no longer loaded drops out.
    for (const plan of [...this.points.keys()]) if (!(plan in snap.plans)) this.points.delete(plan);
  }
}
