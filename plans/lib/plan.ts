// The plan builder: definePlan({name, params, build}) and the chainable tasks (docs/plan.md).
// A node can only take already-built nodes as inputs, so a plan is acyclic by construction.
// Column sets are tracked twice: in the types (Node<C>, so unknown columns are tsc errors)
// and at run time (so the compiler can type expressions exactly as the C++ loader will).

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { F64, stringify, canonical, type Json } from "./json.js";
import {
  Expr, ParamRef, Pred, PlanError, checkPred, exprJson, isVec, predJson, typeOfExpr,
  type ColType, type VecType, type ENode, type PNode, type TypeEnv,
} from "./expr.js";
import { parseExpr, parsePred } from "./parse.js";
import { GENERATED_METHODS, OPS, type GeneratedMethods, type Ops } from "./ops.gen.js";
import { checkModelInputs, checkNetColumn, readModelKind } from "./model.js";
import {
  DEMO_SCHEMA, checkSchema, fieldCol,
  type DemoSchema, type Family, type FamilyOf, type IdType, type FamilyType, type FieldCols, type FieldName, type Fams, type IdOf,
  type MembersOf, type Schema, type SchemaDecl, type SetFamilyOf, type TypeOfFamily, type IndexName, type IndexIdOf,
} from "./schema.js";

// ---- data model (docs/data.md): the families of the plans folder's schema.json (lib/schema.ts) ----

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
export type Simplify<T> = { [K in keyof T]: T[K] } & {};
type IdCol = { id: "i64" };
/** Typed references to the columns of a node's input: `(c) => c.likes.log1p()`. */
export type ColRefs<C extends Cols> = { readonly [K in keyof C & string]: Expr<C[K]> };
export type ColName<C extends Cols> = keyof C & string;
/** The columns of C whose type is one of T. */
export type ColOfType<C extends Cols, T extends ColType> = { [K in keyof C & string]: C[K] extends T ? K : never }[keyof C & string];
/** The columns a model feature may read: i64, f64 and bool. */
type NumColName<C extends Cols> = ColOfType<C, "i64" | "f64" | "bool">;
/** The columns an ONNX model's float input may read: numeric ones and vectors (D values each). */
type NetColName<C extends Cols> = ColOfType<C, "i64" | "f64" | "bool" | VecType>;
/** A column sort and dedupe may key on: any but a vector. */
type KeyColName<C extends Cols> = ColOfType<C, "i64" | "f64" | "str" | "bool">;

type Union2<A extends Cols, B extends Cols> = Simplify<{
  [K in keyof A | keyof B]: K extends keyof A ? A[K] : K extends keyof B ? B[K] : never;
}>;
type ColsOf<N> = N extends Node<infer C, any> ? C : never;
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

// ---- the op catalogue (plans/ops.json, `rankd ops --json`; lib/ops.gen.ts) -----------------

type OpName = keyof Ops;
/** The catalogue's default of param P of op O (`OpDefault<"follow", "fanout">` is 100). */
type OpDefault<O extends OpName, P extends keyof Ops[O]["params"]> = Ops[O]["params"][P] extends { default: infer D } ? D : never;
/** The values a str param of the catalogue allows (`OpValues<"sort", "order">` is "desc" | "asc"). */
type OpValues<O extends OpName, P extends keyof Ops[O]["params"]> = Ops[O]["params"][P] extends { values: readonly (infer V)[] } ? V : never;
/** snake_case → camelCase, as the DSL spells the catalogue's params (per_author → perAuthor). */
type Camel<T extends string> = T extends `${infer A}_${infer B}` ? `${A}${Capitalize<Camel<B>>}` : T;

interface CatalogueParam {
  readonly type: string;
  readonly required?: boolean;
  readonly default?: unknown;
  readonly min?: number;
  readonly max?: number;
  readonly values?: readonly string[];
  readonly ref?: boolean;
  readonly reads?: readonly ColType[];
  readonly writes?: boolean;
}
interface CatalogueOp {
  readonly params: Readonly<Record<string, CatalogueParam>>;
  readonly output: { readonly adds: readonly { readonly param?: string; readonly name?: string; readonly type: string }[] };
}
/** The catalogue's entry of op `op`'s param `json`. */
function opParam(op: string, json: string): CatalogueParam {
  const p = (OPS as unknown as Record<string, CatalogueOp>)[op]?.params[json];
  if (!p) throw new Error(`plans/ops.json: op '${op}' has no param '${json}' (regenerate it: rankd ops --json)`);
  return p;
}
/** The catalogue's default of a param (string, number or boolean). */
function opDefault<T>(op: string, json: string): T {
  return opParam(op, json).default as T;
}
/** The catalogue's bounds of a numeric param. */
function opBounds(op: string, json: string): [number, number] {
  const p = opParam(op, json);
  return [p.min ?? -Number.MAX_VALUE, p.max ?? Number.MAX_VALUE];
}

/** A literal integer or an i64 request parameter. */
export type IntArg = number | ParamRef<"i64">;
export type BoolArg = boolean | ParamRef<"bool">;
/** A literal number or an f64 request parameter. */
export type F64Arg = number | ParamRef<"f64">;
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

// ---- schema families in option types (lib/schema.ts) -------------------------------------

/** list and zset families keyed by ids of type I. */
type SeqFam<S extends SchemaDecl, I> = FamilyOf<S, "list" | "zset", I>;
/** hash, json and counters families (keyed by ids of type I). */
type FieldFam<S extends SchemaDecl, I = IdType> = FamilyOf<S, "hash" | "json" | "counters", I>;
/** T, known to be a column set. */
type AsCols<T> = T extends Cols ? T : never;
/** The op's default family when the schema has it with the right type, else never (then `family` is required). */
type Dflt<D extends string, Allowed extends string> = D extends Allowed ? D : never;
/** `family`: optional when the op's default family D fits (it is then not written to the JSON), else required. */
type FamilyOpt<Fam extends string, D extends string, Allowed extends string> = [D] extends [Allowed]
  ? { /** The schema family to read (default: the op's demo name). */ family?: Fam }
  : { /** The schema family to read (this schema has no fitting family of the op's default name). */ family: Fam };
/** The options argument: optional when the op's default family D fits, else required (it must name the family). */
type OptArg<D extends string, Allowed extends string, O> = [D] extends [Allowed] ? [o?: O] : [o: O];
/** `scoreAs`: a column name on a zset family; on any other family its type is an error message. */
type ScoreAsOpt<S extends SchemaDecl, Fam extends string, A extends string> = TypeOfFamily<S, Fam> extends "zset"
  ? A
  : `error: scoreAs needs a zset family; '${Fam}' is a ${TypeOfFamily<S, Fam> & string}`;

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
  | number | F64 | string | boolean | readonly string[] | { param: string } | { expr: ENode } | { pred: PNode }
  | { columnMap: ReadonlyMap<string, string | readonly string[]> } | { numberMap: ReadonlyMap<string, number> }
  // A node of the plan, written as its id (with `key`: {"from": id, "key": key}); ann's
  // query and exclude. And ann's exclude {"family": NAME}, written as it is.
  | { node: NodeRec; key?: string } | { family: string };
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
  model?: { name: string; features: ReadonlyMap<string, string | readonly string[]> };
  /** viewer and seen_filter: the family keyed by the request's user_id (its id type must be the user_id's). */
  userKeyed?: Family;
  /** The integer params of its op, all of which it writes (DSL name → JSON name): what a
   *  `quality` block may scale. */
  ints: Map<string, string>;
}

const DIST_LIB = path.dirname(fileURLToPath(import.meta.url));
/** The plans package (plans/): the first folder above this file that holds lib/plan.ts. The
 *  library also runs from a second copy under dist/ext/… when `cli.js --dir` compiles
 *  another plans folder, so this is found, not assumed to be dist/lib/../.. . */
const ROOT = (() => {
  for (let d = path.dirname(DIST_LIB); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, "lib", "plan.ts")) && fs.existsSync(path.join(d, "package.json"))) return d;
    if (path.dirname(d) === d) return path.resolve(DIST_LIB, "..", "..");
  }
})();
const SRC_LIB = path.join(ROOT, "lib");

