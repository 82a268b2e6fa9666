// Two-phase ranking: a cheap score over every candidate keeps the top k, and only those
// pay for the rest of their features and the learned model (rerank.model.json, trained by
// ops/lib/train-demo-model), which orders the final page.
import { followedAndRecommended } from "./candidates.js";
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "rerank",
  description: "follow graph + recs, cheap score keeps the top k, the rerank model orders the top limit",
  params: {
    k: { type: "i64", default: 200, min: 1, max: 1000 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
  },
  // One request in a hundred is recorded in the served log, with the model's inputs and
  // the best 20 of the top k that were not served (docs/served-log.md); only a server
  // started with a `main` sink (ops/run starts one) records them.
  log: { sample: 0.01, sink: "main", candidates: { node: "top_k", top: 20 } },
  build: (ctx, P) => {
    // cache: item hashes are shared by many viewers, so they are read through the shard
    // cache (docs/cache.md), as the candidates' media lists are.
    return followedAndRecommended(ctx)
      .seenFilter({ id: "seen" })
      // Phase 1, every candidate: two fields and a linear score.
      .features({ id: "h", fields: ["likes", "quality"], cache: true })
      .vm({ id: "pre", outKey: "prescore", expr: (c) => c.likes.log1p().mul(0.5).add(c.quality.coalesce(0)) })
      .sort({ id: "pre_sort", key: "prescore", order: "desc" })
      .take({ id: "top_k", count: P.k })
      // Phase 2, the top k: the model's other features, then the model.
      .features({ id: "mf", fields: ["age_s", "nsfw"], cache: true })
      .model({ id: "model", model: "rerank", outKey: "score" })
      .sort({ id: "o", key: "score", order: "desc" })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author"]);
  },
});
