// Test/benchmark plan without IO: the first 5 of 10 fixed rows.
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "fixed_simple",
  description: "fixed_source 10 → take 5",
  build: (ctx) => ctx.fixedSource({ count: 10 }).take({ count: 5 }),
});
