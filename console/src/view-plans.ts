// #/plans/<name>: every loaded plan, and one plan's DAG with the schema families it
// reads and the experiments that use it. Called from the page's one thread.

import { api } from "./api.js";
import { dagSvg } from "./dag-svg.js";
import { h, link, replace } from "./dom.js";
import { familiesOf } from "./plan-info.js";
import type { Experiment, PlanFile, PlanSummary, SchemaAnswer } from "./types.js";
import { errorBox } from "./ui.js";

/** How an experiment uses a plan: control, a variant's plan, or a shadow. */
function rolesIn(exp: Experiment, plan: string): string[] {
  const roles: string[] = [];
  if (exp.plan === plan) roles.push("control");
  for (const v of exp.variants) if (v.plan === plan) roles.push(`variant ${v.name}`);
  for (const sh of exp.shadow ?? []) if (sh.plan === plan) roles.push(`shadow (${sh.percent}%)`);
  return roles;
}

function planList(plans: PlanSummary[], current: string): HTMLElement {
  return h("ul", { class: "plan-list" }, ...plans.map((p) =>
    h("li", { class: p.name === current ? "current" : undefined, "data-plan": p.name },
      link(`#/plans/${encodeURIComponent(p.name)}`, p.name), h("span", { class: "muted" }, ` ${p.nodes} nodes`))));
}

function familiesTable(plan: PlanFile, schema: SchemaAnswer | null): HTMLElement {
  const rows = [...familiesOf(plan)].map(([name, nodes]) => {
    const fam = schema?.schema.families[name];
    return h("tr", { "data-family": name }, h("td", {}, name), h("td", {}, fam?.type ?? "?"), h("td", { class: "mono" }, fam?.key ?? "?"),
      h("td", {}, fam?.id ?? "i64"), h("td", {}, nodes.join(", ")));
  });
  if (rows.length === 0) return h("p", { class: "muted" }, "This plan reads no Redis family.");
  return h("table", { class: "families" },
    h("thead", {}, h("tr", {}, h("th", {}, "family"), h("th", {}, "type"), h("th", {}, "key"), h("th", {}, "id"), h("th", {}, "read by"))),
    h("tbody", {}, ...rows));
}

function experimentsList(experiments: Experiment[], plan: string): HTMLElement {
  const using = experiments.map((e) => ({ e, roles: rolesIn(e, plan) })).filter((x) => x.roles.length);
  if (using.length === 0) return h("p", { class: "muted" }, "No experiment uses this plan.");
  return h("ul", { class: "experiments" }, ...using.map(({ e, roles }) =>
    h("li", { "data-experiment": e.name }, link(`#/compare/experiment/${encodeURIComponent(e.name)}`, e.name), ` — ${roles.join(", ")}`)));
}

function planDetail(plan: PlanFile, schema: SchemaAnswer | null, experiments: Experiment[]): HTMLElement {
  const params = Object.entries(plan.params).map(([k, d]) => `${k}: ${d.type}${d.default !== undefined ? ` = ${JSON.stringify(d.default)}` : ""}`);
  return h("section", { class: "plan-detail", "data-plan": plan.name },
    h("h2", {}, plan.name, " ", link(`#/run/${encodeURIComponent(plan.name)}`, "run ▸")),
    h("p", {}, plan.description ?? ""),
    h("p", { class: "mono" }, "params: ", params.length ? params.join("; ") : "none", " · output: ", plan.output.node,
      plan.output.columns ? ` (${plan.output.columns.join(", ")})` : ""),
    h("div", { class: "dag-wrap" }, dagSvg(plan)),
    plan.models?.length ? h("p", { class: "mono" }, "models: ", plan.models.map((m) => `${m.name} (sha256 ${m.sha256.slice(0, 12)}…)`).join(", ")) : null,
    h("h3", {}, "Schema families read"), familiesTable(plan, schema),
    h("h3", {}, "Experiments"), experimentsList(experiments, plan.name));
}

export async function renderPlans(root: HTMLElement, name: string | undefined): Promise<void> {
  const plans = await api.plans();
  const current = name ?? plans[0]?.name ?? "";
  const detail = h("div", { class: "plan-main" }, "loading…");
  replace(root, h("div", { class: "plans-view" }, h("nav", { class: "side" }, h("h2", {}, "Plans"), planList(plans, current)), detail));
  if (!current) return replace(detail, "No plan is loaded.");
  if (!plans.some((p) => p.name === current)) return replace(detail, errorBox(new Error(`unknown plan '${current}'`)));
  try {
    // The schema and experiments only add to the picture: the DAG shows without them.
    const [plan, schema, experiments] = await Promise.all([
      api.plan(current), api.schema().catch(() => null), api.experiments().catch(() => [])]);
    replace(detail, planDetail(plan, schema, experiments));
  } catch (e) {
    replace(detail, errorBox(e));
  }
}
