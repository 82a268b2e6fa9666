// #/compare/<a>/<b>?user_id=..&params_a=..&params_b=.. (two plans) and
// #/compare/experiment/<name>?user_id=..&params=.. (an experiment's control and
// variants, each run with its plan and params): the same user's rankings side by side,
// overlap@10 and Kendall's tau-a of each against the first, and each item's move.
// Called from the page's one thread.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { gone, kendallTauA, moves, overlapAtK, rankedIds } from "./ranking.js";
import { checkRequest, clearErrors, paramsInput, planSelect, rows, userIdInput, wireForm, type Slots } from "./request-form.js";
import type { Experiment, RankRequest, RankResponse } from "./types.js";
import { errorBox, fieldRow, fmt } from "./ui.js";

const K = 10;

/** One ranking to compare: a request, and for an experiment's arm, the variant to force
 *  (X-Rankd-Variant, honoured with --allow-forced-variants) and the one expected. */
interface Arm {
  label: string;
  req: RankRequest;
  force?: string;
  variant?: string;
}

function armColumn(arm: Arm, res: RankResponse, base: string[] | null, others: string[] | null): HTMLElement {
  const ids = rankedIds(res.items);
  const moved = base ? moves(base, ids) : null;
  const lost = !base && others ? gone(ids, others) : null;
  const served = `${res.plan}${res.variant ? ` · variant ${res.variant}` : ""}`;
  const mismatch = arm.variant && res.variant !== arm.variant
    ? h("p", { class: "warn" }, `rankd served variant ${res.variant ?? "none"}, not ${arm.variant}: forcing a variant needs rankd serve --allow-forced-variants`) : null;
  const metrics = base ? h("p", { class: "compare-metrics" },
    "overlap@10 ", h("b", { class: "overlap", "data-value": String(overlapAtK(base, ids, K)) }, fmt(overlapAtK(base, ids, K))),
    " · tau-a ", h("b", { class: "tau", "data-value": String(kendallTauA(base, ids)) }, fmt(kendallTauA(base, ids)))) : h("p", { class: "compare-metrics muted" }, "baseline");
  const list = h("ol", { class: "ranking" }, ...res.items.map((item) => {
    const key = item["id"] === undefined ? null : JSON.stringify(item["id"]);
    const move = moved ? moved[ids.indexOf(key ?? "")] ?? "" : key && lost?.has(key) ? "gone" : "";
    const cls = move.startsWith("↑") ? "up" : move.startsWith("↓") ? "down" : move;
    return h("li", { "data-id": key ?? "" }, h("span", { class: "item-id" }, key === null ? "(no id)" : String(item["id"])),
      typeof item["score"] === "number" ? h("span", { class: "score" }, fmt(item["score"] as number)) : null,
      move ? h("span", { class: `move ${cls}` }, move) : null);
  }));
  return h("div", { class: "arm", "data-plan": res.plan }, h("h3", {}, arm.label), h("p", { class: "muted" }, `ran ${served} · ${res.count} items`),
    mismatch, metrics, list);
}

async function runArms(out: HTMLElement, arms: Arm[]): Promise<void> {
  replace(out, "running…");
  const results = await Promise.all(arms.map((a) => api.rank({ ...a.req, explain: false }, a.force).catch((e: unknown) => e)));
  const first = results[0];
  const base = first && !(first instanceof Error) ? rankedIds((first as RankResponse).items) : null;
  const second = results[1];
  const others = arms.length === 2 && second && !(second instanceof Error) ? rankedIds((second as RankResponse).items) : null;
  replace(out, h("div", { class: "arms" }, ...arms.map((arm, i) => {
    const r = results[i];
    if (r instanceof Error || !r) return h("div", { class: "arm" }, h("h3", {}, arm.label), errorBox(r));
    return armColumn(arm, r as RankResponse, i === 0 ? null : base, i === 0 ? others : null);
  })));
}

/** The arms of an experiment: control, then each variant; a variant of another plan runs
 *  that plan directly, with the request's params it declares under the variant's. */
