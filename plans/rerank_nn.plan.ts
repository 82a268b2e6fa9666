// rerank with a neural model: the same two phases as rerank.plan.ts, but the top k are
// ordered by rerank_nn.onnx, an MLP trained by `ops/lib/train-demo-model --kind mlp` on the
// same items and labels as the tree model (docs/models.md, "ONNX models"). The model reads
// one float input x of four values: log-scaled likes and age, quality and nsfw; a missing
// field counts as 0, as in training.
import { followedAndRecommended } from "./candidates.js";
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "rerank_nn",
  description: "follow graph + recs, cheap score keeps the top k, the rerank_nn MLP orders the top limit",
  params: {
    k: { type: "i64", default: 200, min: 1, max: 1000 },
    limit: { type: "i64", default: 50, min: 1, max: 500 },
  },
  log: { sample: 0.01, sink: "main", candidates: { node: "top_k", top: 20 } },
  build: (ctx, P) => {
    return followedAndRecommended(ctx)
      .seenFilter({ id: "seen" })
      // Phase 1, every candidate: two fields and a linear score.
      .features({ id: "h", fields: ["likes", "quality"], cache: true })
      .vm({ id: "pre", outKey: "prescore", expr: (c) => c.likes.log1p().mul(0.5).add(c.quality.coalesce(0)) })
      .sort({ id: "pre_sort", key: "prescore", order: "desc" })
      .take({ id: "top_k", count: P.k })
      // Phase 2, the top k: the model's other fields, its two log-scaled inputs, the MLP.
      .features({ id: "mf", fields: ["age_s", "nsfw"], cache: true })
      .vm({ id: "ll", outKey: "log_likes", expr: (c) => c.likes.log1p() })
      .vm({ id: "la", outKey: "log_age_h", expr: (c) => c.age_s.div(3600).log1p() })
      .model({
        id: "model",
        model: "rerank_nn",
        outKey: "score",
        features: { x: ["log_likes", "log_age_h", "quality", "nsfw"] },
        fill: { log_likes: 0, log_age_h: 0, quality: 0, nsfw: 0 },
      })
      .sort({ id: "o", key: "score", order: "desc" })
      .take({ id: "t", count: P.limit })
      .output(["id", "score", "author"]);
  },
});
