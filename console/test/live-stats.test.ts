/// <reference types="node" />
// Rates and quantiles between two polls of the cumulative counters.
import assert from "node:assert/strict";
import { test } from "node:test";
import { LiveSeries, WINDOW_MS, pointBetween, quantileOfDelta, totalBetween } from "../src/live-stats.js";
import type { PlanMetrics } from "../src/types.js";

const le = [1, 2, 5];

test("quantiles interpolate inside the bucket of the deltas", () => {
  // 10 requests in the interval: 4 ≤ 1 ms, 4 in (1, 2], 2 in (2, 5].
  assert.equal(quantileOfDelta(le, [0, 0, 0, 0], [4, 8, 10, 10], 0.5), 1.25);
  assert.equal(quantileOfDelta(le, [0, 0, 0, 0], [4, 8, 10, 10], 0.2), 0.5);
  // Requests counted before the interval do not count.
  assert.equal(quantileOfDelta(le, [100, 100, 100, 100], [104, 108, 110, 110], 0.5), 1.25);
  // In the +Inf bucket: the highest finite bound.
  assert.equal(quantileOfDelta(le, [0, 0, 0, 0], [0, 0, 0, 3], 0.99), 5);
  assert.equal(quantileOfDelta(le, [1, 1, 1, 1], [1, 1, 1, 1], 0.5), null);
});

function plan(requests: number, errors: number, counts: number[]): PlanMetrics {
  return { requests, errors, outcomes: {}, duration_ms: { le, counts } };
}

test("a point: requests/s, error rate; none when counters went back", () => {
  const p = pointBetween(plan(10, 1, [5, 9, 10, 10]), plan(30, 3, [15, 29, 30, 30]), 2000, 99);
  assert.deepEqual({ rps: p?.rps, errorRate: p?.errorRate }, { rps: 10, errorRate: 0.1 });
  assert.equal(pointBetween(plan(30, 0, [0, 0, 0, 30]), plan(2, 0, [0, 0, 0, 2]), 2000, 99), null);
});

test("the series keeps ten minutes", () => {
  const s = new LiveSeries();
  for (let t = 0; t <= WINDOW_MS + 20000; t += 2000) s.add({ now_ms: t, plans: { feed: plan(t, 0, [t, t, t, t]) } });
  const points = s.points.get("feed")!;
  assert.ok(points.length <= WINDOW_MS / 2000 + 1);
  assert.ok(points[0]!.t_ms >= 20000);
  s.add({ now_ms: WINDOW_MS + 30000, plans: {} });
  assert.equal(s.points.has("feed"), false);
});

test("the server's requests/s over every plan and events/s accepted", () => {
  const before = { now_ms: 1000, plans: { a: plan(10, 0, [0, 0, 0, 10]), b: plan(5, 0, [0, 0, 0, 5]) }, events: { accepted: 100, failed: 3 } };
  const after = {
    now_ms: 3000,
    plans: { a: plan(30, 0, [0, 0, 0, 30]), b: plan(7, 0, [0, 0, 0, 7]), c: plan(50, 0, [0, 0, 0, 50]) },
    events: { accepted: 500, failed: 9 },
  };
  // c was not in the first poll: none of its requests count yet. Failed events do not count.
  assert.deepEqual(totalBetween(before, after), { t_ms: 3000, rps: 11, eps: 200 });
  // A restart (counters back) or no time: no point; a server without events: eps null.
  assert.equal(totalBetween(after, { ...before, now_ms: 5000 }), null);
  assert.equal(totalBetween(before, { ...after, now_ms: 1000 }), null);
  assert.deepEqual(totalBetween({ now_ms: 0, plans: {} }, { now_ms: 1000, plans: {} }), { t_ms: 1000, rps: 0, eps: null });
  const s = new LiveSeries();
  s.add(before);
  s.add(after);
  assert.deepEqual(s.totals.map((p) => p.eps), [200]);
});
