// A ranking's items as a table: a column per output column (the plan's `columns` first,
// then any other key the items carry), cells as text. Called from the page's one thread.

import { h } from "./dom.js";
import type { Item } from "./types.js";
import { cellText } from "./ui.js";

export function columnsOf(items: Item[], declared: string[] | undefined): string[] {
  const cols = [...(declared ?? [])];
  for (const item of items) for (const k of Object.keys(item)) if (!cols.includes(k)) cols.push(k);
  return cols;
}

export function itemsTable(items: Item[], declared: string[] | undefined): HTMLElement {
  if (items.length === 0) return h("p", { class: "muted" }, "No items.");
  const cols = columnsOf(items, declared);
  return h("table", { class: "items" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), ...cols.map((c) => h("th", {}, c)))),
    h("tbody", {}, ...items.map((item, i) =>
      h("tr", {}, h("td", { class: "num" }, i + 1), ...cols.map((c) => h("td", { "data-col": c }, cellText(item[c])))))));
}