/** Where the plan author called us: the first stack frame outside this library. */
export function callSite(): string {
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
  constructor(readonly schema: Schema) {}
  readonly nodes: NodeRec[] = [];
  readonly paramTypes = new Map<string, ColType>();
  readonly decls = new Map<string, ParamDecl>();

  /** Runs `body` for the call `op`; errors are prefixed with the call and its location. */
  task<C extends Cols, S extends SchemaDecl = any>(op: string, inputs: Node<any, any>[], opts: NodeOpts | undefined, body: (rec: NodeRec) => void): Node<C, S> {
    const call = `${op}() at ${callSite()}`;
    try {
      const ins = inputs.map((n, i) => {
        if (!(n instanceof Node)) fail(`input ${i + 1} is not a node (${typeof n})`);
        if (n.plan !== this) fail(`input ${i + 1} is a node of another plan`);
        return n.rec;
      });
      const rec: NodeRec = { op, inputs: ins, params: [], cols: new Map(ins[0]?.cols ?? [["id", "i64"]]), call, ints: new Map() };
      applyOpts(rec, opts);
      body(rec);
      this.nodes.push(rec);
      return new Node<C, S>(this, rec);
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`${call}: ${e.message}`);
      throw e;
    }
  }

  env(rec: NodeRec): TypeEnv {
    return { cols: rec.inputs[0]?.cols ?? new Map(), params: this.paramTypes, from: (node, key) => this.fromType(rec, node, key) };
  }

  /** The node E.from names: a Node of this plan, or the explicit id of one. */
  fromNode(node: unknown): NodeRec {
    if (node instanceof Node) {
      if (node.plan !== this) fail(`E.from: the node is of another plan`);
      return node.rec;
    }
    const found = this.nodes.find((n) => n.id === node);
    if (!found) fail(`E.from: no node has the id '${String(node)}' (give the viewer an explicit id, or pass the node)`);
    return found;
  }

  /** E.from(node, key) at `rec` (the server's rule, docs/plan.md): a viewer that `rec` reads
   *  through its inputs, and one of its columns. */
  fromType(rec: NodeRec, node: unknown, key: string): ColType {
    const src = this.fromNode(node);
    const what = `E.from(${src.id ?? src.op}, ${key})`;
    const seen = new Set<NodeRec>();
    const stack = [...rec.inputs];
    let reached = false;
    while (stack.length > 0 && !reached) {
      const n = stack.pop()!;
      if (n === src) reached = true;
      else if (!seen.has(n)) seen.add(n), stack.push(...n.inputs);
    }
    if (!reached) fail(`${what}: that node is not an input of this one, directly or through other nodes`);
    if (src.op !== "viewer") fail(`${what}: a ${src.op} node; E.from reads a viewer node (one row)`);
    const t = src.cols.get(key);
    if (!t) fail(`${what}: the viewer has no column '${key}' (it has ${[...src.cols.keys()].join(", ")})`);
    return t;
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

  /** The integer task parameter `name` (JSON `json`) of `rec`, checked by `int`: written, and
   *  recorded as one that a `quality` block may scale. Bounds: the op's, from the catalogue. */
  intParam(rec: NodeRec, name: string, json: string, v: unknown): void {
    rec.params.push([json, this.int(name, v, ...opBounds(rec.op, json))]);
    rec.ints.set(name, json);
  }

  /** A number lo..hi (written as a double), or an f64 parameter whose default and declared range fit. */
  num(name: string, v: unknown, lo: number, hi: number): F64 | { param: string } {
    if (v instanceof ParamRef) {
      const d = this.decls.get(v.paramName) ?? fail(`${name}: parameter '${v.paramName}' is not declared`);
      if (d.type !== "f64") fail(`${name}: parameter '${v.paramName}' is ${d.type}; ${name} needs an f64`);
      if (d.default < lo || d.default > hi) fail(`${name}: the default ${d.default} of parameter '${v.paramName}' is outside ${lo}..${hi}`);
      if ((d.min !== undefined && d.min < lo) || (d.max !== undefined && d.max > hi))
        fail(`${name}: parameter '${v.paramName}' allows ${d.min ?? "-∞"}..${d.max ?? "∞"}, wider than ${name}'s bounds ${lo}..${hi}`);
      return { param: v.paramName };
    }
    if (typeof v !== "number" || !Number.isFinite(v)) fail(`${name} must be a number or an f64 parameter, got ${JSON.stringify(v)}`);
    if (v < lo || v > hi) fail(`${name} ${v} is out of bounds ${lo}..${hi}`);
    return new F64(v);
  }

  /** The number task parameter `json` of `rec`, checked by `num` against the op's bounds (the catalogue's). */
  numParam(rec: NodeRec, name: string, json: string, v: unknown): F64 | { param: string } {
    return this.num(name, v, ...opBounds(rec.op, json));
  }

  /** A column of the input whose type is one of `types` (diversify's and cap's key, diversify's score). */
  typedColumn(rec: NodeRec, name: string, v: unknown, types: readonly ColType[], what: string): string {
    const c = this.column(rec, name, v);
    const t = rec.inputs[0].cols.get(c)!;
    if (!types.includes(t)) fail(`${name}: column '${c}' is ${t}; ${rec.op} takes ${what}`);
    return c;
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

  /**
   * The family `v` (default: the op's, from the catalogue) of one of the types the op reads; writes `family` to the JSON
   * only when it differs from the op's default, so plans of the demo schema compile as before.
   */
  family(rec: NodeRec, v: unknown): Family {
    const dflt = opDefault<string>(rec.op, "family");
    const kinds = (OPS as unknown as Record<string, { family: { types: readonly FamilyType[] } }>)[rec.op].family.types;
    const fams = this.schema.families;
    const kindText = kinds.length > 1 ? `${kinds.slice(0, -1).join(", ")} or ${kinds[kinds.length - 1]}` : kinds.join("");
    const fitting = () => {
      const names = [...fams.values()].filter((f) => kinds.includes(f.type)).map((f) => f.name);
      return names.length ? `${kindText} families in ${this.schema.source}: ${names.join(", ")}` : `${this.schema.source} declares no ${kindText} family`;
    };
    if (v === undefined) {
      const f = fams.get(dflt);
      if (!f) fail(`family: ${this.schema.source} has no family '${dflt}' (the default); give family (${fitting()})`);
      if (!kinds.includes(f.type)) fail(`family: the default family '${dflt}' is a ${f.type} family, not ${kindText}; give family (${fitting()})`);
      return f;
    }
    if (typeof v !== "string") fail(`family must be a family name, got ${JSON.stringify(v)}`);
    const f = fams.get(v) ?? fail(`family: unknown family ${JSON.stringify(v)} (${fitting()})`);
    if (!kinds.includes(f.type)) fail(`family '${v}' is a ${f.type} family; ${rec.op} reads a ${kindText} family (${fitting()})`);
    if (v !== dflt) rec.params.push(["family", v]);
    return f;
  }

  /** The input's id column must have the type of the family's ids (`id`) or members (`members`). */
  sameIds(rec: NodeRec, f: Family, which: "id" | "members"): void {
    const t = rec.inputs[0].cols.get("id");
    const want = which === "id" ? f.id : f.members;
    if (t !== want)
      fail(which === "id"
        ? `family '${f.name}' is keyed by ${want} ids but the input's id column is ${t}`
        : `family '${f.name}' holds ${want} members but the input's id column is ${t}`);
  }

  /** A non-empty list of distinct declared fields of a hash/json family, or undefined when `v` is. */
  fields(f: Family, v: unknown): string[] | undefined {
    if (v === undefined) return undefined;
    const declared = () => `${[...f.fields.keys()].join(", ")}`;
    if (!Array.isArray(v) || v.length === 0) fail(`fields must be a non-empty list of fields of '${f.name}' (${declared()})`);
    const seen = new Set<string>();
    for (const x of v) {
      if (typeof x !== "string" || !f.fields.has(x)) fail(`fields: ${JSON.stringify(x)} is not a field of '${f.name}' (${declared()})`);
      if (x === "id") fail(`fields: field 'id' of '${f.name}' would replace the id column; rename the field in the schema`);
      if (seen.has(x)) fail(`fields: '${x}' is listed twice`);
      seen.add(x);
    }
    return [...(v as string[])];
  }

  /** A column name given as an option (`scoreAs`, `sourceAs`). */
  colName(name: string, v: unknown): string {
    if (typeof v !== "string" || !ID_RE.test(v)) fail(`${name} ${JSON.stringify(v)} is not a valid column name`);
    if (v === "id") fail(`${name}: the id column is the member's id; name another column`);
    return v;
  }

  /** follow / recommendation / media: a list or zset family keyed by the input's ids. */
  expand(rec: NodeRec, o: Record<string, unknown>, countOpt: string, countJson: string): void {
    const media = rec.op === "media";
    checkKeys(rec.op, o, ["endpoint", "family", "cache", countOpt, ...(media ? ["sourceAs"] : []), "scoreAs"]);
    this.endpoint(rec, o.endpoint);
    const fam = this.family(rec, o.family);
    this.sameIds(rec, fam, "id");
    this.cache(rec, o.cache);
    this.intParam(rec, countOpt, countJson, o[countOpt] ?? opDefault(rec.op, countJson));
    const inputId = rec.inputs[0].cols.get("id")!;
    rec.cols = new Map([["id", fam.members]]);
    if (media) {
      const dfltSrc = opDefault<string>("media", "source_as");
      const src = o.sourceAs === undefined ? dfltSrc : this.colName("sourceAs", o.sourceAs);
      if (src !== dfltSrc) rec.params.push(["source_as", src]);
      rec.cols.set(src, inputId);
    }
    if (o.scoreAs !== undefined) {
      const sc = this.colName("scoreAs", o.scoreAs);
      if (fam.type !== "zset") fail(`scoreAs: family '${fam.name}' is a ${fam.type}; only a zset family has scores`);
      if (rec.cols.has(sc)) fail(`scoreAs: column '${sc}' is also the sourceAs column`);
      rec.params.push(["score_as", sc]);
      rec.cols.set(sc, "f64");
    }
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
    if (isVec(type)) fail(`expr is a vector (${type}); an expression's result is a number, str or bool (compare vectors with dot, cosine or l2)`);
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
export class Node<C extends Cols = Cols, S extends SchemaDecl = DemoSchema> {
  declare readonly __schema: S;
  declare readonly __cols: C;
  /** @internal */
  constructor(readonly plan: PlanBuilder, readonly rec: NodeRec) {}

  /**
   * Per row: the ids of the `list` or `zset` family `family` (default `follow`) keyed by the
   * row's id (`LRANGE key 0 fanout-1`, or `ZRANGE key 0 fanout-1 REV WITHSCORES`) → rows id =
   * member. fanout 1..1000 (100). On a zset, `scoreAs` names an f64 column for the score.
   */
  follow<const Fam extends SeqFam<S, C["id"]> = Dflt<OpDefault<"follow", "family">, SeqFam<S, C["id"]>>, const N extends number = OpDefault<"follow", "fanout">, const A extends string = never>(
    ...[o = {} as never]: OptArg<OpDefault<"follow", "family">, SeqFam<S, C["id"]>, { endpoint?: Endpoint; fanout?: N | ParamRef<"i64">; scoreAs?: ScoreAsOpt<S, Fam, A> } & FamilyOpt<Fam, OpDefault<"follow", "family">, SeqFam<S, C["id"]>> & CacheOpt & NodeOpts & IntCheck<N, "fanout">>
  ): Node<AsCols<Simplify<{ id: MembersOf<Fams<S>[Fam]> } & { [k in A]: "f64" }>>, S> {
    return this.plan.task("follow", [this], o, (r) => this.plan.expand(r, o as never, "fanout", "fanout"));
  }
  /** Like `follow`, reading the family `family` (default `recs`): rows id = recommended id. fanout 1..1000 (100). */
  recommendation<const Fam extends SeqFam<S, C["id"]> = Dflt<OpDefault<"recommendation", "family">, SeqFam<S, C["id"]>>, const N extends number = OpDefault<"recommendation", "fanout">, const A extends string = never>(
    ...[o = {} as never]: OptArg<OpDefault<"recommendation", "family">, SeqFam<S, C["id"]>, { endpoint?: Endpoint; fanout?: N | ParamRef<"i64">; scoreAs?: ScoreAsOpt<S, Fam, A> } & FamilyOpt<Fam, OpDefault<"recommendation", "family">, SeqFam<S, C["id"]>> & CacheOpt & NodeOpts & IntCheck<N, "fanout">>
  ): Node<AsCols<Simplify<{ id: MembersOf<Fams<S>[Fam]> } & { [k in A]: "f64" }>>, S> {
    return this.plan.task("recommendation", [this], o, (r) => this.plan.expand(r, o as never, "fanout", "fanout"));
  }
  /**
   * Like `follow`, reading the family `family` (default `media`), perAuthor 1..100 (10) per row;
   * rows id = member, and the column `sourceAs` (default `author`) = the input row's id.
   */
  media<const Fam extends SeqFam<S, C["id"]> = Dflt<OpDefault<"media", "family">, SeqFam<S, C["id"]>>, const N extends number = OpDefault<"media", "per_author">, const A extends string = never, const Src extends string = OpDefault<"media", "source_as">>(
    ...[o = {} as never]: OptArg<OpDefault<"media", "family">, SeqFam<S, C["id"]>, { endpoint?: Endpoint; perAuthor?: N | ParamRef<"i64">; sourceAs?: Src; scoreAs?: ScoreAsOpt<S, Fam, A> } & FamilyOpt<Fam, OpDefault<"media", "family">, SeqFam<S, C["id"]>> & CacheOpt & NodeOpts & IntCheck<N, "perAuthor">>
  ): Node<AsCols<Simplify<{ id: MembersOf<Fams<S>[Fam]> } & { [k in Src]: C["id"] } & { [k in A]: "f64" }>>, S> {
    return this.plan.task("media", [this], o, (r) => this.plan.expand(r, o as never, "perAuthor", "per_author"));
  }
  /**
   * Per row: the fields `fields` of the `hash` or `json` family `family` (default `item`) keyed
   * by the row's id (`HMGET`, or `MGET` for json) → the input plus one typed column per field
   * (added, or replacing a column of that name; null where missing).
   */
  features<const Fam extends FieldFam<S, C["id"]> = Dflt<OpDefault<"features", "family">, FieldFam<S, C["id"]>>, const F extends readonly [FieldName<Fams<S>[Fam]>, ...FieldName<Fams<S>[Fam]>[]] = never>(
    o: { endpoint?: Endpoint; fields: F } & FamilyOpt<Fam, OpDefault<"features", "family">, FieldFam<S, C["id"]>> & CacheOpt & NodeOpts,
  ): Node<AsCols<Simplify<Omit<C, F[number]> & FieldCols<Fams<S>[Fam], F[number]>>>, S> {
    return this.plan.task("features", [this], o, (r) => {
      checkKeys("features", o, ["endpoint", "family", "cache", "fields"]);
      this.plan.endpoint(r, o.endpoint);
      const fam = this.plan.family(r, (o as { family?: unknown }).family);
      this.plan.sameIds(r, fam, "id");
      this.plan.cache(r, o.cache);
      const fields = this.plan.fields(fam, o.fields) ?? fail(`fields must be a non-empty list of fields of '${fam.name}' (${[...fam.fields.keys()].join(", ")})`);
      for (const f of fields) r.cols.set(f, fieldCol(fam.fields.get(f)!));
      r.params.push(["fields", fields]);
    });
  }
  /** Drops rows whose id is a member of the `set` or `zset` family `family` (default `seen`)
   *  keyed by the request's user_id; on a zset, with `withinS`, only members scored (Unix ms)
   *  within the last withinS seconds of the request's time. */
  seenFilter<const Fam extends SetFamilyOf<S, C["id"]> = Dflt<OpDefault<"seen_filter", "family">, SetFamilyOf<S, C["id"]>>>(
    ...[o = {} as never]: OptArg<OpDefault<"seen_filter", "family">, SetFamilyOf<S, C["id"]>, { endpoint?: Endpoint; withinS?: number } & FamilyOpt<Fam, OpDefault<"seen_filter", "family">, SetFamilyOf<S, C["id"]>> & NodeOpts>
  ): Node<C, S> {
    return this.plan.task("seen_filter", [this], o, (r) => {
      checkKeys("seen_filter", o, ["endpoint", "family", "withinS"]);
      this.plan.endpoint(r, o.endpoint);
      const fam = this.plan.family(r, (o as { family?: unknown }).family);
      if (fam.type === "counters" && fam.by !== "user") fail(`family '${fam.name}' counts by ${fam.by}; viewer reads a counters family by user`);
      r.userKeyed = fam;
      this.plan.sameIds(r, fam, "members");
      const within = (o as { withinS?: unknown }).withinS;
      if (within !== undefined) {
        const [lo, hi] = opBounds("seen_filter", "within_s");
        if (typeof within !== "number" || !Number.isSafeInteger(within)) fail(`withinS must be an integer, got ${JSON.stringify(within)}`);
        if (within < lo || within > hi) fail(`withinS ${within} is out of bounds ${lo}..${hi}`);
        if (within > 0 && fam.type !== "zset") fail(`withinS needs a zset family (scored by time); '${fam.name}' is a ${fam.type} family`);
        if (within !== opDefault<number>("seen_filter", "within_s")) r.params.push(["within_s", within]);
      }
    });
  }
  /**
   * On a viewer node: the `k` (default 100, at most 10000) items of the index `index`
   * (schema.json `indexes`, docs/vectors.md) nearest to the viewer's vector column `key`,
   * as `id` and `similarity` (higher is nearer), with `withVectors` also the items' vectors
   * (the index field's column, typed at compile time but not in the node's static type).
   * `exclude`: a node whose ids are left out, or `{ family }`, the viewer's set or zset
   * whose members are. `ef`: the search beam (0: the server's default; never below k).
   */
  ann<const I extends IndexName<S>>(
    o: { index: I; key: keyof C & string; k?: IntArg; ef?: IntArg; withVectors?: boolean; endpoint?: Endpoint;
         exclude?: Node<{ id: IndexIdOf<S, I> }, S> | { family: SetFamilyOf<S, IndexIdOf<S, I>> } } & NodeOpts,
  ): Node<{ id: IndexIdOf<S, I>; similarity: "f64" }, S> {
    const ex = o.exclude;
    const inputs: Node<any, any>[] = ex instanceof Node ? [this, ex] : [this];
    return this.plan.task("ann", inputs, o, (r) => {
      checkKeys("ann", o, ["endpoint", "index", "key", "k", "ef", "withVectors", "exclude"]);
      if (this.rec.op !== "viewer") fail(`ann searches with a viewer's vector (one row); this is a ${this.rec.op} node`);
      this.plan.endpoint(r, o.endpoint);
      const schema = this.plan.schema;
      const idx = schema.indexes.get(o.index) ??
        fail(`index: ${schema.source} declares no index ${JSON.stringify(o.index)} (${[...schema.indexes.keys()].join(", ") || "it has none"})`);
      const vec = idx.family.fields.get(idx.field)!;
      const t = this.rec.cols.get(o.key);
      if (t !== vec) fail(`key: the viewer's column '${o.key}' is ${t ?? "missing"} but index '${o.index}' holds ${vec}`);
      r.params.push(["index", o.index], ["query", { node: this.rec, key: o.key }]);
      if (o.k !== undefined) this.plan.intParam(r, "k", "k", o.k);
      if (o.ef !== undefined) this.plan.intParam(r, "ef", "ef", o.ef);
      if (ex instanceof Node) {
        if (ex.rec.cols.get("id") !== idx.family.id) fail(`exclude: that node's id column is not of ${idx.family.id} ids`);
        r.params.push(["exclude", { node: ex.rec }]);
      } else if (ex !== undefined) {
        const fam = schema.families.get(ex.family);
        if (!fam || (fam.type !== "set" && fam.type !== "zset") || fam.members !== idx.family.id)
          fail(`exclude.family: '${ex.family}' is no set or zset family of ${idx.family.id} members in ${schema.source}`);
        r.params.push(["exclude", { family: ex.family }]);
      }
      if (o.withVectors) r.params.push(["with_vectors", true]);
      r.cols = new Map([["id", idx.family.id], ["similarity", "f64"]]);
      if (o.withVectors) r.cols.set(idx.field, vec);
    });
  }
  /** Evaluates `expr` per row into the column `outKey` (added or replaced). */
  vm<const K extends string, T extends ColType = any>(o: { outKey: K; expr: ExprArg<C, T> } & NodeOpts): Node<Simplify<Omit<C, K> & { [k in K]: T }>, S> {
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
   * Scores each row with the model `model` into the f64 column `outKey` (docs/models.md):
   * a tree model `<model>.model.json` or an ONNX model `<model>.onnx` of the plan folder.
   * Trees: `features` maps model feature names to columns (default: each feature reads the
   * column of its own name); every model feature must read an i64, f64 or bool column.
   * `output`: "default" is the objective's prediction (a probability for the logistic
   * ones), "margin" the raw sum of the trees. ONNX: `features` maps each ONNX input to its
   * ordered list of columns (numeric, or vec:D giving D values; an int64 input takes one
   * i64 column), and `fill` gives a column's missing values a number (else the row's
   * score is null).
   */
  model<const K extends string>(
    o: {
      model: string;
      outKey: K;
      features?: { readonly [feature: string]: NumColName<C> | readonly NetColName<C>[] };
      fill?: { readonly [column: string]: number };
      output?: OpValues<"model", "output">;
    } & NodeOpts,
  ): Node<Simplify<Omit<C, K> & { [k in K]: "f64" }>, S> {
    return this.plan.task("model", [this], o, (r) => {
      checkKeys("model", o, ["model", "outKey", "features", "fill", "output"]);
      if (typeof o.model !== "string" || !FILE_STEM_RE.test(o.model)) fail(`model ${JSON.stringify(o.model)} is not a model name (letters, digits, _ or -)`);
      if (typeof o.outKey !== "string" || !ID_RE.test(o.outKey)) fail(`outKey ${JSON.stringify(o.outKey)} is not a valid column name`);
      if (o.outKey === "id") fail(`outKey: model may not replace the id column`);
      const output = o.output ?? opDefault<string>("model", "output");
      const outputs = opParam("model", "output").values!;
      if (!outputs.includes(output)) fail(`output must be ${outputs.map((v) => JSON.stringify(v)).join(" or ")}, got ${JSON.stringify(o.output)}`);
      const features = new Map<string, string | readonly string[]>();
      if (o.features !== undefined) {
        if (typeof o.features !== "object" || o.features === null || Array.isArray(o.features))
          fail(`features must be an object: model feature (or ONNX input) name → column(s)`);
        for (const [f, col] of Object.entries(o.features as Record<string, unknown>)) {
          if (f === "") fail(`features: a model feature name is empty`);
          if (Array.isArray(col)) {
            if (col.length === 0) fail(`features: '${f}' lists no columns`);
            for (const c of col) {
              if (typeof c !== "string") fail(`features: '${f}' must list column names, got ${JSON.stringify(c)}`);
              checkNetColumn(r.inputs[0].cols, c, `features: '${f}'`);
            }
            features.set(f, [...col] as string[]);
          } else {
            if (typeof col !== "string") fail(`features: '${f}' must name a column, got ${JSON.stringify(col)}`);
            checkNetColumn(r.inputs[0].cols, col, `features: '${f}'`);
            features.set(f, col);
          }
        }
      }
      const fill = new Map<string, number>();
      if (o.fill !== undefined) {
        if (typeof o.fill !== "object" || o.fill === null || Array.isArray(o.fill)) fail(`fill must be an object: column → number`);
        for (const [c, v] of Object.entries(o.fill as Record<string, unknown>)) {
          if (typeof v !== "number" || !Number.isFinite(v)) fail(`fill: '${c}' must be a finite number, got ${JSON.stringify(v)}`);
          checkNetColumn(r.inputs[0].cols, c, `fill: '${c}'`);
          fill.set(c, v);
        }
      }
      r.params.push(["model", o.model], ["out_key", o.outKey]);
      if (features.size > 0) r.params.push(["features", { columnMap: features }]);
      if (fill.size > 0) r.params.push(["fill", { numberMap: fill }]);
      r.params.push(["output", output]);
      r.model = { name: o.model, features };
      r.cols.set(o.outKey, "f64");
    });
  }
  /** Keeps the rows where the predicate is true. */
  filter(o: { pred: PredArg<C> } & NodeOpts): Node<C, S> {
    return this.plan.task("filter", [this], o, (r) => {
      checkKeys("filter", o, ["pred"]);
      r.params.push(["pred", { pred: this.plan.pred(r, o.pred) }]);
    });
  }
  /** Stable sort by one column; nulls last in either order. */
  sort(o: { key: KeyColName<C>; order: OpValues<"sort", "order"> } & NodeOpts): Node<C, S> {
    return this.plan.task("sort", [this], o, (r) => {
      checkKeys("sort", o, ["key", "order"]);
      const key = this.plan.typedColumn(r, "key", o.key, opParam("sort", "key").reads!, "an i64, f64, str or bool column");
      const orders = opParam("sort", "order").values!;
      if (!orders.includes(o.order)) fail(`order must be ${orders.map((v) => JSON.stringify(v)).join(" or ")}, got ${JSON.stringify(o.order)}`);
      r.params.push(["key", key], ["order", o.order]);
    });
  }
  /** The first `count` rows; count 1..10000. */
  take<const N extends number>(o: { count: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "count">): Node<C, S> {
    return this.plan.task("take", [this], o, (r) => {
      checkKeys("take", o, ["count"]);
      this.plan.intParam(r, "count", "count", o.count);
    });
  }
  /**
   * Discounts repeated key values, then sorts: walking the rows in their order, the row that
   * is the k-th (from 0) of its `key` value gets `score · (floor + (1 − floor) · decay^k)` in
   * `outKey` (d: the `score` column, replaced); the rows are then sorted by it, descending,
   * stably, nulls last. A null key is never discounted. `key` an i64 or str column, `score` an
   * f64 column; decay and floor 0..1 (d 0.5 and 0.25). A negative score rises toward 0. Sort by
   * score first, so that each key's best row is the one left whole.
   */
  diversify<const K extends string = never>(
    o: { key: ColOfType<C, "i64" | "str">; score: ColOfType<C, "f64">; outKey?: K; decay?: F64Arg; floor?: F64Arg } & NodeOpts,
  ): Node<Simplify<Omit<C, K> & { [k in K]: "f64" }>, S> {
    return this.plan.task("diversify", [this], o, (r) => {
      checkKeys("diversify", o, ["key", "score", "outKey", "decay", "floor"]);
      const key = this.plan.typedColumn(r, "key", o.key, ["i64", "str"], "an i64 or str key column");
      const score = this.plan.typedColumn(r, "score", o.score, ["f64"], "an f64 score column");
      r.params.push(["key", key], ["score", score]);
      let out = score;
      if (o.outKey !== undefined) {
        if (typeof o.outKey !== "string" || !ID_RE.test(o.outKey)) fail(`outKey ${JSON.stringify(o.outKey)} is not a valid column name`);
        if (o.outKey === "id") fail(`outKey: diversify may not replace the id column`);
        out = o.outKey;
        r.params.push(["out_key", out]);
      }
      r.params.push(
        ["decay", this.plan.numParam(r, "decay", "decay", o.decay ?? opDefault("diversify", "decay"))],
        ["floor", this.plan.numParam(r, "floor", "floor", o.floor ?? opDefault("diversify", "floor"))],
      );
      r.cols.set(out, "f64");
    });
  }
  /**
   * Caps each key value per window: walking the rows in their order, keeps a row when fewer
   * than `max` of the last `window − 1` kept rows share its `key` value (a null key is never
   * capped); a row not kept is dropped, or with `defer` appended after all kept rows in its
   * order. `key` an i64 or str column; max and window 1..10000; defer d false.
   */
  cap<const M extends number, const W extends number>(
    o: { key: ColOfType<C, "i64" | "str">; max: M | ParamRef<"i64">; window: W | ParamRef<"i64">; defer?: boolean } & NodeOpts & IntCheck<M, "max"> & IntCheck<W, "window">,
  ): Node<C, S> {
    return this.plan.task("cap", [this], o, (r) => {
      checkKeys("cap", o, ["key", "max", "window", "defer"]);
      const key = this.plan.typedColumn(r, "key", o.key, ["i64", "str"], "an i64 or str key column");
      const defer: unknown = o.defer;
      if (defer instanceof ParamRef) fail(`defer takes a literal boolean, not a request parameter ('${defer.paramName}')`);
      if (defer !== undefined && typeof defer !== "boolean") fail(`defer must be a boolean, got ${JSON.stringify(defer)}`);
      r.params.push(["key", key]);
      this.plan.intParam(r, "max", "max", o.max);
      this.plan.intParam(r, "window", "window", o.window);
      r.params.push(["defer", defer ?? opDefault<boolean>("cap", "defer")]);
    });
  }
  /** Rows of this node, then of `other` (or of each of `others`); columns are the union. */
  concat<D extends Cols>(other: Node<D, any>, o?: NodeOpts): Node<Union2<C, D>, S>;
  concat<const Ns extends readonly [Node<any, any>, ...Node<any, any>[]]>(others: Ns, o?: NodeOpts): Node<UnionAll<C | ColsOf<Ns[number]>>, S>;
  concat(others: Node<any, any> | readonly Node<any, any>[], o?: NodeOpts): Node<any, any> {
    const list = Array.isArray(others) ? [this, ...others] : [this, others as Node<any, any>];
    return concatNodes(this.plan, list, o);
  }
  /** Keeps the first row of each distinct value of `key` (default id). */
  dedupe(o: { key?: KeyColName<C> } & NodeOpts = {}): Node<C, S> {
    return this.plan.task("dedupe", [this], o, (r) => {
      checkKeys("dedupe", o, ["key"]);
      r.params.push(["key", this.plan.typedColumn(r, "key", o.key ?? "id", opParam("dedupe", "key").reads!, "an i64, f64, str or bool column")]);
    });
  }
  /** Waits `durationMs` (0..60000) on a timer, then passes the rows through, or fails. Test-only: rankd loads it only with --enable-test-ops. */
  sleep<const N extends number>(o: { durationMs: N | ParamRef<"i64">; failAfterSleep?: BoolArg } & NodeOpts & IntCheck<N, "durationMs">): Node<C, S> {
    return sleepNode(this.plan, [this], o);
  }
  /** Spins a CPU thread for `durationMs` (0..60000), then passes the rows through. Test-only: rankd loads it only with --enable-test-ops. */
  busyCpu<const N extends number>(o: { durationMs: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "durationMs">): Node<C, S> {
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

// The methods of the ops without a hand-written one above: declared by lib/ops.gen.ts from the
// catalogue, and installed on Node's prototype below.
export interface Node<C extends Cols = Cols, S extends SchemaDecl = DemoSchema> extends GeneratedMethods<C, S> {}

/** snake_case → camelCase: the DSL's spelling of a catalogue param (out_key → outKey). */
function camelName(json: string): string {
  return json.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/**
 * A node of an op with a generated method: each option is checked as the catalogue
 * describes its param (type, bounds, allowed values, whether a request parameter may stand
 * for it, the types of a column it reads) and written under its JSON name; options left out
 * are not written (the server applies their defaults). The columns it adds are the
 * catalogue's.
 */
function catalogueNode(node: Node<any, any>, op: string, o: Record<string, unknown>): Node<any, any> {
  const entry = (OPS as unknown as Record<string, CatalogueOp>)[op];
  const b = node.plan;
  return b.task(op, [node], o as NodeOpts, (r) => {
    const params = Object.entries(entry.params);
    if (typeof o !== "object" || o === null) fail(`options must be an object`);
    checkKeys(op, o, params.map(([json]) => camelName(json)));
    for (const [json, p] of params) {
      const name = camelName(json);
      const v = o[name];
      if (v === undefined) {
        if (p.required) fail(`${name} is required`);
        continue;
      }
      if (v instanceof ParamRef && !p.ref) fail(`${name} takes a literal, not a request parameter ('${v.paramName}')`);
      switch (p.type) {
        case "column":
          if (p.writes) {
            if (typeof v !== "string" || !ID_RE.test(v)) fail(`${name} ${JSON.stringify(v)} is not a valid column name`);
            if (v === "id") fail(`${name}: ${op} may not replace the id column`);
            r.params.push([json, v]);
          } else {
            const reads = p.reads ?? [];
            r.params.push([json, reads.length ? b.typedColumn(r, name, v, reads, `an ${reads.join(" or ")} column`) : b.column(r, name, v)]);
          }
          break;
        case "i64":
          b.intParam(r, name, json, v);
          break;
        case "f64":
          r.params.push([json, b.numParam(r, name, json, v)]);
          break;
        case "bool":
          r.params.push([json, b.bool(name, v)]);
          break;
        case "str": {
          if (v instanceof ParamRef) {
            const d = b.decls.get(v.paramName) ?? fail(`${name}: parameter '${v.paramName}' is not declared`);
            if (d.type !== "str") fail(`${name}: parameter '${v.paramName}' is ${d.type}; ${name} needs a str`);
            r.params.push([json, { param: v.paramName }]);
            break;
          }
          if (typeof v !== "string") fail(`${name} must be a string, got ${JSON.stringify(v)}`);
          if (p.values && !p.values.includes(v)) fail(`${name} must be one of ${p.values.map((x) => JSON.stringify(x)).join(", ")}, got ${JSON.stringify(v)}`);
          r.params.push([json, v]);
          break;
        }
        default:
          fail(`param '${json}' of op '${op}' is a ${p.type}, which a generated method cannot take`);
      }
    }
    for (const a of entry.output.adds) {
      const col = a.param !== undefined ? r.params.find(([k]) => k === a.param)?.[1] : a.name;
      if (typeof col === "string" && col !== "") r.cols.set(col, a.type as ColType);
    }
  });
}

for (const [op, method] of Object.entries(GENERATED_METHODS) as [string, string][]) {
  Object.defineProperty(Node.prototype, method, {
    value(this: Node<any, any>, o: Record<string, unknown>) {
      return catalogueNode(this, op, o);
    },
    writable: true,
    configurable: true,
  });
}

/** The plan's output: a node and the columns of the response. */
export class Output<C extends Cols = Cols> {
  declare readonly __cols: C;
  constructor(readonly node: Node<any, any>, readonly columns: readonly string[]) {}
}

function concatNodes(plan: PlanBuilder, list: readonly Node<any, any>[], o: NodeOpts | undefined): Node<any, any> {
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

function sleepNode(plan: PlanBuilder, inputs: Node<any, any>[], o: { durationMs: unknown; failAfterSleep?: unknown } & NodeOpts): Node<any, any> {
  return plan.task("sleep", inputs, o, (r) => {
    checkKeys("sleep", o, ["durationMs", "failAfterSleep"]);
    plan.intParam(r, "durationMs", "duration_ms", o?.durationMs);
    r.params.push(["fail_after_sleep", plan.bool("failAfterSleep", o.failAfterSleep ?? false)]);
  });
}

function busyNode(plan: PlanBuilder, inputs: Node<any, any>[], o: { durationMs: unknown } & NodeOpts): Node<any, any> {
  return plan.task("busy_cpu", inputs, o, (r) => {
    checkKeys("busy_cpu", o, ["durationMs"]);
    plan.intParam(r, "durationMs", "duration_ms", o?.durationMs);
  });
}

/** What `build` receives: the source tasks (no input) and n-ary concat. */
export class Ctx<S extends SchemaDecl = DemoSchema> {
  /** @internal */
  constructor(private readonly plan: PlanBuilder) {}

  /**
   * The request's viewer: the `hash` or `json` family `family` (default `user`) keyed by the
   * request's user_id → one row, id = user_id plus the family's fields (all declared fields, or
   * `fields`, in that order); zero rows for a missing key.
   */
  viewer<const Fam extends FieldFam<S> = Dflt<OpDefault<"viewer", "family">, FieldFam<S>>, const F extends readonly [FieldName<Fams<S>[Fam]>, ...FieldName<Fams<S>[Fam]>[]] = never>(
    ...[o = {} as never]: OptArg<OpDefault<"viewer", "family">, FieldFam<S>, { endpoint?: Endpoint; fields?: F } & FamilyOpt<Fam, OpDefault<"viewer", "family">, FieldFam<S>> & CacheOpt & NodeOpts>
  ): Node<AsCols<Simplify<{ id: IdOf<Fams<S>[Fam]> } & FieldCols<Fams<S>[Fam], [F] extends [never] ? FieldName<Fams<S>[Fam]> : F[number]>>>, S> {
    return this.plan.task("viewer", [], o, (r) => {
      checkKeys("viewer", o, ["endpoint", "family", "cache", "fields"]);
      this.plan.endpoint(r, o.endpoint);
      const fam = this.plan.family(r, (o as { family?: unknown }).family);
      if (fam.type === "counters" && fam.by !== "user") fail(`family '${fam.name}' counts by ${fam.by}; viewer reads a counters family by user`);
      r.userKeyed = fam;
      this.plan.cache(r, o.cache);
      const fields = this.plan.fields(fam, o.fields);
      if (fields) r.params.push(["fields", fields]);
      else if (fam.fields.has("id")) fail(`family '${fam.name}' has a field 'id', which would replace the id column; give fields without it`);
      r.cols = new Map([["id", fam.id]]);
      for (const f of fields ?? fam.fields.keys()) r.cols.set(f, fieldCol(fam.fields.get(f)!));
    });
  }
  /** Rows id = 1..count and score = id (f64); count 0..100000 (10). No IO. Test-only: rankd loads it only with --enable-test-ops. */
  fixedSource<const N extends number = OpDefault<"fixed_source", "count">>(o: { count?: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "count"> = {} as never): Node<{ id: "i64"; score: "f64" }, S> {
    return this.plan.task("fixed_source", [], o, (r) => {
      checkKeys("fixed_source", o, ["count"]);
      this.plan.intParam(r, "count", "count", o.count ?? opDefault("fixed_source", "count"));
      r.cols = new Map([["id", "i64"], ["score", "f64"]]);
    });
  }
  /** A source that waits `durationMs` (0..60000) then yields zero rows, or fails. Test-only: rankd loads it only with --enable-test-ops. */
  sleep<const N extends number>(o: { durationMs: N | ParamRef<"i64">; failAfterSleep?: BoolArg } & NodeOpts & IntCheck<N, "durationMs">): Node<IdCol, S> {
    return sleepNode(this.plan, [], o);
  }
  /** A source that spins a CPU thread for `durationMs` (0..60000), then yields zero rows. Test-only: rankd loads it only with --enable-test-ops. */
  busyCpu<const N extends number>(o: { durationMs: N | ParamRef<"i64"> } & NodeOpts & IntCheck<N, "durationMs">): Node<IdCol, S> {
    return busyNode(this.plan, [], o);
  }
  /** Rows of each input in order; columns are the union, missing cells null. */
  concat<const Ns extends readonly [Node<any, any>, Node<any, any>, ...Node<any, any>[]]>(inputs: Ns, o?: NodeOpts): Node<UnionAll<ColsOf<Ns[number]>>, S> {
    if (!Array.isArray(inputs)) fail(`concat() at ${callSite()}: inputs must be an array of nodes`);
    return concatNodes(this.plan, inputs, o);
  }
}

// ---- definePlan and the compiler -------------------------------------------------------

/**
 * Served-item logging (docs/plan.md, "log"): the server records a sample of the plan's
 * requests, each with its served items (and, with `candidates`, the unserved ones), to a
 * sink, so that models can be trained on what was shown (ops/train-from-log).
 */
export interface LogSpec {
  /** The share of requests recorded, 0..1 (d 0: none). */
  sample?: number;
  /** The sink the records go to: a name the server is started with (letters, digits, `_ . -`; 1..64). */
  sink: string;
  /** The columns recorded per item, each a column of the output node (d the plan's output columns). */
  columns?: readonly string[];
  /** Also record the unserved candidates: the first `top` (1..10000) rows of the node `node` (a node id). */
  candidates?: { node: string; top: number };
}

/** The i64 params of op O in the catalogue. */
type I64ParamOf<O extends OpName> = {
  [P in keyof Ops[O]["params"] & string]: Ops[O]["params"][P] extends { type: "i64" } ? P : never;
}[keyof Ops[O]["params"] & string];
/**
 * The integer task parameters a `quality` block may scale, in the DSL's spelling: every i64
 * param of the catalogue (`fanout` of follow and recommendation, `perAuthor` of media,
 * `count` of take and fixedSource, `max` and `window` of cap, `durationMs` of sleep and busyCpu).
 */
export type ScaledParam = Camel<{ [O in OpName]: I64ParamOf<O> }[OpName]>;

/**
 * Work that bends under load (docs/plan.md, "quality"): per shard, the server keeps a
 * quality factor q in [min, 1] that falls while the plan's p95 latency is above
 * `targetP95Ms` (or the shard refuses requests for its admission limit) and climbs back
 * when it is well under; the integer params listed in `scale` are multiplied by q (rounded,
 * clamped to the op's bounds, at least 1). A `{param}` reference is scaled only when the
 * request did not give the param. Answers carry `"quality": q`.
 */
export interface QualitySpec {
  /** The plan's p95 latency target in milliseconds, a number 1..60000. */
  targetP95Ms: number;
  /** The lowest quality factor, a number 0.01..1 (d 0.3). */
  min?: number;
  /** The params scaled by q: non-empty, each a node id of the plan and an integer param of
   *  that node's op (`fanout`, `perAuthor`, …), no pair twice. */
  scale: readonly { node: string; param: ScaledParam }[];
}

export interface PlanSpec<Ps extends ParamDecls, S extends SchemaDecl = DemoSchema> {
  /** The plan's name: the file must be `<name>.plan.ts`. */
  name: string;
  description?: string;
  params?: Ps;
  /** Builds the DAG and returns its output node (or `node.output([...columns])`). */
  build: (ctx: Ctx<S>, P: ParamRefs<Ps>) => Node<any, any> | Output<any>;
  /** Served-item logging; without it the plan logs nothing (and its JSON has no `log`). */
  log?: LogSpec;
  /** Work that bends under load; without it the plan always does all its work (and its JSON has no `quality`). */
  quality?: QualitySpec;
  /** What each user was shown: every answer's items go into the user's zset of `family`
   *  (docs/plan.md, "served_state"); without it nothing is written. */
  servedState?: ServedStateSpec;
}

/** The plan's served_state: a zset family keyed by the request's user_id whose members are
 *  the answer's ids; the newest `max` (1..100000) kept, the key living `ttlS` seconds
 *  (1..315360000) after each write; on `endpoint` (default redis_default). */
export interface ServedStateSpec {
  family: string;
  max: number;
  ttlS: number;
  endpoint?: string;
}

export interface CompileOptions {
  /** The plan folder the server loads: where `model` nodes' model files must be. Default: plans/. */
  planDir?: string;
}

export interface PlanDef<Ps extends ParamDecls = ParamDecls> {
  readonly name: string;
  readonly kind: "rankd-plan";
  /** The plan's declared request parameters (`params` of definePlan; {} when none): what an
   *  experiment's variant may set (lib/experiments.ts). */
  readonly params: Ps;
  /** The schema the plan is typed and checked with (its folder's schema.json, or the demo schema). */
  readonly schema: SchemaDecl;
  /** The plan JSON object (docs/plan.md); throws PlanError on misuse. */
  compile(opts?: CompileOptions): Json;
  /** The plan file text (planText). */
  text(opts?: CompileOptions): string;
  /** The type of the request's user_id the plan takes (its viewer family's id type; i64 without
   *  a viewer), as the server derives it; compiles the plan (throws PlanError on misuse). */
  userIdType(opts?: CompileOptions): IdType;
}

/**
 * The DSL bound to a schema: `withSchema(SCHEMA).definePlan({...})` types families and fields
 * by SCHEMA (an `as const` value, as in the `schema.gen.ts` that lib/gen-schema.mjs writes
 * for a plans folder) and checks them when the plan compiles. `source` names the schema in
 * messages. The schema is checked (docs/data.md) when a plan compiles.
 */
export function withSchema<const S extends SchemaDecl>(decl: S, source = "schema.json") {
  let checked: Schema | undefined;
  const schema = () => (checked ??= checkSchema(decl, source));
  return {
    schema: decl,
    definePlan<const Ps extends ParamDecls = {}>(spec: PlanSpec<Ps, S>): PlanDef<Ps> {
      const site = callSite();
      const def: PlanDef<Ps> = {
        name: spec?.name,
        kind: "rankd-plan",
        params: (spec?.params ?? {}) as Ps,
        schema: decl,
        text: (opts?: CompileOptions) => stringify(def.compile(opts)),
        compile: (opts?: CompileOptions) => compiled(opts).plan,
        userIdType: (opts?: CompileOptions) => compiled(opts).userId,
      };
      const compiled = (opts?: CompileOptions) => {
        try {
          return compile(spec as unknown as PlanSpec<ParamDecls, SchemaDecl>, site, opts?.planDir ?? ROOT, schema());
        } catch (e) {
          if (e instanceof PlanError) throw new PlanError(`plan '${spec?.name}': ${e.message}`);
          throw e;
        }
      };
      return def;
    },
  };
}

const demo = withSchema(DEMO_SCHEMA, "the demo schema");
/**
 * definePlan over the demo schema (docs/data.md). A plans folder's plans import the
 * definePlan of their folder's `schema.gen.ts` instead, which is bound to its schema.json.
 */
export const definePlan: <const Ps extends ParamDecls = {}>(spec: PlanSpec<Ps, DemoSchema>) => PlanDef<Ps> = demo.definePlan;

/** The plan file text: deterministic 2-space JSON with a trailing newline. */
export function planText(def: PlanDef, opts?: CompileOptions): string {
  return def.text(opts);
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

function compile(spec: PlanSpec<ParamDecls, SchemaDecl>, site: string, planDir: string, schema: Schema): { plan: Json; userId: IdType } {
  if (typeof spec !== "object" || spec === null) fail(`definePlan at ${site}: expects {name, params, build}`);
  if (typeof spec.name !== "string" || !FILE_STEM_RE.test(spec.name)) fail(`definePlan at ${site}: name must be letters, digits, _ or -`);
  if (spec.description !== undefined && typeof spec.description !== "string") fail(`description must be a string`);
  if (typeof spec.build !== "function") fail(`definePlan at ${site}: build must be a function`);
  for (const k of Object.keys(spec)) if (!["name", "description", "params", "build", "log", "quality", "servedState"].includes(k)) fail(`definePlan at ${site}: unknown field '${k}'`);

  const b = new PlanBuilder(schema);
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

  // The request's user_id keys the viewer's family and seen_filter's set: one id type for all
  // (the viewer's, or i64 when the plan has no viewer).
  const keyed = b.nodes.filter((n) => n.userKeyed);
  const first = keyed.find((n) => n.op === "viewer");
  const userId = first?.userKeyed!.id ?? "i64";
  for (const n of keyed) {
    const f = n.userKeyed!;
    if (f.id !== userId)
      fail(`${n.call}: family '${f.name}' is keyed by ${f.id} ids, but the request's user_id is ${userId} (${first ? `the viewer family '${first.userKeyed!.name}' is keyed by ${userId} ids` : "the plan has no viewer"})`);
  }

  // Model nodes: the model file must be in the plan folder and its features must read numeric columns.
  for (const n of b.nodes) {
    if (!n.model) continue;
    try {
      checkModelInputs(n.model.name, readModelKind(planDir, n.model.name), n.model.features, n.inputs[0].cols);
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

  const nodeId = (node: unknown) => ids.get(b.fromNode(node))!;
  const nodes: Json[] = b.nodes.map((n) => {
    const p: Record<string, Json> = {};
    for (const [k, v] of n.params) {
      if (typeof v === "object" && v !== null && "expr" in v) p[k] = intern(exprJson(v.expr, nodeId), exprTable, exprIds, "e");
      else if (typeof v === "object" && v !== null && "pred" in v) p[k] = intern(predJson(v.pred, nodeId), predTable, predIds, "p");
      else if (typeof v === "object" && v !== null && "columnMap" in v) p[k] = Object.fromEntries(v.columnMap);
      else if (typeof v === "object" && v !== null && "node" in v)
        p[k] = v.key !== undefined ? { from: ids.get(v.node)!, key: v.key } : ids.get(v.node)!;
      else if (typeof v === "object" && v !== null && "numberMap" in v) p[k] = Object.fromEntries(v.numberMap);
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
  if (spec.log !== undefined) {
    try {
      plan.log = logJson(spec.log, out.node.rec, ids.get(out.node.rec)!, b.nodes.map((n) => ids.get(n)!));
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`definePlan at ${site}: ${e.message}`);
      throw e;
    }
  }
  if (spec.quality !== undefined) {
    try {
      plan.quality = qualityJson(spec.quality, new Map(b.nodes.map((n) => [ids.get(n)!, n])));
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`definePlan at ${site}: ${e.message}`);
      throw e;
    }
  }
  if (spec.servedState !== undefined) {
    try {
      plan.served_state = servedStateJson(spec.servedState, schema, userId, out.node.rec, out.columns);
    } catch (e) {
      if (e instanceof PlanError) throw new PlanError(`definePlan at ${site}: ${e.message}`);
      throw e;
    }
  }
  return { plan, userId };
}

/** The top-level `served_state` object, checked as the server checks it (docs/plan.md). */
function servedStateJson(ss: ServedStateSpec, schema: Schema, userId: IdType, output: NodeRec, columns: readonly string[]): Json {
  if (typeof ss !== "object" || ss === null || Array.isArray(ss)) fail(`servedState must be an object {family, max, ttlS, endpoint?}, got ${JSON.stringify(ss)}`);
  onlyKeys("servedState", ss, ["family", "max", "ttlS", "endpoint"], { ttl_s: "ttlS" });
  const f = typeof ss.family === "string" ? schema.families.get(ss.family) : undefined;
  if (!f) fail(`servedState.family: ${JSON.stringify(ss.family)} is not a family of ${schema.source}`);
  if (f.type !== "zset") fail(`servedState.family: family '${f.name}' is a ${f.type} family; served state is kept in a zset`);
  if (f.id !== userId) fail(`servedState.family: family '${f.name}' is keyed by ${f.id} ids but the request's user_id is ${userId}`);
  const id = output.cols.get("id");
  if (f.members !== id) fail(`servedState.family: family '${f.name}' holds ${f.members} members but the output's ids are ${id ?? "missing"}`);
  if (columns.length > 0 && !columns.includes("id")) fail(`servedState: the output's columns must list id (later pages read it)`);
  const int = (name: string, v: unknown, hi: number) => {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > hi) fail(`servedState.${name} must be an integer 1..${hi}, got ${JSON.stringify(v)}`);
    return v;
  };
  const j: Record<string, Json> = { family: f.name, max: int("max", ss.max, 100000), ttl_s: int("ttlS", ss.ttlS, 315360000) };
  if (ss.endpoint !== undefined) {
    if (typeof ss.endpoint !== "string" || !/^[A-Za-z0-9_.-]+$/.test(ss.endpoint)) fail(`servedState.endpoint must be an endpoint name, got ${JSON.stringify(ss.endpoint)}`);
    j.endpoint = ss.endpoint;
  }
  return j;
}

/** Sink names as the server accepts them: a malformed name fails the build here, not the load there. */
const SINK_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const LOG_KEYS = ["sample", "sink", "columns", "candidates"];
const CANDIDATE_KEYS = ["node", "top"];

/** `dslNames`: JSON names the server uses → the DSL's, to point a misspelling at the DSL's name. */
function onlyKeys(where: string, o: object, allowed: readonly string[], dslNames: Readonly<Record<string, string>> = {}): void {
  for (const k of Object.keys(o)) {
    if (allowed.includes(k)) continue;
    const hint = Object.hasOwn(dslNames, k) ? `; the DSL writes it ${dslNames[k]}` : "";
    fail(`${where}: unknown field '${k}' (allowed: ${allowed.join(", ")}${hint})`);
  }
}

/**
 * The top-level `log` object (docs/plan.md, "log: served-item logging"), checked as far as
 * the plan shows: the columns against the output node's, the candidates node against the
 * plan's node ids. Whether the server has the sink is known only where it runs (records
 * for a sink it lacks count as dropped, the load does not fail), so only its name is checked.
 * `sample` is always written (0.0 when not given) so the JSON says whether logging is on;
 * `columns` and `candidates` only when given (the server fills the columns' default).
 */
function logJson(log: LogSpec, output: NodeRec, outputId: string, nodeIds: readonly string[]): Json {
  if (typeof log !== "object" || log === null || Array.isArray(log)) fail(`log must be an object {sample?, sink, columns?, candidates?}, got ${JSON.stringify(log)}`);
  onlyKeys("log", log, LOG_KEYS);
  const sample: unknown = log.sample === undefined ? 0 : log.sample;
  if (typeof sample !== "number" || !Number.isFinite(sample)) fail(`log.sample must be a number 0..1 (the share of requests logged), got ${JSON.stringify(log.sample)}`);
  if (sample < 0 || sample > 1) fail(`log.sample ${sample} is out of bounds 0..1 (the share of requests logged)`);
  const sink: unknown = log.sink;
  if (sink === undefined) fail(`log.sink is required: the name of a sink the server is started with`);
  if (typeof sink !== "string" || !SINK_RE.test(sink))
    fail(`log.sink must be a sink name (1..64 letters, digits, _, . or -), got ${JSON.stringify(sink)}`);
  const j: Record<string, Json> = { sample: new F64(sample), sink };
  if (log.columns !== undefined) j.columns = logColumns(log.columns, output, outputId);
  if (log.candidates !== undefined) j.candidates = logCandidates(log.candidates, nodeIds);
  return j;
}

/** Logged columns: a non-empty list of distinct columns of the output node (not only of its
 *  `output.columns`: a log may keep what the response leaves out, e.g. a feature). */
function logColumns(v: unknown, output: NodeRec, outputId: string): string[] {
  const have = () => `columns of the output node '${outputId}': ${[...output.cols.keys()].join(", ")}`;
  if (!Array.isArray(v) || v.length === 0) fail(`log.columns must be a non-empty list of columns (${have()})`);
  const seen = new Set<string>();
  for (const c of v) {
    if (typeof c !== "string" || c === "") fail(`log.columns: ${JSON.stringify(c)} is not a column name (${have()})`);
    if (!output.cols.has(c)) fail(`log.columns: unknown column '${c}' (${have()})`);
    if (seen.has(c)) fail(`log.columns: '${c}' is listed twice`);
    seen.add(c);
  }
  return [...seen];
}

function logCandidates(v: unknown, nodeIds: readonly string[]): Json {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(`log.candidates must be an object {node, top}, got ${JSON.stringify(v)}`);
  onlyKeys("log.candidates", v, CANDIDATE_KEYS);
  const { node, top } = v as { node?: unknown; top?: unknown };
  if (typeof node !== "string") fail(`log.candidates.node must be a node id, got ${JSON.stringify(node)} (nodes: ${nodeIds.join(", ")})`);
  if (!nodeIds.includes(node)) fail(`log.candidates.node: unknown node '${node}' (nodes: ${nodeIds.join(", ")})`);
  if (typeof top !== "number" || !Number.isInteger(top)) fail(`log.candidates.top must be an integer 1..10000, got ${JSON.stringify(top)}`);
  if (top < 1 || top > 10000) fail(`log.candidates.top ${top} is out of bounds 1..10000`);
  return { node, top };
}

const QUALITY_KEYS = ["targetP95Ms", "min", "scale"];
const SCALE_KEYS = ["node", "param"];

/**
 * The top-level `quality` object (docs/plan.md, "quality: work that bends under load"),
 * checked as far as the plan shows: the bounds of the target and of min, and each scaled
 * param against the plan's nodes (an existing node id, an integer param of its op, in the
 * DSL's spelling; no pair twice). Written as `target_p95_ms`, `min` (always, 0.3 when not
 * given; both as doubles) and `scale` with the params' JSON names.
 */
function qualityJson(q: QualitySpec, nodes: ReadonlyMap<string, NodeRec>): Json {
  if (typeof q !== "object" || q === null || Array.isArray(q))
    fail(`quality must be an object {targetP95Ms, min?, scale}, got ${JSON.stringify(q)}`);
  onlyKeys("quality", q, QUALITY_KEYS, { target_p95_ms: "targetP95Ms" });
  const target: unknown = q.targetP95Ms;
  if (target === undefined) fail(`quality.targetP95Ms is required: the plan's p95 latency target in milliseconds, 1..60000`);
  if (typeof target !== "number" || !Number.isFinite(target))
    fail(`quality.targetP95Ms must be a number 1..60000 (milliseconds), got ${JSON.stringify(target)}`);
  if (target < 1 || target > 60000) fail(`quality.targetP95Ms ${target} is out of bounds 1..60000 (milliseconds)`);
  const min: unknown = q.min === undefined ? 0.3 : q.min;
  if (typeof min !== "number" || !Number.isFinite(min))
    fail(`quality.min must be a number 0.01..1 (the lowest quality factor), got ${JSON.stringify(q.min)}`);
  if (min < 0.01 || min > 1) fail(`quality.min ${min} is out of bounds 0.01..1 (the lowest quality factor)`);
  const ids = () => `nodes: ${[...nodes.keys()].join(", ")}`;
  const scale: unknown = q.scale;
  if (!Array.isArray(scale) || scale.length === 0) fail(`quality.scale must be a non-empty list of {node, param}, got ${JSON.stringify(scale)} (${ids()})`);
  const out: Json[] = [];
  const seen = new Set<string>();
  scale.forEach((x: unknown, i) => {
    const where = `quality.scale[${i}]`;
    if (typeof x !== "object" || x === null || Array.isArray(x)) fail(`${where} must be an object {node, param}, got ${JSON.stringify(x)}`);
    onlyKeys(where, x, SCALE_KEYS);
    const { node, param } = x as { node?: unknown; param?: unknown };
    if (typeof node !== "string") fail(`${where}.node must be a node id, got ${JSON.stringify(node)} (${ids()})`);
    const rec = nodes.get(node) ?? fail(`${where}.node: unknown node '${node}' (${ids()})`);
    const have = () => (rec.ints.size ? `integer params of ${rec.op}: ${[...rec.ints.keys()].join(", ")}` : `${rec.op} has no integer param`);
    if (typeof param !== "string") fail(`${where}.param must be an integer param of node '${node}', got ${JSON.stringify(param)} (${have()})`);
    const json = rec.ints.get(param);
    if (json === undefined) {
      const dsl = [...rec.ints].find(([, j]) => j === param)?.[0];
      if (dsl !== undefined) fail(`${where}.param: '${param}' is the JSON name; the DSL writes it ${dsl}`);
      fail(`${where}.param: node '${node}' has no integer param '${param}' (${have()})`);
    }
    if (seen.has(`${node}\0${json}`)) fail(`${where}: node '${node}' param '${param}' is listed twice`);
    seen.add(`${node}\0${json}`);
    out.push({ node, param: json });
  });
  return { target_p95_ms: new F64(target), min: new F64(min), scale: out };
}
