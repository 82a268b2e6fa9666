// The plan builder: definePlan({name, params, build}) and the chainable tasks (docs/plan.md).
// A node can only take already-built nodes as inputs, so a plan is acyclic by construction.
// Column sets are tracked twice: in the types (Node<C>, so unknown columns are tsc errors)
// and at run time (so the compiler can type expressions exactly as the C++ loader will).

import path from "node:path";
import { fileURLToPath } from "node:url";
import { F64, stringify, canonical, type Json } from "./json.js";
import {
  Expr, ParamRef, Pred, PlanError, checkPred, exprJson, predJson, typeOfExpr,
  type ColType, type ENode, type PNode, type TypeEnv,
} from "./expr.js";
import { parseExpr, parsePred } from "./parse.js";
import { checkModelInputs, checkNumericColumn, readModelFeatures } from "./model.js";

// ---- data model (docs/data.md) -------------------------------------------------------

/** Item hash fields (`item:{iid}`, docs/data.md) and their column types. */
export const ITEM_FIELDS = {
  author: "i64", likes: "i64", age_s: "i64", category: "str", country: "str", quality: "f64", nsfw: "i64",
} as const;
export type ItemFields = typeof ITEM_FIELDS;
export type ItemField = keyof ItemFields;

/** Columns of `viewer`: id = user_id plus the profile fields of `user:{uid}`. */
export const VIEWER_COLUMNS = { id: "i64", country: "str", lang: "str", age: "i64", premium: "i64" } as const;

/** Redis endpoints of the server configuration. Add a name here to use another endpoint. */
export const EP = { redis: { redis_default: "redis_default" } } as const;
export type Endpoint = (typeof EP.redis)[keyof typeof EP.redis];

/** Names of the columns that tasks produce, for `Key.score`-style references. */
export const Key = {
  id: "id", score: "score", author: "author", likes: "likes", age_s: "age_s", category: "category",
  country: "country", quality: "quality", nsfw: "nsfw", lang: "lang", age: "age", premium: "premium",
} as const;

// ---- types ----------------------------------------------------------------------------

export type Cols = { readonly [k: string]: ColType };
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type IdCol = { id: "i64" };
/** Typed references to the columns of a node's input: `(c) => c.likes.log1p()`. */
export type ColRefs<C extends Cols> = { readonly [K in keyof C & string]: Expr<C[K]> };
type ColName<C extends Cols> = keyof C & string;
/** The columns a model feature may read: i64, f64 and bool. */
type NumColName<C extends Cols> = { [K in keyof C & string]: C[K] extends "i64" | "f64" | "bool" ? K : never }[keyof C & string];

type Union2<A extends Cols, B extends Cols> = Simplify<{
  [K in keyof A | keyof B]: K extends keyof A ? A[K] : K extends keyof B ? B[K] : never;
}>;
type ColsOf<N> = N extends Node<infer C> ? C : never;
type KeysOfUnion<U> = U extends unknown ? keyof U : never;
type UnionAll<U extends Cols> = Simplify<{ [K in KeysOfUnion<U>]: U extends unknown ? (K extends keyof U ? U[K] : never) : never }>;

export type ParamDecl =
  | { readonly type: "i64"; readonly default: number; readonly min?: number; readonly max?: number; readonly description?: string }
  | { readonly type: "f64"; readonly default: number; readonly min?: number; readonly max?: number; readonly description?: string }
  | { readonly type: "str"; readonly default: string; readonly min?: never; readonly max?: never; readonly description?: string }
  | { readonly type: "bool"; readonly default: boolean; readonly min?: never; readonly max?: never; readonly description?: string };
export type ParamDecls = { readonly [name: string]: ParamDecl };
/** `P.weight` is a ParamRef<"f64"> when `weight` is declared `{type: "f64", …}`. */
export type ParamRefs<Ps extends ParamDecls> = { readonly [K in keyof Ps & string]: ParamRef<Ps[K]["type"]> };

/** A literal integer or an i64 request parameter. */
export type IntArg = number | ParamRef<"i64">;
export type BoolArg = boolean | ParamRef<"bool">;
/** Literal integers that are negative or fractional are type errors where tsc can see them. */
type IntCheck<N, F extends string> = number extends N
  ? {}
  : `${N & number}` extends `-${string}`
    ? { [k in F]: "error: must not be negative" }
    : `${N & number}` extends `${bigint}`
      ? {}
      : { [k in F]: "error: must be an integer" };

/** `cache` of the IO ops that may read through the shard's cache (docs/cache.md). */
export interface CacheOpt {
  /** Serve keys from the shard's cache (when the server runs with `--cache-mb`); written only when given. */
  cache?: boolean;
}

