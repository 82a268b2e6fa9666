// The home feed: follow graph + recs, hydrated, scored, filtered, diversified by author.
import { followedAndRecommended } from "./candidates.js";
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "feed",
  description: "home feed: follow graph + recs, hydrated, scored, filtered, diversified by author",
  params: {
    weight: { type: "f64", default: 0.5 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
    country: { type: "str", default: "US" },
  },
  build: (ctx, P) => {
    // cache: item hashes are shared by many viewers, so they are read through the shard
    // cache (docs/cache.md), as the candidates' media lists are.
    return followedAndRecommended(ctx)
      .features({ id: "h", fields: ["likes", "age_s", "quality", "country", "nsfw"], cache: true })
      .vm({ id: "s", outKey: "score", expr: (c) => c.likes.log1p().mul(P.weight).add(c.quality.coalesce(0)) })
      .filter({ id: "ok", pred: (c) => c.nsfw.eq(0).and(c.score.ge(0.1)) })
      .sort({ id: "o", key: "score", order: "desc" })
      // No author fills the top: each further post of an author keeps less of its score
      // (1, 0.625, 0.44, …, toward 0.25). Recommended items have no author (null): never
      // discounted.
      .diversify({ id: "div", key: "author", score: "score", decay: 0.5, floor: 0.25 })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author"]);
  },
});
