// The marketplace feed (examples/marketplace, docs/rank-your-own-data.md): listings of the
// sellers an account watches, newest first per seller, plus the model's recommendations;
// hydrated from the listing documents, scored, filtered, hidden listings dropped.
// examples/marketplace/i64/market.plan.ts is the same plan over the i64 twin of the schema.
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "market",
  description: "marketplace feed: watched sellers' shops + recommended listings, hydrated, scored, filtered",
  params: {
    limit: { type: "i64", default: 20, min: 1, max: 200 },
    watch_fanout: { type: "i64", default: 30, min: 1, max: 1000 },
    per_seller: { type: "i64", default: 10, min: 1, max: 100 },
    recs_fanout: { type: "i64", default: 100, min: 1, max: 1000 },
    w_rec: { type: "f64", default: 1.0 },
    w_rating: { type: "f64", default: 0.5 },
    w_views: { type: "f64", default: 0.1 },
    w_fresh: { type: "f64", default: 0.3 },
    max_price: { type: "f64", default: 5000.0 },
  },
  build: (ctx, P) => {
    const viewer = ctx.viewer({ id: "viewer", family: "account", fields: ["region", "tier", "vip"] });
    // watch: the sellers the account follows, by affinity (the score is kept as a column of
    // this node; media starts new rows, so it does not reach the listings).
    const sellers = viewer.follow({ id: "watch", family: "watch", fanout: P.watch_fanout, scoreAs: "affinity" });
    // shop: each seller's newest listings (score = recency, hours since the data set's start).
    const shops = sellers.media({ id: "shop", family: "shop", perAuthor: P.per_seller, sourceAs: "seller_id", scoreAs: "recency" });
    const recs = viewer.recommendation({ id: "recs", family: "recs", fanout: P.recs_fanout, scoreAs: "rec_score" });
    return shops
      .concat(recs, { id: "candidates" })
      .dedupe({ id: "dedupe" })
      .features({ id: "listing", family: "listing", fields: ["seller", "price", "title", "category", "in_stock", "rating", "views"], cache: true })
      .vm({
        id: "score",
        outKey: "score",
        // nulls propagate: a listing without a rating (or with a bad one) gets a null score and sorts last
        expr: (c) =>
          c.rec_score.coalesce(0).mul(P.w_rec)
            .add(c.rating.mul(P.w_rating), c.views.log1p().mul(P.w_views), c.recency.coalesce(0).mul(P.w_fresh).div(720)),
      })
      .filter({ id: "available", pred: (c) => c.in_stock.eq(1).and(c.price.le(P.max_price)) })
      .seenFilter({ id: "not_hidden", family: "hidden" })
      .sort({ id: "rank", key: "score", order: "desc" })
      .take({ id: "top", count: P.limit })
      .output(["id", "score", "seller", "price", "title"]);
  },
});
