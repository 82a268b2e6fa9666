// For you: the home feed's candidates, without what the viewer was served in the last hour,
// scored with their click-through rate of the last day (the demo's events, docs/events.md).
import { followedAndRecommended } from "./candidates.js";
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "for_you",
  description: "home feed's candidates, not served in the last hour, scored with likes, quality and a day's click-through rate",
  params: {
    weight: { type: "f64", default: 0.5 },
    ctr_weight: { type: "f64", default: 20 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
  },
  // Every answer's items go into served:{user}, which the seen filter below reads: five calls
  // in a row never show an item twice (docs/plan.md, "served_state").
  servedState: { family: "served", max: 500, ttlS: 604800 },
  build: (ctx, P) => {
    return followedAndRecommended(ctx)
      .seenFilter({ id: "u", family: "served", withinS: 3600 })
      .features({ id: "h", fields: ["likes", "quality", "nsfw"], cache: true })
      // Counters are never cached: they change with every event (docs/events.md).
      .features({ id: "k", family: "item_counts", fields: ["ctr_1d"] })
      .vm({
        id: "s",
        outKey: "score",
        expr: (c) => c.likes.log1p().mul(P.weight).add(c.quality.coalesce(0)).add(c.ctr_1d.coalesce(0).mul(P.ctr_weight)),
      })
      .filter({ id: "ok", pred: (c) => c.nsfw.eq(0) })
      .sort({ id: "o", key: "score", order: "desc" })
      .diversify({ id: "div", key: "author", score: "score", decay: 0.5, floor: 0.25 })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author", "ctr_1d"]);
  },
});
