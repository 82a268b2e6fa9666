// Discover: items whose embedding is near the viewer's (the demo's item index, without what
// the viewer has seen) and the followed authors' newest media, scored with the viewer's
// similarity to each item besides likes and quality, diversified by author
// (docs/vectors.md, "The demo").
import { definePlan, E } from "./schema.gen.js";

export default definePlan({
  name: "discover",
  description: "embedding-nearest unseen items + followed authors' media, scored with similarity, likes and quality, diversified by author",
  params: {
    k: { type: "i64", default: 200, min: 1, max: 1000 },
    sim_weight: { type: "f64", default: 4 },
    weight: { type: "f64", default: 0.5 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
  },
  build: (ctx, P) => {
    // The viewer's row is its vector (user_emb): the query of ann and an operand of dot.
    const v = ctx.viewer({ id: "v", family: "user_emb" });
    const near = v.ann({ id: "a", index: "items", key: "emb", k: P.k, exclude: { family: "seen" } });
    const m = v.follow({ id: "f", fanout: 100 }).media({ id: "m", perAuthor: 5, cache: true });
    return near
      .concat(m, { id: "c" })
      .dedupe({ id: "d", key: "id" })
      // ann left the seen items out already; the followed authors' media may hold some.
      .seenFilter({ id: "u", family: "seen" })
      // author for every row (ann's have none yet): features replaces media's column.
      .features({ id: "h", fields: ["author", "likes", "quality", "nsfw"], cache: true })
      .features({ id: "e", family: "item_emb", fields: ["emb"], cache: true })
      .vm({
        id: "s",
        outKey: "score",
        expr: (c) => E.from(v, "emb").dot(c.emb).coalesce(0).mul(P.sim_weight).add(c.likes.log1p().mul(P.weight)).add(c.quality.coalesce(0)),
      })
      .filter({ id: "ok", pred: (c) => c.nsfw.eq(0) })
      .sort({ id: "o", key: "score", order: "desc" })
      .diversify({ id: "div", key: "author", score: "score", decay: 0.5, floor: 0.25 })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author", "similarity"]);
  },
});
