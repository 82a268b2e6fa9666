// The fields of a /rank request (plan, user_id, params) as form controls, and their
// check before a request is sent: each mistake goes beside its field (request-check.ts).
// Called from the page's one thread.

import { ApiError, api } from "./api.js";
import { h, replace } from "./dom.js";
import { takesStringIds } from "./plan-info.js";
import { parseParams, parseUserId } from "./request-check.js";
import type { PlanFile, PlanSummary, RankRequest } from "./types.js";
import { errorBox, fieldRow, navigate, setFieldError } from "./ui.js";

/** A select of the loaded plans; an unknown `current` stays selectable, so the check can
 *  name it beside the field. */
export function planSelect(plans: PlanSummary[], current: string): HTMLSelectElement {
  const names = plans.map((p) => p.name);
  if (current && !names.includes(current)) names.unshift(current);
  return h("select", {}, ...names.map((n) => h("option", { value: n, selected: n === current }, n)));
}

export function userIdInput(value: string): HTMLInputElement {
  return h("input", { type: "text", value, placeholder: "e.g. 1", autocomplete: "off", spellcheck: false });
}

export function paramsInput(value: string): HTMLTextAreaElement {
  const area = h("textarea", { rows: 3, cols: 40, placeholder: "{} or e.g. {\"limit\": 20}", spellcheck: false });
  area.value = value;
  return area;
}

export interface Slots {
  plan: HTMLElement;
  user_id: HTMLElement;
  params: HTMLElement;
}

/** A form row per field; `suffix` tells apart the fields of two requests ("a", "b"). */
export function rows(suffix: string, plan: HTMLElement, user: HTMLElement | null, params: HTMLElement): { rows: HTMLElement[]; slots: Partial<Slots> } {
  const tag = suffix ? `_${suffix}` : "";
  const p = fieldRow(`plan${tag}`, suffix ? `plan ${suffix.toUpperCase()}` : "plan", plan);
  const q = fieldRow(`params${tag}`, suffix ? `params ${suffix.toUpperCase()}` : "params", params);
  const u = user ? fieldRow("user_id", "user_id", user) : null;
  return { rows: [p.row, ...(u ? [u.row] : []), q.row], slots: { plan: p.error, params: q.error, ...(u ? { user_id: u.error } : {}) } };
}

export function clearErrors(slots: Partial<Slots>): void {
  for (const slot of Object.values(slots)) setFieldError(slot, null);
}

/** The request the fields describe with its plan, or null after showing every mistake
 *  beside its field (clearErrors first: the fields of two requests share user_id's slot). */
export async function checkRequest(planName: string, userText: string, paramsText: string, slots: Slots): Promise<{ req: RankRequest; plan: PlanFile } | null> {
  let plan: PlanFile;
  try {
    plan = await api.plan(planName);
  } catch (e) {
    if (e instanceof ApiError && e.code === "unknown_plan") {
      setFieldError(slots.plan, `unknown plan '${planName}'`);
      return null;
    }
    throw e;
  }
  const schema = await api.schema().catch(() => null);
  const user = parseUserId(userText, takesStringIds(plan, schema));
  const params = parseParams(paramsText, plan);
  if ("error" in user) setFieldError(slots.user_id, user.error);
  if ("error" in params) setFieldError(slots.params, params.error);
  if ("error" in user || "error" in params) return null;
  const req: RankRequest = { plan: planName, user_id: user.value, explain: true };
  if (Object.keys(params.value).length) req.params = params.value;
  return { req, plan };
}

/** Wires a request form: on submit the page goes to `address()`, the address that holds
 *  the form's fields, and `run` draws into `out` (a failure shows there as rankd's
 *  refusal). With `now` (the address came with a user_id) it runs at once. */
export async function wireForm(form: HTMLFormElement, out: HTMLElement, address: () => string, run: () => Promise<void>, now: boolean): Promise<void> {
  const guarded = async (): Promise<void> => {
    try {
      await run();
    } catch (e) {
      replace(out, errorBox(e));
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    navigate(address(), guarded);
  });
  if (now) await guarded();
}
