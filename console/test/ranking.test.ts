/// <reference types="node" />
// overlap@k, Kendall's tau-a and moves as docs/experiments.md defines them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { gone, kendallTauA, moves, overlapAtK, rankedIds } from "../src/ranking.js";

test("rankedIds keeps the first row of an id and skips rows without one", () => {
  assert.deepEqual(rankedIds([{ id: 3 }, { id: "3" }, { id: 3 }, { score: 1 }, { id: null }, { id: 1 }]), ["3", '"3"', "1"]);
});

test("overlap@k divides by min(k, |A|, |B|)", () => {
  assert.equal(overlapAtK(["a", "b", "c"], ["c", "x", "a"], 10), 2 / 3);
  assert.equal(overlapAtK(["a", "b", "c", "d"], ["b", "a"], 10), 1);
  assert.equal(overlapAtK(["a", "b", "c"], ["c", "b", "a"], 2), 0.5); // top 2: {a,b} vs {c,b}
  assert.equal(overlapAtK([], ["a"], 10), null);
});

test("tau-a over the common items", () => {
  assert.equal(kendallTauA(["a", "b", "c"], ["a", "b", "c"]), 1);
  assert.equal(kendallTauA(["a", "b", "c"], ["c", "b", "a"]), -1);
  // Common a, b, c; pairs (a,b) concordant, (a,c) discordant, (b,c) discordant: (1-2)/3.
  assert.equal(kendallTauA(["a", "b", "x", "c"], ["c", "a", "b", "y"]), -1 / 3);
  assert.equal(kendallTauA(["a", "b"], ["a", "z"]), null);
});

test("moves and gone", () => {
  assert.deepEqual(moves(["a", "b", "c"], ["c", "b", "n", "a"]), ["↑2", "=", "new", "↓3"]);
  assert.deepEqual([...gone(["a", "b", "c"], ["c"])], ["a", "b"]);
});
