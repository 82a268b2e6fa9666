// A single source node: the smallest plan.
import { definePlan, EP } from "./schema.gen.js";

export default definePlan({
  name: "simple_viewer",
  description: "the viewer's profile row (one viewer node)",
  build: (ctx) => ctx.viewer({ endpoint: EP.redis.redis_default }),
});
