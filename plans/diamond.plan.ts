// A diamond: the join waits for both branches.
import { definePlan, EP } from "./schema.gen.js";

export default definePlan({
  name: "diamond",
  description: "viewer → follow and recommendation → concat",
  build: (ctx) => {
    const v = ctx.viewer({ endpoint: EP.redis.redis_default });
    const left = v.follow({ endpoint: EP.redis.redis_default, id: "left" });
    const right = v.recommendation({ endpoint: EP.redis.redis_default, id: "right" });
    return left.concat(right, { id: "join" }); // waits for both branches
  },
});
