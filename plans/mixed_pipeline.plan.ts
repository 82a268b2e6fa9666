// IO then a chain of CPU tasks. Shows the expression-string syntax.
import { definePlan, EP, Key } from "./schema.gen.js";

export default definePlan({
  name: "mixed_pipeline",
  description: "followees scored by id * weight, filtered, sorted, top 10",
  params: {
    weight: { type: "f64", default: 0.5 },
  },
  build: (ctx) =>
    ctx
      .viewer({ endpoint: EP.redis.redis_default })
      .follow({ endpoint: EP.redis.redis_default })
      .vm({ outKey: Key.score, expr: "id * coalesce($weight, 0.5)" })
      .filter({ pred: "score >= 0.5" })
      .sort({ key: Key.score, order: "desc" })
      .take({ count: 10 }),
});
