// The experiments the server runs on the plans of this folder (docs/experiments.md); compiled
// to experiments.json by `npm --prefix plans run build`.
import { defineExperiments } from "./plans.gen.js";

export default defineExperiments([
  {
    // The home feed against two challengers, a quarter of the users each: the feed scoring
    // likes higher, and the lighter home feed. The other half is the control (feed as is).
    name: "feed_weight",
    plan: "feed",
    salt: "feed-weight-1",
    variants: [
      { name: "more_likes", plan: "feed", params: { weight: 0.8 }, weight: 2500 },
      { name: "home_light", plan: "home_light", params: { limit: 50 }, weight: 2500 },
    ],
    // One request in twenty also runs the two-phase rerank plan, whose top 10 is compared
    // with what was served.
    shadow: [{ plan: "rerank", percent: 5, compareTop: 10 }],
  },
  {
    // The tree reranker against its neural twin: every request runs rerank as is, and one
    // in ten also runs rerank_nn (same candidates, the MLP's order), whose top 10 is
    // compared with what was served (the console's shadow view).
    name: "rerank_nn_shadow",
    plan: "rerank",
    salt: "rerank-nn-1",
    variants: [],
    shadow: [{ plan: "rerank_nn", percent: 10, compareTop: 10 }],
  },
]);
