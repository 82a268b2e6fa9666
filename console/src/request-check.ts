// Checks a /rank request typed into a form against what the API would accept
// (docs/api.md "POST /rank", docs/plan.md params), so that each mistake is shown beside
// its field before anything is sent. What is not checked here the API refuses, and the
// page shows its refusal. Pure: no DOM.

import type { PlanFile, UserId } from "./types.js";

/** A parsed field, or why it cannot be sent. */
export type Parsed<T> = { value: T } | { error: string };

const I64_MAX = 9223372036854775807n;

/** The user_id as the plan expects it, or an error message. */
export function parseUserId(text: string, stringIds: boolean): Parsed<UserId> {
  const t = text.trim();
  if (t === "" && (!stringIds || text === "")) return { error: "user_id is required" };
  if (stringIds) {
    const bytes = new TextEncoder().encode(text).length;
    if (bytes > 256) return { error: `user_id is ${bytes} bytes: at most 256` };
    if (/[{}]/.test(text)) return { error: "user_id may not hold { or }" };
    return { value: text };
  }
  if (!/^[0-9]+$/.test(t)) return { error: "user_id must be an integer ≥ 0 (this plan reads integer ids)" };
  if (BigInt(t) > I64_MAX) return { error: "user_id must fit in a signed 64-bit integer" };
  // Past 2^53 a JS number would round the id: refuse it rather than send another one.
  if (!Number.isSafeInteger(Number(t))) return { error: "user_id above 2^53 cannot be sent exactly from here" };
  return { value: Number(t) };
}

/** The params object, or an error message: JSON, an object, each key a declared param
 *  of the plan, each value of its type and within its bounds. Empty text is no params. */
export function parseParams(text: string, plan: PlanFile): Parsed<Record<string, unknown>> {
  if (text.trim() === "") return { value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { error: `params is not JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: "params must be a JSON object, e.g. {\"limit\": 20}" };
  }
  for (const [name, v] of Object.entries(value)) {
    const decl = plan.params[name];
    if (!decl) {
      const known = Object.keys(plan.params).join(", ") || "none";
      return { error: `plan ${plan.name} has no param '${name}' (it declares: ${known})` };
    }
    const problem = paramProblem(decl.type, v, decl.min, decl.max);
    if (problem) return { error: `param '${name}': ${problem}` };
  }
  return { value: value as Record<string, unknown> };
}

function paramProblem(type: string, v: unknown, min?: number, max?: number): string | null {
  switch (type) {
    case "i64":
      if (typeof v !== "number" || !Number.isInteger(v)) return "must be an integer";
      break;
    case "f64":
      if (typeof v !== "number") return "must be a number";
      break;
    case "str":
      return typeof v === "string" ? null : "must be a string";
    case "bool":
      return typeof v === "boolean" ? null : "must be true or false";
    default:
      return null; // a type this page does not know: the API decides
  }
  if (min !== undefined && v < min) return `must be ≥ ${min}`;
  if (max !== undefined && v > max) return `must be ≤ ${max}`;
  return null;
}
