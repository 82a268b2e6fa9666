// A 10-node DAG: two scored branches merged, sorted and cut.
import { definePlan, E, EP, Key } from "./schema.gen.js";

export default definePlan({
  name: "complex_dag",
  description: "follow and recs branches, each media → vm, merged, sorted, top 50",
  params: {
    weight: { type: "f64", default: 0.1 },
  },
  build: (ctx, P) => {
    const v = ctx.viewer({ endpoint: EP.redis.redis_default, id: "v" });

    // Left branch: follow → media → vm
    const followBranch = v
      .follow({ endpoint: EP.redis.redis_default, id: "follow" })
      .media({ endpoint: EP.redis.redis_default, id: "media_f" })
      .vm({ outKey: Key.score, expr: (c) => c.id.mul(E.coalesce(P.weight, 0.1)), id: "vm_f" });

    // Right branch: recommendation → media → vm
    const recsBranch = v
      .recommendation({ endpoint: EP.redis.redis_default, id: "recs" })
      .media({ endpoint: EP.redis.redis_default, id: "media_r" })
      .vm({ outKey: Key.score, expr: (c) => c.id.mul(E.coalesce(P.weight, 0.1)), id: "vm_r" });

    // Merge, sort, take
    return followBranch
      .concat(recsBranch, { id: "merge" })
      .sort({ key: Key.score, order: "desc", id: "sort" })
      .take({ count: 50, id: "take" });
  },
});