/** Options every node takes. */
export interface NodeOpts {
  /** The node_id; default: derived from the op and the order of creation (viewer, follow, follow_2, …). */
  id?: string;
  /** Fail-open: when the node fails or times out its output is empty and the response lists it as degraded. */
  optional?: boolean;
  /** Per-node timeout in milliseconds. */
  timeoutMs?: number;
}

/** An expression for a node: built with E / column refs, a callback over typed column refs, or a string. */
export type ExprArg<C extends Cols, T extends ColType> = Expr<T> | ((c: ColRefs<C>) => Expr<T>) | string;
export type PredArg<C extends Cols> = Pred | ((c: ColRefs<C>) => Pred) | string;

// ---- internals ----------------------------------------------------------------------

type TaskParam =
  | number | string | boolean | readonly string[] | { param: string } | { expr: ENode } | { pred: PNode }
  | { columnMap: ReadonlyMap<string, string> };
interface NodeRec {
  op: string;
  inputs: NodeRec[];
  params: [string, TaskParam][];
  cols: Map<string, ColType>;
  id?: string;
  optional?: boolean;
  timeoutMs?: number;
  call: string; // "take() at feed.plan.ts:12:5"
  /** A `model` node's model and feature map: checked against the model file at compile time. */
  model?: { name: string; features: ReadonlyMap<string, string> };
}

const DIST_LIB = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(DIST_LIB, "..", "..");
const SRC_LIB = path.join(ROOT, "lib");

/** Where the plan author called us: the first stack frame outside this library. */
function callSite(): string {
  const lines = (new Error().stack ?? "").split("\n").slice(1);
  for (const l of lines) {
    const m = l.match(/\(?((?:file:\/\/)?\/[^()]*?):(\d+):(\d+)\)?\s*$/);
    if (!m) continue;
    const file = m[1].startsWith("file://") ? fileURLToPath(m[1]) : m[1];
    if (file.startsWith(DIST_LIB + path.sep) || file.startsWith(SRC_LIB + path.sep)) continue;
    return `${path.relative(ROOT, file)}:${m[2]}:${m[3]}`;
  }
  return "unknown location";
}

const ID_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Plan and model names: the stems of <name>.plan.json and <name>.model.json, so no path separators. */
const FILE_STEM_RE = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

function fail(msg: string): never {
  throw new PlanError(msg);
}

class PlanBuilder {
  readonly nodes: NodeRec[] = [];
  readonly paramTypes = new Map<string, ColType>();
  readonly decls = new Map<string, ParamDecl>();

