// Pieces the views share: form rows with an error slot beside the field, the box that
// shows an API refusal, number formatting. Called from the page's one thread.

import { ApiError } from "./api.js";
import { h, replace } from "./dom.js";

/** A labelled form row; its error slot (`.field-error[data-field=name]`) sits beside the field. */
export function fieldRow(name: string, label: string, input: HTMLElement): { row: HTMLElement; error: HTMLElement } {
  input.id = `f-${name}`;
  input.setAttribute("name", name);
  const error = h("span", { class: "field-error", "data-field": name, role: "alert" });
  const row = h("div", { class: "form-row" }, h("label", { for: `f-${name}` }, label), input, error);
  return { row, error };
}

/** Shows `message` in an error slot (or clears it with null); marks its row invalid. */
export function setFieldError(slot: HTMLElement, message: string | null): void {
  replace(slot, message ?? "");
  slot.parentElement?.classList.toggle("invalid", message !== null);
}

/** The box showing why a call failed: the status, rankd's error code and message. */
export function errorBox(err: unknown): HTMLElement {
  if (err instanceof ApiError) {
    return h("div", { class: "api-error", "data-status": err.status, "data-code": err.code }, err.describe());
  }
  return h("div", { class: "api-error" }, err instanceof Error ? err.message : String(err));
}

export function fmt(v: number | null | undefined, digits = 3): string {
  return v === null || v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(digits);
}

/** A µs duration as ms text, e.g. 1234 → "1.234 ms". */
export function ms(us: number): string {
  return `${(us / 1000).toFixed(3)} ms`;
}

/** A cell's text: strings as they are, everything else as JSON (null as "null"). */
export function cellText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v) ?? "";
}

/** Goes to a console address; the same address fires no hashchange, so `again` redoes
 *  its work in place (a form submitted twice runs twice). */
export function navigate(next: string, again: () => Promise<void>): void {
  if (next === location.hash) void again();
  else location.hash = next;
}
