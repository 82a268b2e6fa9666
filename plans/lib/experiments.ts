// The experiments DSL: `defineExperiments([...])` in a plans folder's experiments.ts, compiled to
// the folder's experiments.json (docs/experiments.md, "The file"), which the server loads
// with the plans. An experiment splits the requests for one plan between that plan (the
// control) and variants (other plans, or the same plan with other parameters), and may run
// shadow plans beside it.
//
// The folder's plans.gen.ts (written by lib/gen-schema.mjs from its <name>.plan.ts files)
// binds defineExperiments to the folder's plans with `withPlans`: a plan name that is not a
// plan of the folder, a parameter the variant's plan does not declare, or a value of the
// wrong type is a tsc error. The compiler checks the rest (docs/plans.md, "Experiments").

import { callSite, type CompileOptions, type ParamDecl, type ParamDecls, type PlanDef } from "./plan.js";
import type { IdType } from "./schema.js";
import { PlanError } from "./expr.js";
import { F64, stringify, type Json } from "./json.js";

// ---- types ----------------------------------------------------------------------------

/** The plans of a folder, by name (the stem of <name>.plan.ts). */
export type PlanSet = { readonly [name: string]: PlanDef<any> };
/** The names of a plan set's plans. */
export type PlanNameOf<Plans extends PlanSet> = keyof Plans & string;
type ParamsOf<D> = D extends PlanDef<infer Ps> ? Ps : never;
/** The TypeScript type of a value for a parameter of type T. */
type ParamValue<T> = T extends "i64" | "f64" ? number : T extends "str" ? string : T extends "bool" ? boolean : never;
/**
 * Values for some of the parameters Ps declares. For a plan without parameters only `{}`: the
 * one (never-valued) key names the reason in tsc's "does not exist in type" message (an
 * index signature of `never` would also do, but it stops tsc from narrowing the variants by
 * `plan`, so a misspelled key of another plan would be reported as "not assignable to never").
 */
export type VariantParams<Ps extends ParamDecls> = [keyof Ps] extends [never]
  ? { readonly "this plan declares no parameters"?: never }
  : { readonly [K in keyof Ps]?: ParamValue<Ps[K]["type"]> };

/** A variant: `weight` of the 10000 buckets are served by `plan` with `params`. */
export type VariantSpec<Plans extends PlanSet> = {
  [N in PlanNameOf<Plans>]: {
    /** Unique within the experiment, non-empty, not "control" (the buckets left to the experiment's plan). */
    name: string;
    /** The plan that serves the variant's buckets: a plan of the folder. */
    plan: N;
    /** Values for parameters the variant's plan declares, each of its type and within its min/max (d {}). */
    params?: VariantParams<ParamsOf<Plans[N]>>;
    /** Buckets out of 10000, an integer 0..10000; the variants' weights sum to at most 10000. */
    weight: number;
  };
}[PlanNameOf<Plans>];

/** A shadow plan: run beside the served plan on `percent` of the requests, its answer compared, not served. */
export interface ShadowSpec<Name extends string = string> {
  /** A plan of the folder. */
  plan: Name;
  /** The percentage of the experiment's requests that also run the shadow plan, 0..100 (written as a double). */
  percent: number;
  /** How many of the top items are compared, an integer 1..1000 (d 10). JSON `compare_top`. */
  compareTop?: number;
}

/** One experiment on the plan `plan` (docs/experiments.md). */
export interface ExperimentSpec<Plans extends PlanSet> {
  /** Unique among the experiments, non-empty. */
  name: string;
  /** The plan name clients ask for: a plan of the folder, with at most one experiment. It serves the control buckets. */
  plan: keyof Plans & string;
  /** Non-empty: mixed into the bucketing, so that experiments with different salts split their traffic independently. */
  salt: string;
  /** The variants; their weights sum to at most 10000, the rest is the control. May be empty. */
  variants: readonly VariantSpec<Plans>[];
  /** Shadow plans (written only when given). */
  shadow?: readonly ShadowSpec<keyof Plans & string>[];
  /** When the experiment starts, Unix ms (an integer; written only when given). JSON `start_ms`. */
  startMs?: number;
  /** When it ends, Unix ms (an integer, after startMs; written only when given). JSON `end_ms`. */
  endMs?: number;
}