  /** Runs `body` for the call `op`; errors are prefixed with the call and its location. */
  task<C extends Cols>(op: string, inputs: Node<any>[], opts: NodeOpts | undefined, body: (rec: NodeRec) => void): Node<C> {
    const call = `${op}() at ${callSite()}`;
    try {
      const ins = inputs.map((n, i) => {
        if (!(n instanceof Node)) fail(`input ${i + 1} is not a node (${typeof n})`);
        if (n.plan !== this) fail(`input ${i + 1} is a node of another plan`);
        return n.rec;
      });
      const rec: NodeRec = { op, inputs: ins, params: [], cols: new Map(ins[0]?.cols ?? [["id", "i64"]]), call };
      applyOpts(rec, opts);
      body(rec);
      this.nodes.push(rec);
      return new Node<C>(this, rec);
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`${call}: ${e.message}`);
      throw e;
    }
  }

  env(rec: NodeRec): TypeEnv {
    return { cols: rec.inputs[0]?.cols ?? new Map(), params: this.paramTypes };
  }

  int(name: string, v: unknown, lo: number, hi: number): number | { param: string } {
    if (v instanceof ParamRef) {
      const d = this.decls.get(v.paramName) ?? fail(`${name}: parameter '${v.paramName}' is not declared`);
      if (d.type !== "i64") fail(`${name}: parameter '${v.paramName}' is ${d.type}; ${name} needs an i64`);
      if (d.default < lo || d.default > hi) fail(`${name}: the default ${d.default} of parameter '${v.paramName}' is outside ${lo}..${hi}`);
      if ((d.min !== undefined && d.min < lo) || (d.max !== undefined && d.max > hi))
        fail(`${name}: parameter '${v.paramName}' allows ${d.min ?? "-∞"}..${d.max ?? "∞"}, wider than ${name}'s bounds ${lo}..${hi}`);
      return { param: v.paramName };
    }
    if (typeof v !== "number" || !Number.isInteger(v)) fail(`${name} must be an integer or an i64 parameter, got ${JSON.stringify(v)}`);
    if (v < lo || v > hi) fail(`${name} ${v} is out of bounds ${lo}..${hi}`);
    return v;
  }

  bool(name: string, v: unknown): boolean | { param: string } {
    if (v instanceof ParamRef) {
      const d = this.decls.get(v.paramName) ?? fail(`${name}: parameter '${v.paramName}' is not declared`);
      if (d.type !== "bool") fail(`${name}: parameter '${v.paramName}' is ${d.type}; ${name} needs a bool`);
      return { param: v.paramName };
    }
    if (typeof v !== "boolean") fail(`${name} must be a boolean or a bool parameter, got ${JSON.stringify(v)}`);
    return v;
  }

  endpoint(rec: NodeRec, v: unknown): void {
    const ep = v ?? EP.redis.redis_default;
    if (typeof ep !== "string" || !/^[A-Za-z0-9_.-]+$/.test(ep)) fail(`endpoint must be an endpoint name, got ${JSON.stringify(v)}`);
    rec.params.push(["endpoint", ep]);
  }

  /**
   * `cache` of the IO ops (docs/cache.md): a literal bool (the server takes no `{param}`
   * here), written only when given so that plans without it compile as before.
   */
  cache(rec: NodeRec, v: unknown): void {
    if (v === undefined) return;
    if (v instanceof ParamRef) fail(`cache takes a literal boolean, not a request parameter ('${v.paramName}')`);
    if (typeof v !== "boolean") fail(`cache must be a boolean, got ${JSON.stringify(v)}`);
    rec.params.push(["cache", v]);
  }

  column(rec: NodeRec, name: string, v: unknown): string {
    if (typeof v !== "string") fail(`${name} must be a column name, got ${JSON.stringify(v)}`);
    const cols = rec.inputs[0].cols;
    if (!cols.has(v)) fail(`${name}: unknown column '${v}' (columns here: ${[...cols.keys()].join(", ")})`);
    return v;
  }

  expr(rec: NodeRec, arg: unknown): { node: ENode; type: ColType } {
    let e: unknown = arg;
    if (typeof arg === "function") e = arg(colRefs(rec.inputs[0].cols));
    const node = typeof e === "string" ? parseExpr(e) : e instanceof Expr ? e.node : fail(`expr must be an expression, a callback or a string`);
    const type = typeOfExpr(node, this.env(rec));
    if (type === "null") fail(`expr is always null; its column type is unknown`);
    return { node, type };
  }

  pred(rec: NodeRec, arg: unknown): PNode {
    let p: unknown = arg;
    if (typeof arg === "function") p = arg(colRefs(rec.inputs[0].cols));
    const node = typeof p === "string" ? parsePred(p) : p instanceof Pred ? p.node : fail(`pred must be a predicate, a callback or a string`);
    checkPred(node, this.env(rec));
    return node;
  }
}

function applyOpts(rec: NodeRec, o: NodeOpts | undefined): void {
  if (o === undefined) return;
  if (typeof o !== "object" || o === null) fail(`options must be an object`);
  if (o.id !== undefined) {
    if (typeof o.id !== "string" || !ID_RE.test(o.id)) fail(`id ${JSON.stringify(o.id)} is not a valid node id (letters, digits, _)`);
    rec.id = o.id;
  }
  if (o.optional !== undefined) {
    if (typeof o.optional !== "boolean") fail(`optional must be a boolean`);
    rec.optional = o.optional;
  }
  if (o.timeoutMs !== undefined) {
    if (typeof o.timeoutMs !== "number" || !Number.isInteger(o.timeoutMs) || o.timeoutMs < 1 || o.timeoutMs > 60_000)
      fail(`timeoutMs ${JSON.stringify(o.timeoutMs)} is out of bounds 1..60000 (the server's limit)`);
    rec.timeoutMs = o.timeoutMs;
  }
}

const KNOWN_OPTS: Record<string, readonly string[]> = {};
function checkKeys(op: string, o: object | undefined, keys: readonly string[]): void {
  if (o === undefined) return;
  if (typeof o !== "object" || o === null) fail(`options must be an object`);
  const allowed = KNOWN_OPTS[op] ?? [...keys, "id", "optional", "timeoutMs"];
  for (const k of Object.keys(o)) if (!allowed.includes(k)) fail(`unknown option '${k}' (allowed: ${allowed.join(", ")})`);
}

function colRefs(cols: Map<string, ColType>): object {
  return new Proxy(
    {},
    {
      get(_t, k) {
        if (typeof k !== "string") return undefined;
        if (!cols.has(k)) fail(`unknown column '${k}' (columns here: ${[...cols.keys()].join(", ")})`);
        return new Expr({ t: "key", name: k });
      },
      has: (_t, k) => typeof k === "string" && cols.has(k),
      ownKeys: () => [...cols.keys()],
      getOwnPropertyDescriptor: (_t, k) => (typeof k === "string" && cols.has(k) ? { enumerable: true, configurable: true } : undefined),
    },
  );
}

// ---- the public builder ----------------------------------------------------------------

/** A node of the plan whose rows have the columns C. Methods add a node that takes this one as input. */
export class Node<C extends Cols = Cols> {
  declare readonly __cols: C;
  /** @internal */
  constructor(readonly plan: PlanBuilder, readonly rec: NodeRec) {}

