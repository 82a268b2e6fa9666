// Test fixture without IO: ids 1..10 scored id * weight, the odd ones kept, the top
// `limit` by score (tests/sched/test_rankd_run.sh pins its answers).
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "e2e_rank",
  description: "test fixture: fixed_source -> vm -> filter -> sort -> take, with params",
  params: {
    weight: { type: "f64", default: 1.0 },
    limit: { type: "i64", default: 3, min: 1, max: 50 },
  },
  build: (ctx, P) =>
    ctx
      .fixedSource({ id: "src", count: 10 })
      .vm({ id: "s", outKey: "score", expr: (c) => c.id.mul(P.weight) })
      .filter({ id: "odd", pred: (c) => c.id.in([1, 3, 5, 7, 9]) })
      .sort({ id: "o", key: "score", order: "desc" })
      .take({ id: "t", count: P.limit })
      .output(["id", "score"]),
});
