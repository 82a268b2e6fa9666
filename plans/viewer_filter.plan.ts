// Source → CPU (filter): one IO node, then a predicate.
import { definePlan, E, EP, Key, Pred } from "./schema.gen.js";

export default definePlan({
  name: "viewer_filter",
  description: "the viewer's profile row, kept when the user id is above 5",
  build: (ctx) =>
    ctx
      .viewer({ endpoint: EP.redis.redis_default })
      .filter({ pred: Pred.cmp(">", E.key(Key.id), E.const(5)) }),
});