export interface ExperimentsDef {
  readonly kind: "rankd-experiments";
  /** The names of the plans the experiments are typed and checked with, sorted. */
  readonly plans: readonly string[];
  /** The experiments.json object; throws PlanError on misuse. `opts.planDir`: the folder the
   *  plans are served from (their model files), as for a plan's compile. */
  compile(opts?: CompileOptions): Json;
  /** The experiments.json text: deterministic 2-space JSON with a trailing newline. */
  text(opts?: CompileOptions): string;
}

// ---- the DSL bound to a plan set -------------------------------------------------------

/**
 * The experiments DSL bound to the plans `plans` (`{name: definePlan(...)}`, as in the
 * plans.gen.ts that lib/gen-schema.mjs writes for a plans folder): `defineExperiments`
 * types plan names and variant params by them and checks the rest when it compiles.
 * `source` names the plan set in messages.
 */
export function withPlans<const Plans extends PlanSet>(plans: Plans, source = "this folder") {
  return {
    plans,
    defineExperiments(experiments: readonly ExperimentSpec<Plans>[]): ExperimentsDef {
      const site = callSite();
      const def: ExperimentsDef = {
        kind: "rankd-experiments",
        plans: Object.keys(plans).sort(),
        text: (opts?: CompileOptions) => stringify(def.compile(opts)),
        compile: (opts?: CompileOptions) => {
          try {
            return compileExperiments(experiments as unknown as readonly ExperimentSpec<PlanSet>[], plans, source, opts);
          } catch (e) {
            if (e instanceof PlanError) throw new PlanError(`defineExperiments at ${site}: ${e.message}`);
            throw e;
          }
        },
      };
      return def;
    },
  };
}

// ---- the compiler ----------------------------------------------------------------------

/** Buckets of an experiment: variant weights are out of this many. */
export const BUCKETS = 10000;
const EXPERIMENT_KEYS = ["name", "plan", "salt", "variants", "shadow", "startMs", "endMs"];
const VARIANT_KEYS = ["name", "plan", "params", "weight"];
const SHADOW_KEYS = ["plan", "percent", "compareTop"];
/** JSON names the server uses, to point a misspelling at the DSL's name. */
const SNAKE: Record<string, string> = { compare_top: "compareTop", start_ms: "startMs", end_ms: "endMs" };

function fail(msg: string): never {
  throw new PlanError(msg);
}

/** What the checks of one experiments list share: the plans, their name in messages, and
 *  each plan's user_id type (undefined when the plan does not compile: it reports that itself). */
interface Cx {
  plans: PlanSet;
  source: string;
  userId(plan: string): IdType | undefined;
}

const show = (v: unknown) => (v === undefined ? "undefined" : JSON.stringify(v));
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function onlyKeys(where: string, o: Record<string, unknown>, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    const hint = SNAKE[k] && allowed.includes(SNAKE[k]) ? `; the DSL writes it ${SNAKE[k]}` : "";
    fail(`${where}: unknown field '${k}' (allowed: ${allowed.join(", ")}${hint})`);
  }
}

function planOf(where: string, v: unknown, { plans, source }: Cx): string {
  const names = Object.keys(plans).sort();
  const known = () => (names.length ? `plans of ${source}: ${names.join(", ")}` : `${source} has no plans`);
  if (typeof v !== "string") fail(`${where}: must be a plan name, got ${show(v)} (${known()})`);
  if (!Object.hasOwn(plans, v)) fail(`${where}: unknown plan '${v}' (${known()})`);
  const d = plans[v];
  if (!d || d.kind !== "rankd-plan") fail(`${where}: '${v}' of ${source} is not definePlan({...})`);
  return v;
}

function integer(where: string, v: unknown, lo: number, hi: number): number {
  if (typeof v !== "number" || !Number.isInteger(v)) fail(`${where} must be an integer ${lo}..${hi}, got ${show(v)}`);
  if (v < lo || v > hi) fail(`${where} ${v} is out of bounds ${lo}..${hi}`);
  return v;
}

