// The demo feeds' candidates: the media of the authors the viewer follows and the viewer's
// recommendations (optional: a slow or missing list leaves the follow graph's), one row an
// item. feed, feed_quality, for_you, rerank and rerank_nn start from it with the demo's
// sizes, home_light with smaller ones. Media lists are shared by many viewers, so they are
// read through the shard cache (docs/cache.md); the per-viewer reads are not.
import { type Ctx, type SCHEMA } from "./schema.gen.js";

export interface CandidateSizes {
  follow: number; // authors followed, at most
  perAuthor: number; // media a followed author
  recs: number; // recommendations, at most
}

export const DEMO_SIZES: CandidateSizes = { follow: 100, perAuthor: 5, recs: 100 };

/** Nodes v (the viewer), f, m, r, c (their concat) and d (deduped by id), in that order. */
export function followedAndRecommended(ctx: Ctx<typeof SCHEMA>, sizes: CandidateSizes = DEMO_SIZES) {
  const v = ctx.viewer({ id: "v" });
  const m = v.follow({ id: "f", fanout: sizes.follow }).media({ id: "m", perAuthor: sizes.perAuthor, cache: true });
  const r = v.recommendation({ id: "r", fanout: sizes.recs, optional: true, timeoutMs: 30 });
  return m.concat(r, { id: "c" }).dedupe({ id: "d", key: "id" });
}
