// Test/benchmark plan without IO: 100 fixed rows (id = score = 1..100) rescored as
// score * 2.0 + id (= 3 * id, an exact double), top 20 by score: ids 100..81, scores 300..243.
import { definePlan, E } from "./schema.gen.js";

export default definePlan({
  name: "fixed_rank",
  description: "fixed_source 100 → vm score = score * 2.0 + id → sort desc → take 20",
  build: (ctx) =>
    ctx
      .fixedSource({ count: 100 })
      .vm({ outKey: "score", expr: (c) => c.score.mul(E.f64(2)).add(c.id) })
      .sort({ key: "score", order: "desc" })
      .take({ count: 20 })
      .output(["id", "score"]),
});
