// Test fixture without IO: an optional branch that fails after 1 ms, and a required one
// that takes 200 ms (a deadline under it is a 504).
import { definePlan } from "./schema.gen.js";

export default definePlan({
  name: "e2e_slow",
  description: "test fixture: an optional failing branch and a slow required one",
  build: (ctx) => {
    const src = ctx.fixedSource({ id: "src", count: 2 });
    const flaky = ctx.sleep({ id: "flaky", durationMs: 1, failAfterSleep: true, optional: true });
    return src.sleep({ id: "slow", durationMs: 200 }).concat(flaky, { id: "c" });
  },
});