async function experimentArms(exp: Experiment, req: RankRequest): Promise<Arm[]> {
  const arms: Arm[] = [{ label: `control: ${exp.plan}`, req, force: `${exp.name}=control`, variant: "control" }];
  for (const v of exp.variants) {
    if (v.plan === exp.plan) {
      arms.push({ label: `${v.name}: ${v.plan}`, req: { ...req, params: { ...req.params, ...v.params } }, force: `${exp.name}=${v.name}`, variant: v.name });
      continue;
    }
    const declared = (await api.plan(v.plan)).params;
    const kept = Object.fromEntries(Object.entries(req.params ?? {}).filter(([k]) => k in declared));
    arms.push({ label: `${v.name}: ${v.plan}`, req: { ...req, plan: v.plan, params: { ...kept, ...v.params } } });
  }
  return arms;
}

async function renderPlanPair(root: HTMLElement, a: string, b: string, query: URLSearchParams): Promise<void> {
  const plans = await api.plans();
  const planA = planSelect(plans, a), planB = planSelect(plans, b);
  const user = userIdInput(query.get("user_id") ?? "");
  const paramsA = paramsInput(query.get("params_a") ?? ""), paramsB = paramsInput(query.get("params_b") ?? "");
  const fa = rows("a", planA, user, paramsA), fb = rows("b", planB, null, paramsB);
  const out = h("div", { class: "compare-out" });
  const form = h("form", { class: "rank-form compare-form" }, ...fa.rows, ...fb.rows, h("button", { type: "submit" }, "Compare"));
  replace(root, h("h2", {}, "Compare two plans"), form, out);
  const address = (): string => {
    const q = new URLSearchParams({ user_id: user.value });
    if (paramsA.value.trim()) q.set("params_a", paramsA.value);
    if (paramsB.value.trim()) q.set("params_b", paramsB.value);
    return `#/compare/${encodeURIComponent(planA.value)}/${encodeURIComponent(planB.value)}?${q}`;
  };
  await wireForm(form, out, address, async () => {
    clearErrors({ ...fa.slots, ...fb.slots });
    const ca = await checkRequest(planA.value, user.value, paramsA.value, fa.slots as Slots);
    const cb = await checkRequest(planB.value, user.value, paramsB.value, { ...fb.slots, user_id: fa.slots.user_id! } as Slots);
    if (!ca || !cb) return replace(out);
    await runArms(out, [{ label: `A: ${ca.plan.name}`, req: ca.req }, { label: `B: ${cb.plan.name}`, req: cb.req }]);
  }, query.has("user_id"));
}

async function renderExperiment(root: HTMLElement, name: string, query: URLSearchParams): Promise<void> {
  const experiments = await api.experiments();
  const exp = experiments.find((e) => e.name === name);
  const pick = h("select", {}, ...experiments.map((e) => h("option", { value: e.name, selected: e.name === name }, e.name)));
  const pickRow = fieldRow("experiment", "experiment", pick);
  const user = userIdInput(query.get("user_id") ?? "");
  const params = paramsInput(query.get("params") ?? "");
  const f = rows("", h("span", { class: "mono" }, exp?.plan ?? "?"), user, params);
  const out = h("div", { class: "compare-out" });
  const form = h("form", { class: "rank-form compare-form" }, pickRow.row, ...f.rows.slice(1), h("button", { type: "submit" }, "Compare variants"));
  replace(root, h("h2", {}, "Compare an experiment's variants"), form, out);
  if (!exp) return replace(pickRow.error, experiments.length ? `unknown experiment '${name}'` : "no experiment is loaded");
  const address = (): string => {
    const q = new URLSearchParams({ user_id: user.value });
    if (params.value.trim()) q.set("params", params.value);
    return `#/compare/experiment/${encodeURIComponent(pick.value)}?${q}`;
  };
  await wireForm(form, out, address, async () => {
    clearErrors(f.slots);
    const checked = await checkRequest(exp.plan, user.value, params.value, { ...f.slots, plan: pickRow.error } as Slots);
    if (!checked) return replace(out);
    await runArms(out, await experimentArms(exp, checked.req));
  }, query.has("user_id"));
}

export function renderCompare(root: HTMLElement, a: string, b: string, query: URLSearchParams): Promise<void> {
  return a === "experiment" ? renderExperiment(root, b, query) : renderPlanPair(root, a, b, query);
}