  /** `LRANGE follow:{id} 0 fanout-1` per row → rows id = followee. fanout 1..1000 (100). */
  follow<const N extends number = 100>(o: { endpoint?: Endpoint; fanout?: N | ParamRef<"i64"> } & CacheOpt & NodeOpts & IntCheck<N, "fanout"> = {} as never): Node<IdCol> {
    return this.plan.task("follow", [this], o, (r) => {
      checkKeys("follow", o, ["endpoint", "cache", "fanout"]);
      this.plan.endpoint(r, o.endpoint);
      this.plan.cache(r, o.cache);
      r.params.push(["fanout", this.plan.int("fanout", o.fanout ?? 100, 1, 1000)]);
      r.cols = new Map([["id", "i64"]]);
    });
  }
  /** `LRANGE recs:{id} 0 fanout-1` per row → rows id = item id. fanout 1..1000 (100). */
  recommendation<const N extends number = 100>(o: { endpoint?: Endpoint; fanout?: N | ParamRef<"i64"> } & CacheOpt & NodeOpts & IntCheck<N, "fanout"> = {} as never): Node<IdCol> {
    return this.plan.task("recommendation", [this], o, (r) => {
      checkKeys("recommendation", o, ["endpoint", "cache", "fanout"]);
      this.plan.endpoint(r, o.endpoint);
      this.plan.cache(r, o.cache);
      r.params.push(["fanout", this.plan.int("fanout", o.fanout ?? 100, 1, 1000)]);
      r.cols = new Map([["id", "i64"]]);
    });
  }
  /** `LRANGE media:{id} 0 per_author-1` per row → rows id = item id, author = input id. perAuthor 1..100 (10). */
  media<const N extends number = 10>(o: { endpoint?: Endpoint; perAuthor?: N | ParamRef<"i64"> } & CacheOpt & NodeOpts & IntCheck<N, "perAuthor"> = {} as never): Node<{ id: "i64"; author: "i64" }> {
    return this.plan.task("media", [this], o, (r) => {
      checkKeys("media", o, ["endpoint", "cache", "perAuthor"]);
      this.plan.endpoint(r, o.endpoint);
      this.plan.cache(r, o.cache);
      r.params.push(["per_author", this.plan.int("perAuthor", o.perAuthor ?? 10, 1, 100)]);
      r.cols = new Map([["id", "i64"], ["author", "i64"]]);
    });
  }
  /** `HMGET item:{id} fields…` → the input plus one typed column per field (null where missing). */
  features<const F extends readonly [ItemField, ...ItemField[]]>(
    o: { endpoint?: Endpoint; fields: F } & CacheOpt & NodeOpts,
  ): Node<Simplify<Omit<C, F[number]> & { [K in F[number]]: ItemFields[K] }>> {
    return this.plan.task("features", [this], o, (r) => {
      checkKeys("features", o, ["endpoint", "cache", "fields"]);
      this.plan.endpoint(r, o.endpoint);
      this.plan.cache(r, o.cache);
      const fields = o.fields as readonly unknown[];
      if (!Array.isArray(fields) || fields.length === 0) fail(`fields must be a non-empty list of item fields (${Object.keys(ITEM_FIELDS).join(", ")})`);
      const seen = new Set<string>();
      for (const f of fields) {
        if (typeof f !== "string" || !(f in ITEM_FIELDS)) fail(`fields: ${JSON.stringify(f)} is not an item field (${Object.keys(ITEM_FIELDS).join(", ")})`);
        if (seen.has(f)) fail(`fields: '${f}' is listed twice`);
        seen.add(f);
        r.cols.set(f, ITEM_FIELDS[f as ItemField]);
      }
      r.params.push(["fields", [...fields] as string[]]);
    });
  }
  /** Drops rows whose id is in `seen:{user_id}`. */
  seenFilter(o: { endpoint?: Endpoint } & NodeOpts = {}): Node<C> {
    return this.plan.task("seen_filter", [this], o, (r) => {
      checkKeys("seen_filter", o, ["endpoint"]);
      this.plan.endpoint(r, o.endpoint);
    });
  }
  /** Evaluates `expr` per row into the column `outKey` (added or replaced). */
  vm<const K extends string, T extends ColType = any>(o: { outKey: K; expr: ExprArg<C, T> } & NodeOpts): Node<Simplify<Omit<C, K> & { [k in K]: T }>> {
    return this.plan.task("vm", [this], o, (r) => {
      checkKeys("vm", o, ["outKey", "expr"]);
      if (typeof o.outKey !== "string" || !ID_RE.test(o.outKey)) fail(`outKey ${JSON.stringify(o.outKey)} is not a valid column name`);
      if (o.outKey === "id") fail(`outKey: vm may not replace the id column`);
      const { node, type } = this.plan.expr(r, o.expr);
      r.params.push(["out_key", o.outKey], ["expr", { expr: node }]);
      r.cols.set(o.outKey, type);
    });
  }
  /**
   * Scores each row with the tree model `model` (the file `<model>.model.json` in the plan
   * folder, docs/models.md) into the f64 column `outKey`. `features` maps model feature
   * names to columns (default: each feature reads the column of its own name); every model
   * feature must read an i64, f64 or bool column. `output`: "default" is the objective's
   * prediction (a probability for the logistic ones), "margin" the raw sum of the trees.
   */
  model<const K extends string>(
    o: { model: string; outKey: K; features?: { readonly [feature: string]: NumColName<C> }; output?: "default" | "margin" } & NodeOpts,
  ): Node<Simplify<Omit<C, K> & { [k in K]: "f64" }>> {
    return this.plan.task("model", [this], o, (r) => {
      checkKeys("model", o, ["model", "outKey", "features", "output"]);
      if (typeof o.model !== "string" || !FILE_STEM_RE.test(o.model)) fail(`model ${JSON.stringify(o.model)} is not a model name (letters, digits, _ or -)`);
      if (typeof o.outKey !== "string" || !ID_RE.test(o.outKey)) fail(`outKey ${JSON.stringify(o.outKey)} is not a valid column name`);
      if (o.outKey === "id") fail(`outKey: model may not replace the id column`);
      const output = o.output ?? "default";
      if (output !== "default" && output !== "margin") fail(`output must be "default" or "margin", got ${JSON.stringify(o.output)}`);
      const features = new Map<string, string>();
      if (o.features !== undefined) {
        if (typeof o.features !== "object" || o.features === null || Array.isArray(o.features))
          fail(`features must be an object: model feature name → column`);
        for (const [f, col] of Object.entries(o.features as Record<string, unknown>)) {
          if (f === "") fail(`features: a model feature name is empty`);
          if (typeof col !== "string") fail(`features: '${f}' must name a column, got ${JSON.stringify(col)}`);
          checkNumericColumn(r.inputs[0].cols, col, `features: '${f}'`);
          features.set(f, col);
        }
      }
      r.params.push(["model", o.model], ["out_key", o.outKey]);
      if (features.size > 0) r.params.push(["features", { columnMap: features }]);
      r.params.push(["output", output]);
      r.model = { name: o.model, features };
      r.cols.set(o.outKey, "f64");
    });
  }
  /** Keeps the rows where the predicate is true. */
  filter(o: { pred: PredArg<C> } & NodeOpts): Node<C> {
    return this.plan.task("filter", [this], o, (r) => {
      checkKeys("filter", o, ["pred"]);
      r.params.push(["pred", { pred: this.plan.pred(r, o.pred) }]);
    });
  }
  /** Stable sort by one column; nulls last in either order. */
  sort(o: { key: ColName<C>; order: "desc" | "asc" } & NodeOpts): Node<C> {
    return this.plan.task("sort", [this], o, (r) => {
      checkKeys("sort", o, ["key", "order"]);
      const key = this.plan.column(r, "key", o.key);
      if (o.order !== "desc" && o.order !== "asc") fail(`order must be "desc" or "asc", got ${JSON.stringify(o.order)}`);
      r.params.push(["key", key], ["order", o.order]);
    });
  }
  /** The first `count` rows; count 1..10000. */
  take<const N extends number>(o: { count: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "count">): Node<C> {
    return this.plan.task("take", [this], o, (r) => {
      checkKeys("take", o, ["count"]);
      r.params.push(["count", this.plan.int("count", o.count, 1, 10000)]);
    });
  }
  /** Rows of this node, then of `other` (or of each of `others`); columns are the union. */
  concat<D extends Cols>(other: Node<D>, o?: NodeOpts): Node<Union2<C, D>>;
  concat<const Ns extends readonly [Node<any>, ...Node<any>[]]>(others: Ns, o?: NodeOpts): Node<UnionAll<C | ColsOf<Ns[number]>>>;
  concat(others: Node<any> | readonly Node<any>[], o?: NodeOpts): Node<any> {
    const list = Array.isArray(others) ? [this, ...others] : [this, others as Node<any>];
    return concatNodes(this.plan, list, o);
  }
  /** Keeps the first row of each distinct value of `key` (default id). */
  dedupe(o: { key?: ColName<C> } & NodeOpts = {}): Node<C> {
    return this.plan.task("dedupe", [this], o, (r) => {
      checkKeys("dedupe", o, ["key"]);
      r.params.push(["key", this.plan.column(r, "key", o.key ?? "id")]);
    });
  }
  /** Waits `durationMs` (0..60000) on a timer, then passes the rows through, or fails. */
  sleep<const N extends number>(o: { durationMs: N | ParamRef<"i64">; failAfterSleep?: BoolArg } & NodeOpts & IntCheck<N, "durationMs">): Node<C> {
    return sleepNode(this.plan, [this], o);
  }
  /** Spins a CPU thread for `durationMs` (0..60000), then passes the rows through. */
  busyCpu<const N extends number>(o: { durationMs: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "durationMs">): Node<C> {
    return busyNode(this.plan, [this], o);
  }
  /** Marks this node as the plan's output, listing the response columns (default: all). */
  output<const K extends readonly [ColName<C>, ...ColName<C>[]]>(columns: K): Output<Simplify<Pick<C, K[number]>>> {
    const call = `output() at ${callSite()}`;
    const cols = columns as readonly unknown[];
    try {
      if (!Array.isArray(cols) || cols.length === 0) fail(`columns must be a non-empty list`);
      const seen = new Set<string>();
      for (const c of cols) {
        if (typeof c !== "string" || !this.rec.cols.has(c))
          fail(`unknown column ${JSON.stringify(c)} (columns here: ${[...this.rec.cols.keys()].join(", ")})`);
        if (seen.has(c)) fail(`column '${c}' is listed twice`);
        seen.add(c);
      }
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`${call}: ${e.message}`);
      throw e;
    }
    return new Output(this, [...(cols as string[])]);
  }
}

/** The plan's output: a node and the columns of the response. */
export class Output<C extends Cols = Cols> {
  declare readonly __cols: C;
  constructor(readonly node: Node<any>, readonly columns: readonly string[]) {}
}

function concatNodes(plan: PlanBuilder, list: readonly Node<any>[], o: NodeOpts | undefined): Node<any> {
  return plan.task("concat", [...list], o, (r) => {
    checkKeys("concat", o, []);
    if (list.length < 2) fail(`concat needs at least 2 inputs, got ${list.length}`);
    r.cols = new Map();
    r.inputs.forEach((inp, i) => {
      for (const [k, t] of inp.cols) {
        const prev = r.cols.get(k);
        if (prev && prev !== t) fail(`column '${k}' is ${prev} in an earlier input but ${t} in input ${i + 1}`);
        r.cols.set(k, t);
      }
    });
  });
}

function sleepNode(plan: PlanBuilder, inputs: Node<any>[], o: { durationMs: unknown; failAfterSleep?: unknown } & NodeOpts): Node<any> {
  return plan.task("sleep", inputs, o, (r) => {
    checkKeys("sleep", o, ["durationMs", "failAfterSleep"]);
    r.params.push(["duration_ms", plan.int("durationMs", o?.durationMs, 0, 60000)], ["fail_after_sleep", plan.bool("failAfterSleep", o.failAfterSleep ?? false)]);
  });
}

function busyNode(plan: PlanBuilder, inputs: Node<any>[], o: { durationMs: unknown } & NodeOpts): Node<any> {
  return plan.task("busy_cpu", inputs, o, (r) => {
    checkKeys("busy_cpu", o, ["durationMs"]);
    r.params.push(["duration_ms", plan.int("durationMs", o?.durationMs, 0, 60000)]);
  });
}

/** What `build` receives: the source tasks (no input) and n-ary concat. */
export class Ctx {
  /** @internal */
  constructor(private readonly plan: PlanBuilder) {}

