// A lighter home feed, the second plan `ops/bench feed` measures: about 240 Redis
// commands per request against feed's ~690 (viewer 1 + follow 1 + media 40 + recs 1 +
// seen 1 + features ~195 after dedupe), and a seen filter, which feed lacks.
import { followedAndRecommended } from "./candidates.js";
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "home_light",
  description: "lighter home feed: follow 40 x media 4 + recs 60, deduped, seen-filtered, scored, top 30",
  params: {
    weight: { type: "f64", default: 0.5 },
    limit: { type: "i64", default: 30, min: 1, max: 200 },
  },
  build: (ctx, P) => {
    // cache: item hashes are shared by many viewers, so they are read through the shard
    // cache (docs/cache.md), as the candidates' media lists are.
    return followedAndRecommended(ctx, { follow: 40, perAuthor: 4, recs: 60 })
      .seenFilter({ id: "seen" })
      .features({ id: "h", fields: ["likes", "quality", "nsfw"], cache: true })
      .vm({ id: "s", outKey: "score", expr: (c) => c.likes.log1p().mul(P.weight).add(c.quality.coalesce(0)) })
      .filter({ id: "ok", pred: (c) => c.nsfw.eq(0) })
      .sort({ id: "o", key: "score", order: "desc" })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author"]);
  },
});
