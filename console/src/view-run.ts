// #/run/<name>?user_id=..&params=..: a form for one /rank request with explain; its
// answer as an items table and a node waterfall. An address with a user_id runs at once,
// so a link shows a run. Called from the page's one thread.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { itemsTable } from "./items-table.js";
import { checkRequest, clearErrors, paramsInput, planSelect, rows, userIdInput, wireForm } from "./request-form.js";
import type { PlanFile, RankResponse } from "./types.js";
import { ms } from "./ui.js";
import { waterfallSvg } from "./waterfall-svg.js";

/** The address of a run, which the form sets on submit. */
export function runAddress(plan: string, userId: string, params: string): string {
  const q = new URLSearchParams({ user_id: userId });
  if (params.trim()) q.set("params", params);
  return `#/run/${encodeURIComponent(plan)}?${q}`;
}

function summary(res: RankResponse): HTMLElement {
  return h("p", { class: "run-summary" },
    `plan ${res.plan}`, res.experiment ? ` (experiment ${res.experiment}, variant ${res.variant})` : "",
    ` · user_id ${JSON.stringify(res.user_id)} · ${res.count} items · took ${ms(res.took_us)}`,
    res.degraded.length ? h("span", { class: "degraded-note" }, ` · degraded: ${res.degraded.join(", ")}`) : "");
}

function result(res: RankResponse, plan: PlanFile): HTMLElement {
  // A variant may have run another plan: its columns and DAG are that plan's.
  return h("div", { class: "run-result" }, summary(res),
    h("h3", {}, "Waterfall ", h("span", { class: "legend" }, h("span", { class: "key critical" }, "critical path"), " ",
      h("span", { class: "key degraded" }, "degraded"), " ", h("span", { class: "key failed" }, "failed / timeout"), " ",
      h("span", { class: "key skipped" }, "skipped"))),
    h("div", { class: "waterfall-wrap" }, waterfallSvg(res.nodes ?? [], plan, res.degraded, res.took_us)),
    h("h3", {}, "Items"), itemsTable(res.items, plan.output.columns));
}

export async function renderRun(root: HTMLElement, name: string, query: URLSearchParams): Promise<void> {
  const plans = await api.plans();
  const plan = planSelect(plans, name || plans[0]?.name || "");
  const user = userIdInput(query.get("user_id") ?? "");
  const params = paramsInput(query.get("params") ?? "");
  const f = rows("", plan, user, params);
  const out = h("div", { class: "run-out" });
  const form = h("form", { class: "rank-form" }, ...f.rows, h("button", { type: "submit" }, "Run"));
  replace(root, h("h2", {}, "Run a plan"), form, out);
  await wireForm(form, out, () => runAddress(plan.value, user.value, params.value), async () => {
    replace(out, "running…");
    clearErrors(f.slots);
    const checked = await checkRequest(plan.value, user.value, params.value, f.slots as Required<typeof f.slots>);
    if (!checked) return replace(out);
    const res = await api.rank(checked.req);
    const ran = res.plan === checked.plan.name ? checked.plan : await api.plan(res.plan);
    replace(out, result(res, ran));
  }, query.has("user_id"));
}
