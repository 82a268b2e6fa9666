// Comparing two rankings by item id, as docs/experiments.md defines it for shadow plans:
// overlap@k = |A_k ∩ B_k| / min(k, |A|, |B|) and Kendall's tau-a over the items both
// hold. Items are keyed by their `id` (the first row of an id counts; rows without one
// are left out). Pure: no DOM.

import type { Item } from "./types.js";

/** The ids of a ranking in order, each once. Ids are compared as JSON text, so the
 *  integer 7 and the string "7" stay different items. */
export function rankedIds(items: Item[]): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    if (item["id"] === undefined || item["id"] === null) continue;
    const key = JSON.stringify(item["id"]);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(key);
  }
  return out;
}

/** overlap@k, or null when min(k, |A|, |B|) is 0. */
export function overlapAtK(a: string[], b: string[], k: number): number | null {
  const denom = Math.min(k, a.length, b.length);
  if (denom === 0) return null;
  const top = new Set(a.slice(0, k));
  let common = 0;
  for (const id of b.slice(0, k)) if (top.has(id)) common++;
  return common / denom;
}

/** Kendall's tau-a over the items both rankings hold, or null under 2 common items. */
export function kendallTauA(a: string[], b: string[]): number | null {
  const posB = new Map(b.map((id, i) => [id, i]));
  // The common items in A's order, with their position in B.
  const inB = a.filter((id) => posB.has(id)).map((id) => posB.get(id)!);
  const n = inB.length;
  if (n < 2) return null;
  let concordant = 0;
  let discordant = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      if (inB[i]! < inB[j]!) concordant++;
      else discordant++;
    }
  }
  return (concordant - discordant) / ((n * (n - 1)) / 2);
}

/** How each item of B moved relative to A: "↑n" (n places higher in B), "↓n", "=", or "new". */
export function moves(a: string[], b: string[]): string[] {
  const posA = new Map(a.map((id, i) => [id, i]));
  return b.map((id, j) => {
    const i = posA.get(id);
    if (i === undefined) return "new";
    return i > j ? `↑${i - j}` : i < j ? `↓${j - i}` : "=";
  });
}

/** The ids of A that B does not hold. */
export function gone(a: string[], b: string[]): Set<string> {
  const inB = new Set(b);
  return new Set(a.filter((id) => !inB.has(id)));
}