/** A variant's value for its plan's parameter `name` declared `d`: of its type, within its min/max. */
function paramValue(where: string, plan: string, name: string, d: ParamDecl, v: unknown): Json {
  const declared = `plan '${plan}' declares ${name} ${d.type}`;
  switch (d.type) {
    case "i64":
    case "f64": {
      const isInt = d.type === "i64";
      if (typeof v !== "number" || !(isInt ? Number.isSafeInteger(v) : Number.isFinite(v)))
        fail(`${where} must be ${isInt ? "an integer" : "a finite number"} (${declared}), got ${show(v)}`);
      if ((d.min !== undefined && v < d.min) || (d.max !== undefined && v > d.max))
        fail(`${where} ${v} is outside ${d.min ?? "-∞"}..${d.max ?? "∞"} (the min/max plan '${plan}' declares for ${name})`);
      return isInt ? v : new F64(v);
    }
    case "str":
      if (typeof v !== "string") fail(`${where} must be a string (${declared}), got ${show(v)}`);
      return v;
    case "bool":
      if (typeof v !== "boolean") fail(`${where} must be a boolean (${declared}), got ${show(v)}`);
      return v;
    default:
      fail(`${where}: plan '${plan}' declares ${name} of type ${show((d as { type: unknown }).type)}, not one of i64, f64, str, bool`);
  }
}

/**
 * The requests for `requested` are answered by (or, for a shadow, also run) `plan`: both must
 * take the same user_id type (the server rejects the file otherwise).
 */
function sameUserIds(where: string, plan: string, requested: string, what: string, cx: Cx): void {
  const [a, b] = [cx.userId(plan), cx.userId(requested)];
  if (a !== undefined && b !== undefined && a !== b)
    fail(`${where}: plan '${plan}' takes ${a} user ids, plan '${requested}' ${b}; ${what} runs on the requests for '${requested}', so their user_id types must agree`);
}

function variantJson(where: string, v: unknown, requested: string, cx: Cx): { name: string; weight: number; json: Json } {
  const { plans } = cx;
  if (!isObject(v)) fail(`${where} must be an object {name, plan, params?, weight}, got ${show(v)}`);
  onlyKeys(where, v, VARIANT_KEYS);
  const name = v.name;
  if (typeof name !== "string" || name === "") fail(`${where}.name must be a non-empty string, got ${show(name)}`);
  if (name === "control") fail(`${where}.name 'control' is reserved: it names the buckets the experiment's own plan serves`);
  const at = `${where} '${name}'`;
  const plan = planOf(`${at}: plan`, v.plan, cx);
  sameUserIds(`${at}: plan`, plan, requested, "a variant", cx);
  const decls: ParamDecls = plans[plan].params ?? {};
  const params: Record<string, Json> = {};
  if (v.params !== undefined) {
    if (!isObject(v.params)) fail(`${at}: params must be an object {param: value}, got ${show(v.params)}`);
    for (const [k, x] of Object.entries(v.params)) {
      if (!Object.hasOwn(decls, k)) {
        const have = Object.keys(decls);
        fail(`${at}: params.${k}: plan '${plan}' declares no parameter '${k}' (${have.length ? `its parameters: ${have.join(", ")}` : "it has no parameters"})`);
      }
      params[k] = paramValue(`${at}: params.${k}`, plan, k, decls[k], x);
    }
  }
  const weight = integer(`${at}: weight`, v.weight, 0, BUCKETS);
  return { name, weight, json: { name, plan, params, weight } };
}

function shadowJson(where: string, s: unknown, requested: string, cx: Cx): Json {
  if (!isObject(s)) fail(`${where} must be an object {plan, percent, compareTop?}, got ${show(s)}`);
  onlyKeys(where, s, SHADOW_KEYS);
  const plan = planOf(`${where}.plan`, s.plan, cx);
  sameUserIds(`${where}.plan`, plan, requested, "a shadow plan", cx);
  const pct = s.percent;
  if (typeof pct !== "number" || !Number.isFinite(pct)) fail(`${where}.percent must be a number 0..100, got ${show(pct)}`);
  if (pct < 0 || pct > 100) fail(`${where}.percent ${pct} is out of bounds 0..100`);
  const top = integer(`${where}.compareTop`, s.compareTop ?? 10, 1, 1000);
  return { plan, percent: new F64(pct), compare_top: top };
}