  /** `HGETALL user:{user_id}` → one row (id = user_id, profile fields); zero rows for a missing user. */
  viewer(o: { endpoint?: Endpoint } & CacheOpt & NodeOpts = {}): Node<typeof VIEWER_COLUMNS> {
    return this.plan.task("viewer", [], o, (r) => {
      checkKeys("viewer", o, ["endpoint", "cache"]);
      this.plan.endpoint(r, o.endpoint);
      this.plan.cache(r, o.cache);
      r.cols = new Map(Object.entries(VIEWER_COLUMNS));
    });
  }
  /** Rows id = 1..count and score = id (f64); count 0..100000 (10). No IO. */
  fixedSource<const N extends number = 10>(o: { count?: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "count"> = {} as never): Node<{ id: "i64"; score: "f64" }> {
    return this.plan.task("fixed_source", [], o, (r) => {
      checkKeys("fixed_source", o, ["count"]);
      r.params.push(["count", this.plan.int("count", o.count ?? 10, 0, 100000)]);
      r.cols = new Map([["id", "i64"], ["score", "f64"]]);
    });
  }
  /** A source that waits `durationMs` (0..60000) then yields zero rows, or fails. */
  sleep<const N extends number>(o: { durationMs: N | ParamRef<"i64">; failAfterSleep?: BoolArg } & NodeOpts & IntCheck<N, "durationMs">): Node<IdCol> {
    return sleepNode(this.plan, [], o);
  }
  /** A source that spins a CPU thread for `durationMs` (0..60000), then yields zero rows. */
  busyCpu<const N extends number>(o: { durationMs: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "durationMs">): Node<IdCol> {
    return busyNode(this.plan, [], o);
  }
  /** Rows of each input in order; columns are the union, missing cells null. */
  concat<const Ns extends readonly [Node<any>, Node<any>, ...Node<any>[]]>(inputs: Ns, o?: NodeOpts): Node<UnionAll<ColsOf<Ns[number]>>> {
    if (!Array.isArray(inputs)) fail(`concat() at ${callSite()}: inputs must be an array of nodes`);
    return concatNodes(this.plan, inputs, o);
  }
}

// ---- definePlan and the compiler -------------------------------------------------------

export interface PlanSpec<Ps extends ParamDecls> {
  /** The plan's name: the file must be `<name>.plan.ts`. */
  name: string;
  description?: string;
  params?: Ps;
  /** Builds the DAG and returns its output node (or `node.output([...columns])`). */
  build: (ctx: Ctx, P: ParamRefs<Ps>) => Node<any> | Output<any>;
}

export interface CompileOptions {
  /** The plan folder the server loads: where `model` nodes' model files must be. Default: plans/. */
  planDir?: string;
}

export interface PlanDef {
  readonly name: string;
  readonly kind: "rankd-plan";
  /** The plan JSON object (docs/plan.md); throws PlanError on misuse. */
  compile(opts?: CompileOptions): Json;
}

export function definePlan<const Ps extends ParamDecls = {}>(spec: PlanSpec<Ps>): PlanDef {
  const site = callSite();
  return {
    name: spec?.name,
    kind: "rankd-plan",
    compile: (opts?: CompileOptions) => {
      try {
        return compile(spec as PlanSpec<ParamDecls>, site, opts?.planDir ?? ROOT);
      } catch (e) {
        if (e instanceof PlanError) throw new PlanError(`plan '${spec?.name}': ${e.message}`);
        throw e;
      }
    },
  };
}

/** The plan file text: deterministic 2-space JSON with a trailing newline. */
export function planText(def: PlanDef, opts?: CompileOptions): string {
  return stringify(def.compile(opts));
}

function paramJson(name: string, d: ParamDecl): Json {
  const where = `params.${name}`;
  if (!ID_RE.test(name)) fail(`${where}: not a valid parameter name`);
  if (typeof d !== "object" || d === null) fail(`${where}: must be {type, default, …}`);
  const allowed = d.type === "i64" || d.type === "f64" ? ["type", "default", "min", "max", "description"] : ["type", "default", "description"];
  for (const k of Object.keys(d)) if (!allowed.includes(k)) fail(`${where}: unknown field '${k}' for a ${d.type} parameter`);
  const out: Record<string, Json> = { type: d.type };
  switch (d.type) {
    case "i64":
    case "f64": {
      const isInt = d.type === "i64";
      const ok = (v: unknown) => typeof v === "number" && (isInt ? Number.isSafeInteger(v) : Number.isFinite(v));
      const wrap = (v: number): Json => (isInt ? v : new F64(v));
      if (!ok(d.default)) fail(`${where}: default ${JSON.stringify(d.default)} is not ${isInt ? "an integer" : "a finite number"}`);
      out.default = wrap(d.default);
      for (const b of ["min", "max"] as const) {
        if (d[b] === undefined) continue;
        if (!ok(d[b])) fail(`${where}: ${b} ${JSON.stringify(d[b])} is not ${isInt ? "an integer" : "a finite number"}`);
        out[b] = wrap(d[b]!);
      }
      if (d.min !== undefined && d.max !== undefined && d.min > d.max) fail(`${where}: min ${d.min} > max ${d.max}`);
      if ((d.min !== undefined && d.default < d.min) || (d.max !== undefined && d.default > d.max))
        fail(`${where}: default ${d.default} is outside ${d.min ?? "-∞"}..${d.max ?? "∞"}`);
      return out;
    }
    case "str":
      if (typeof (d.default as unknown) !== "string") fail(`${where}: default ${JSON.stringify(d.default)} is not a string`);
      out.default = d.default;
      return out;
    case "bool":
      if (typeof (d.default as unknown) !== "boolean") fail(`${where}: default ${JSON.stringify(d.default)} is not a boolean`);
      out.default = d.default;
      return out;
    default:
      fail(`${where}: type ${JSON.stringify((d as { type: unknown }).type)} is not one of i64, f64, str, bool`);
  }
}

function compile(spec: PlanSpec<ParamDecls>, site: string, planDir: string): Json {
  if (typeof spec !== "object" || spec === null) fail(`definePlan at ${site}: expects {name, params, build}`);
  if (typeof spec.name !== "string" || !FILE_STEM_RE.test(spec.name)) fail(`definePlan at ${site}: name must be letters, digits, _ or -`);
  if (spec.description !== undefined && typeof spec.description !== "string") fail(`description must be a string`);
  if (typeof spec.build !== "function") fail(`definePlan at ${site}: build must be a function`);
  for (const k of Object.keys(spec)) if (!["name", "description", "params", "build"].includes(k)) fail(`definePlan at ${site}: unknown field '${k}'`);

  const b = new PlanBuilder();
  const params: Record<string, Json> = {};
  for (const [name, d] of Object.entries(spec.params ?? {})) {
    params[name] = paramJson(name, d);
    b.decls.set(name, d);
    b.paramTypes.set(name, d.type);
  }
  const P = new Proxy({} as Record<string, ParamRef>, {
    get(_t, k) {
      if (typeof k !== "string") return undefined;
      if (!b.decls.has(k)) fail(`parameter '${k}' is used at ${callSite()} but not declared in params`);
      return new ParamRef(k);
    },
  });

  const ret: unknown = spec.build(new Ctx(b), P as never);
  let out: Output<any>;
  if (ret instanceof Output) out = ret;
  else if (ret instanceof Node) out = new Output(ret, []);
  else if (Array.isArray(ret))
    fail(`build returned ${ret.length} nodes; a plan has one output node: join branches (e.g. a.concat(b)) or return one of them`);
  else fail(`build must return a node or node.output([...]), got ${typeof ret}`);
  if (out.node.plan !== b) fail(`build returned a node of another plan`);

  // Every node must reach the output.
  const live = new Set<NodeRec>();
  const stack = [out.node.rec];
  while (stack.length) {
    const n = stack.pop()!;
    if (live.has(n)) continue;
    live.add(n);
    stack.push(...n.inputs);
  }
  for (const n of b.nodes)
    if (!live.has(n)) fail(`${n.call}: this node does not reach the output node; use it (e.g. concat) or remove it`);

  // Node ids: explicit ones first, then op-derived ones in creation order.
  const ids = new Map<NodeRec, string>();
  const taken = new Set<string>();
  for (const n of b.nodes) {
    if (n.id === undefined) continue;
    if (taken.has(n.id)) fail(`${n.call}: node id '${n.id}' is used twice`);
    taken.add(n.id);
    ids.set(n, n.id);
  }
  for (const n of b.nodes) {
    if (ids.has(n)) continue;
    let id = n.op;
    for (let k = 2; taken.has(id); k++) id = `${n.op}_${k}`;
    taken.add(id);
    ids.set(n, id);
  }

  // Model nodes: the model file must be in the plan folder and its features must read numeric columns.
  for (const n of b.nodes) {
    if (!n.model) continue;
    try {
      checkModelInputs(n.model.name, readModelFeatures(planDir, n.model.name), n.model.features, n.inputs[0].cols);
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`${n.call}: node '${ids.get(n)}': ${e.message}`);
      throw e;
    }
  }

  // Expression and predicate tables, deduplicated, ids in order of first use.
  const exprTable: Record<string, Json> = {};
  const predTable: Record<string, Json> = {};
  const exprIds = new Map<string, string>();
  const predIds = new Map<string, string>();
  const intern = (j: Json, table: Record<string, Json>, seen: Map<string, string>, prefix: string) => {
    const key = canonical(j);
    let id = seen.get(key);
    if (!id) {
      id = `${prefix}${seen.size}`;
      seen.set(key, id);
      table[id] = j;
    }
    return id;
  };

  const nodes: Json[] = b.nodes.map((n) => {
    const p: Record<string, Json> = {};
    for (const [k, v] of n.params) {
      if (typeof v === "object" && v !== null && "expr" in v) p[k] = intern(exprJson(v.expr), exprTable, exprIds, "e");
      else if (typeof v === "object" && v !== null && "pred" in v) p[k] = intern(predJson(v.pred), predTable, predIds, "p");
      else if (typeof v === "object" && v !== null && "columnMap" in v) p[k] = Object.fromEntries(v.columnMap);
      else p[k] = v as Json;
    }
    const j: Record<string, Json> = { node_id: ids.get(n)!, op: n.op, inputs: n.inputs.map((i) => ids.get(i)!), params: p };
    if (n.optional !== undefined) j.optional = n.optional;
    if (n.timeoutMs !== undefined) j.timeout_ms = n.timeoutMs;
    return j;
  });

  const plan: Record<string, Json> = { schema_version: 1, name: spec.name };
  if (spec.description !== undefined) plan.description = spec.description;
  plan.params = params;
  plan.nodes = nodes;
  plan.expr_table = exprTable;
  plan.pred_table = predTable;
  const output: Record<string, Json> = { node: ids.get(out.node.rec)! };
  if (out.columns.length > 0) output.columns = [...out.columns];
  plan.output = output;
  return plan;
}
