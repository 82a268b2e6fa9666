// Two IO branches run in parallel. A plan has one output node, so the
// branches are joined by concat (follow rows first, then recs).
import { definePlan, EP } from "./schema.gen.js";

export default definePlan({
  name: "parallel_fanout",
  description: "follow and recommendation fetched in parallel from the viewer, joined by concat",
  build: (ctx) => {
    const v = ctx.viewer({ endpoint: EP.redis.redis_default });
    const followBranch = v.follow({ endpoint: EP.redis.redis_default });
    const recsBranch = v.recommendation({ endpoint: EP.redis.redis_default });
    return followBranch.concat(recsBranch);
  },
});