function experimentJson(where: string, x: Record<string, unknown>, cx: Cx): Json {
  onlyKeys(where, x, EXPERIMENT_KEYS);
  const plan = planOf(`${where}: plan`, x.plan, cx);
  if (typeof x.salt !== "string" || x.salt === "") fail(`${where}: salt must be a non-empty string, got ${show(x.salt)}`);
  if (!Array.isArray(x.variants)) fail(`${where}: variants must be an array of {name, plan, params?, weight} (it may be empty), got ${show(x.variants)}`);
  const variants: Json[] = [];
  const names = new Map<string, number>();
  let sum = 0;
  x.variants.forEach((v, i) => {
    const got = variantJson(`${where}: variants[${i}]`, v, plan, cx);
    const prev = names.get(got.name);
    if (prev !== undefined) fail(`${where}: variants[${i}] '${got.name}': the name is also variants[${prev}]'s; variant names are unique within an experiment`);
    names.set(got.name, i);
    sum += got.weight;
    variants.push(got.json);
  });
  if (sum > BUCKETS)
    fail(`${where}: the variants' weights sum to ${sum}, more than the ${BUCKETS} buckets (${[...names.keys()].join(" + ")}; the control gets what is left)`);
  const j: Record<string, Json> = { name: x.name as string, plan, salt: x.salt, variants };
  if (x.shadow !== undefined) {
    if (!Array.isArray(x.shadow)) fail(`${where}: shadow must be an array of {plan, percent, compareTop?}, got ${show(x.shadow)}`);
    j.shadow = x.shadow.map((s, i) => shadowJson(`${where}: shadow[${i}]`, s, plan, cx));
  }
  for (const k of ["startMs", "endMs"] as const) {
    const v = x[k];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isSafeInteger(v)) fail(`${where}: ${k} must be an integer (Unix ms), got ${show(v)}`);
    j[k === "startMs" ? "start_ms" : "end_ms"] = v;
  }
  if (x.startMs !== undefined && x.endMs !== undefined && (x.startMs as number) >= (x.endMs as number))
    fail(`${where}: startMs ${x.startMs} is not before endMs ${x.endMs}`);
  return j;
}

/** The experiments.json object of `experiments` over the plans `plans` (served from `opts.planDir`). */
export function compileExperiments(experiments: readonly ExperimentSpec<PlanSet>[], plans: PlanSet, source = "this folder", opts?: CompileOptions): Json {
  const ids = new Map<string, IdType | undefined>();
  const userId = (plan: string): IdType | undefined => {
    if (!ids.has(plan)) {
      try {
        ids.set(plan, plans[plan].userIdType(opts));
      } catch (e) {
        if (!(e instanceof PlanError)) throw e;
        ids.set(plan, undefined);
      }
    }
    return ids.get(plan);
  };
  const cx: Cx = { plans, source, userId };
  if (!Array.isArray(experiments)) fail(`expects an array of experiments [{name, plan, salt, variants, …}], got ${show(experiments)}`);
  const out: Json[] = [];
  const byName = new Map<string, number>();
  const byPlan = new Map<string, string>();
  experiments.forEach((x: unknown, i) => {
    if (!isObject(x)) fail(`experiments[${i}] must be an object {name, plan, salt, variants, …}, got ${show(x)}`);
    if (typeof x.name !== "string" || x.name === "") fail(`experiments[${i}].name must be a non-empty string, got ${show(x.name)}`);
    const where = `experiment '${x.name}'`;
    const prev = byName.get(x.name);
    if (prev !== undefined) fail(`${where}: the name is also experiments[${prev}]'s; experiment names are unique (experiments[${i}])`);
    byName.set(x.name, i);
    const j = experimentJson(where, x, cx);
    const plan = x.plan as string;
    const other = byPlan.get(plan);
    if (other !== undefined) fail(`${where}: plan '${plan}' already has experiment '${other}'; a plan has at most one experiment`);
    byPlan.set(plan, x.name);
    out.push(j);
  });
  return { experiments: out };
}
