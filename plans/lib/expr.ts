// Expressions and predicates of a plan (expr_table / pred_table, docs/plan.md): a typed
// fluent API over a small tree, the server's load-time typing rules run at compile time, and
// the JSON form.
// Type parameters are phantom: Expr<"f64"> is an expression whose value type is f64.

import { F64, type Json } from "./json.js";

/** A vector column (docs/vectors.md): float32 rows of dimension D, read only by dot, cosine and l2. */
export type VecType = `vec:${number}`;
export type ColType = "i64" | "f64" | "str" | "bool" | VecType;
/** The type of an expression: a column type, or "null" for a constant null. */
export type VT = ColType | "null";
export type Num = "i64" | "f64";
export type CmpOp = "==" | "!=" | "<" | "<=" | ">" | ">=";
export type ArithOp = "+" | "-" | "*" | "/";
export type VecOp = "dot" | "cosine" | "l2";
export type FnOp = "min" | "max" | "neg" | "abs" | "log" | "log1p" | "exp" | "sqrt" | "pow" | "coalesce" | VecOp;
export type ExprOp = ArithOp | FnOp | "if";

export type Scalar = number | string | boolean | null;
export type ConstNode = { t: "const"; v: Scalar; f64?: boolean };
export type ENode =
  | ConstNode
  | { t: "key"; name: string }
  | { t: "param"; name: string }
  /** A column of a one-row ancestor node (a viewer): a Node of the plan, or its explicit id. */
  | { t: "from"; node: unknown; key: string }
  | { t: "op"; op: ArithOp | FnOp; args: ENode[] }
  | { t: "if"; pred: PNode; then: ENode; else: ENode };
export type PNode =
  | { t: "cmp"; cmp: CmpOp; lhs: ENode; rhs: ENode }
  | { t: "and" | "or"; args: PNode[] }
  | { t: "not"; arg: PNode }
  | { t: "in"; lhs: ENode; values: ConstNode[] }
  | { t: "is_null"; arg: ENode }
  | { t: "regex"; lhs: ENode; pattern: string };

/** Thrown for any misuse found while building or compiling a plan. */
export class PlanError extends Error {
  override name = "PlanError";
}

// ---- type-level helpers --------------------------------------------------------------

/** Anything with a (phantom) value type: expressions and parameter refs. Checked structurally so
 *  that Expr<"f64"> is accepted where a number expression (Num | "null") is expected. */
export interface Typed<T extends VT> {
  readonly __type: T;
}

/** The family of values an expression of type T may be combined or compared with. */
export type Fam<T extends VT> = [T] extends [never]
  ? VT
  : T extends Num
    ? Num | "null"
    : T extends "str"
      ? "str" | "null"
      : T extends "bool"
        ? "bool" | "null"
        : T extends VecType
          ? never
          : VT;
/** What may stand where an expression of family F is expected: an expression or a literal. */
export type OperandOf<F extends VT> =
  | Typed<F>
  | ("i64" extends F ? number : never)
  | ("str" extends F ? string : never)
  | ("bool" extends F ? boolean : never)
  | null;
export type NumOperand = Typed<Num | "null"> | number | null;
/** The type of a number literal: i64 when written as an integer, else f64. */
export type NumLit<N extends number> = number extends N ? Num : `${N}` extends `${bigint}` ? "i64" : "f64";
export type TypeOf<X> = X extends Typed<infer T>
  ? T
  : X extends number
    ? NumLit<X>
    : X extends string
      ? "str"
      : X extends boolean
        ? "bool"
        : X extends null
          ? "null"
          : never;
type IsAny<U> = 0 extends 1 & U ? true : false;
/** + - * neg abs: i64 when every non-null operand is i64, else f64. */
export type Arith<U> = IsAny<U> extends true ? any : [Exclude<U, "null">] extends [never] ? "i64" : [Exclude<U, "null">] extends ["i64"] ? "i64" : "f64";
/** min max coalesce if: like Arith for numbers; str / bool when all operands are. */
export type Join<U> = IsAny<U> extends true
  ? any
  : [Exclude<U, "null">] extends [never]
  ? "null"
  : [Exclude<U, "null">] extends ["str"]
    ? "str"
    : [Exclude<U, "null">] extends ["bool"]
      ? "bool"
      : Arith<U>;

// ---- runtime construction ------------------------------------------------------------

export function constNode(v: Scalar, where: string): ConstNode {
  if (typeof v === "number" && !Number.isFinite(v)) throw new PlanError(`${where}: constant ${v} is not a finite number`);
  if (v !== null && !["number", "string", "boolean"].includes(typeof v))
    throw new PlanError(`${where}: ${describe(v)} is not an expression or constant`);
  return { t: "const", v };
}

function describe(v: unknown): string {
  if (v === undefined) return "undefined";
  if (typeof v === "function") return "a function";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object" && v) return `an object (${v.constructor?.name ?? "Object"})`;
  return JSON.stringify(v);
}

/** An expression or a literal → an expression node. */
export function toENode(x: unknown, where = "expression"): ENode {
  if (x instanceof Expr) return x.node;
  if (x instanceof Pred) throw new PlanError(`${where}: a predicate is not an expression (use E.if(pred, a, b))`);
  return constNode(x as Scalar, where);
}

export function toPNode(x: unknown, where = "predicate"): PNode {
  if (x instanceof Pred) return x.node;
  if (x instanceof Expr) throw new PlanError(`${where}: an expression is not a predicate (compare it, e.g. .gt(0))`);
  throw new PlanError(`${where}: ${describe(x)} is not a predicate`);
}

/** n-ary ops written left to right: (a + b) + c is stored as +[a, b, c]. */
function nary(op: ArithOp | "min" | "max" | "coalesce", first: unknown, rest: unknown[]): ENode {
  const head = toENode(first, op);
  const args = head.t === "op" && head.op === op && (op === "+" || op === "*" || op === "-" || op === "/") ? [...head.args] : [head];
  for (const r of rest) args.push(toENode(r, op));
  return { t: "op", op, args };
}

function andOr(op: "and" | "or", ps: unknown[]): PNode {
  const args: PNode[] = [];
  for (const p of ps) {
    const n = toPNode(p, op);
    if (n.t === op) args.push(...n.args);
    else args.push(n);
  }
  return { t: op, args };
}

/** An expression whose value type is T (phantom). Build with E.*, P.name, column refs or methods. */
export class Expr<T extends VT = VT> implements Typed<T> {
  declare readonly __type: T;
  constructor(readonly node: ENode) {}

  add<const A extends NumOperand[]>(this: Typed<Num | "null">, ...xs: A): Expr<Arith<T | TypeOf<A[number]>>> {
    return new Expr(nary("+", this, xs));
  }
  sub<const A extends NumOperand[]>(this: Typed<Num | "null">, ...xs: A): Expr<Arith<T | TypeOf<A[number]>>> {
    return new Expr(nary("-", this, xs));
  }
  mul<const A extends NumOperand[]>(this: Typed<Num | "null">, ...xs: A): Expr<Arith<T | TypeOf<A[number]>>> {
    return new Expr(nary("*", this, xs));
  }
  div(this: Typed<Num | "null">, ...xs: NumOperand[]): Expr<"f64"> {
    return new Expr(nary("/", this, xs));
  }
  min<const A extends OperandOf<Fam<T>>[]>(...xs: A): Expr<Join<T | TypeOf<A[number]>>> {
    return new Expr(nary("min", this, xs));
  }
  max<const A extends OperandOf<Fam<T>>[]>(...xs: A): Expr<Join<T | TypeOf<A[number]>>> {
    return new Expr(nary("max", this, xs));
  }
  /** The first non-null of this and the alternatives. */
  coalesce<const A extends OperandOf<Fam<T>>[]>(...xs: A): Expr<Join<T | TypeOf<A[number]>>> {
    return new Expr(nary("coalesce", this, xs));
  }
  neg(this: Typed<Num | "null">): Expr<Arith<T>> {
    return new Expr({ t: "op", op: "neg", args: [toENode(this)] });
  }
  abs(this: Typed<Num | "null">): Expr<Arith<T>> {
    return new Expr({ t: "op", op: "abs", args: [toENode(this)] });
  }
  log(this: Typed<Num | "null">): Expr<"f64"> {
    return new Expr({ t: "op", op: "log", args: [toENode(this)] });
  }
  log1p(this: Typed<Num | "null">): Expr<"f64"> {
    return new Expr({ t: "op", op: "log1p", args: [toENode(this)] });
  }
  exp(this: Typed<Num | "null">): Expr<"f64"> {
    return new Expr({ t: "op", op: "exp", args: [toENode(this)] });
  }
  sqrt(this: Typed<Num | "null">): Expr<"f64"> {
    return new Expr({ t: "op", op: "sqrt", args: [toENode(this)] });
  }
  pow(this: Typed<Num | "null">, exponent: NumOperand): Expr<"f64"> {
    return new Expr({ t: "op", op: "pow", args: [toENode(this), toENode(exponent, "pow")] });
  }

  eq(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp("==", this, x as never);
  }
  ne(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp("!=", this, x as never);
  }
  lt(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp("<", this, x as never);
  }
  le(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp("<=", this, x as never);
  }
  gt(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp(">", this, x as never);
  }
  ge(x: OperandOf<Fam<T>>): Pred {
    return Pred.cmp(">=", this, x as never);
  }
  /** True when the value equals one of the constants. */
  in(values: readonly Exclude<OperandOf<Fam<T>>, Typed<any> | null>[]): Pred {
    return Pred.in(this, values as never);
  }
  isNull(): Pred {
    return Pred.isNull(this);
  }
  /** The inner product with a vector of the same dimension (f64; null when either is null). */
  dot<D extends VecType>(this: Typed<D>, other: Typed<NoInfer<D>>): Expr<"f64"> {
    return new Expr({ t: "op", op: "dot", args: [toENode(this), toENode(other, "dot")] });
  }
  /** The cosine with a vector of the same dimension (f64; null when either is null or all zeros). */
  cosine<D extends VecType>(this: Typed<D>, other: Typed<NoInfer<D>>): Expr<"f64"> {
    return new Expr({ t: "op", op: "cosine", args: [toENode(this), toENode(other, "cosine")] });
  }
  /** The Euclidean distance to a vector of the same dimension (f64; null when either is null). */
  l2<D extends VecType>(this: Typed<D>, other: Typed<NoInfer<D>>): Expr<"f64"> {
    return new Expr({ t: "op", op: "l2", args: [toENode(this), toENode(other, "l2")] });
  }
  /** RE2 partial match (anchor with ^…$ for a whole match); false for null. */
  matches(this: Typed<"str" | "null">, pattern: string | RegExp): Pred {
    return Pred.regex(this, pattern);
  }
}

/** A declared request parameter, usable as an expression and as a task parameter value. */
export class ParamRef<T extends ColType = ColType> extends Expr<T> {
  constructor(readonly paramName: string) {
    super({ t: "param", name: paramName });
  }
}

/** A predicate (the pred_table form of docs/plan.md). */
export class Pred {
  constructor(readonly node: PNode) {}

  and(...ps: Pred[]): Pred {
    return new Pred(andOr("and", [this, ...ps]));
  }
  or(...ps: Pred[]): Pred {
    return new Pred(andOr("or", [this, ...ps]));
  }
  not(): Pred {
    return new Pred({ t: "not", arg: this.node });
  }

  static cmp<T extends VT>(cmp: CmpOp, lhs: Typed<T> | Scalar, rhs: OperandOf<Fam<T>>): Pred {
    if (!["==", "!=", "<", "<=", ">", ">="].includes(cmp)) throw new PlanError(`cmp: unknown comparison ${JSON.stringify(cmp)}`);
    return new Pred({ t: "cmp", cmp, lhs: toENode(lhs, `cmp ${cmp}`), rhs: toENode(rhs, `cmp ${cmp}`) });
  }
  static and(...ps: Pred[]): Pred {
    return new Pred(andOr("and", ps));
  }
  static or(...ps: Pred[]): Pred {
    return new Pred(andOr("or", ps));
  }
  static not(p: Pred): Pred {
    return new Pred({ t: "not", arg: toPNode(p, "not") });
  }
  static in<T extends VT>(lhs: Typed<T>, values: readonly Exclude<OperandOf<Fam<T>>, Typed<any> | null>[]): Pred {
    if (!Array.isArray(values)) throw new PlanError(`in: values must be an array of constants`);
    return new Pred({ t: "in", lhs: toENode(lhs, "in"), values: values.map((v) => constNode(v as Scalar, "in")) });
  }
  static isNull(e: Typed<VT>): Pred {
    return new Pred({ t: "is_null", arg: toENode(e, "is_null") });
  }
  static regex(lhs: Typed<"str" | "null">, pattern: string | RegExp): Pred {
    return new Pred({ t: "regex", lhs: toENode(lhs, "regex"), pattern: regexSource(pattern) });
  }
}

function regexSource(p: string | RegExp): string {
  if (p instanceof RegExp) {
    const flags = p.flags.replace("u", "");
    if (flags !== "" && flags !== "i") throw new PlanError(`regex: flags /${p.flags} are not supported (only i)`);
    return flags === "i" ? `(?i)${p.source}` : p.source;
  }
  if (typeof p !== "string") throw new PlanError(`regex: pattern must be a string or RegExp`);
  return p;
}

/** Expression constructors. */
export const E = {
  /** A constant: integers are i64, other numbers f64 (use E.f64 for an integral double). */
  const<const V extends Scalar>(v: V): Expr<TypeOf<V>> {
    return new Expr(constNode(v, "E.const"));
  },
  /** A double constant, written with ".0" when integral. */
  f64(v: number): Expr<"f64"> {
    if (typeof v !== "number") throw new PlanError(`E.f64: ${describe(v)} is not a number`);
    return new Expr({ ...constNode(v, "E.f64"), f64: true });
  },
  null(): Expr<"null"> {
    return new Expr({ t: "const", v: null });
  },
  /** A column by name, checked when the plan compiles (column refs `(c) => c.likes` are typed). */
  key(name: string): Expr<any> {
    if (typeof name !== "string" || name === "") throw new PlanError(`E.key: column name must be a non-empty string`);
    return new Expr({ t: "key", name });
  },
  /** Column `key` of a viewer node this expression's node reads through its inputs, the same
   *  for every row (null when the viewer found no user): `E.from(viewer, "age")`, or the
   *  viewer's explicit id. Checked when the plan compiles. */
  from(node: object | string, key: string): Expr<any> {
    if (typeof node !== "object" && typeof node !== "string") throw new PlanError(`E.from: node must be a node or a node id`);
    if (typeof key !== "string" || key === "") throw new PlanError(`E.from: column name must be a non-empty string`);
    return new Expr({ t: "from", node, key });
  },
  /** A request parameter by name, checked when the plan compiles (prefer the typed P.name). */
  param(name: string): Expr<any> {
    if (typeof name !== "string" || name === "") throw new PlanError(`E.param: name must be a non-empty string`);
    return new Expr({ t: "param", name });
  },
  add<const A extends [NumOperand, NumOperand, ...NumOperand[]]>(...xs: A): Expr<Arith<TypeOf<A[number]>>> {
    return new Expr(nary("+", xs[0], xs.slice(1)));
  },
  sub<const A extends [NumOperand, NumOperand, ...NumOperand[]]>(...xs: A): Expr<Arith<TypeOf<A[number]>>> {
    return new Expr(nary("-", xs[0], xs.slice(1)));
  },
  mul<const A extends [NumOperand, NumOperand, ...NumOperand[]]>(...xs: A): Expr<Arith<TypeOf<A[number]>>> {
    return new Expr(nary("*", xs[0], xs.slice(1)));
  },
  div(...xs: [NumOperand, NumOperand, ...NumOperand[]]): Expr<"f64"> {
    return new Expr(nary("/", xs[0], xs.slice(1)));
  },
  min<const A extends [OperandOf<VT>, OperandOf<VT>, ...OperandOf<VT>[]]>(...xs: A): Expr<Join<TypeOf<A[number]>>> {
    return new Expr(nary("min", xs[0], xs.slice(1)));
  },
  max<const A extends [OperandOf<VT>, OperandOf<VT>, ...OperandOf<VT>[]]>(...xs: A): Expr<Join<TypeOf<A[number]>>> {
    return new Expr(nary("max", xs[0], xs.slice(1)));
  },
  coalesce<const A extends [OperandOf<VT>, OperandOf<VT>, ...OperandOf<VT>[]]>(...xs: A): Expr<Join<TypeOf<A[number]>>> {
    return new Expr(nary("coalesce", xs[0], xs.slice(1)));
  },
  neg<const A extends NumOperand>(x: A): Expr<Arith<TypeOf<A>>> {
    return new Expr({ t: "op", op: "neg", args: [toENode(x, "neg")] });
  },
  abs<const A extends NumOperand>(x: A): Expr<Arith<TypeOf<A>>> {
    return new Expr({ t: "op", op: "abs", args: [toENode(x, "abs")] });
  },
  log: (x: NumOperand): Expr<"f64"> => new Expr({ t: "op", op: "log", args: [toENode(x, "log")] }),
  log1p: (x: NumOperand): Expr<"f64"> => new Expr({ t: "op", op: "log1p", args: [toENode(x, "log1p")] }),
  exp: (x: NumOperand): Expr<"f64"> => new Expr({ t: "op", op: "exp", args: [toENode(x, "exp")] }),
  sqrt: (x: NumOperand): Expr<"f64"> => new Expr({ t: "op", op: "sqrt", args: [toENode(x, "sqrt")] }),
  pow: (x: NumOperand, y: NumOperand): Expr<"f64"> =>
    new Expr({ t: "op", op: "pow", args: [toENode(x, "pow"), toENode(y, "pow")] }),
  /** dot(a, b): the inner product of two vectors of one dimension (docs/vectors.md). */
  dot: <D extends VecType>(a: Typed<D>, b: Typed<NoInfer<D>>): Expr<"f64"> =>
    new Expr({ t: "op", op: "dot", args: [toENode(a, "dot"), toENode(b, "dot")] }),
  /** cosine(a, b): null when either vector is all zeros. */
  cosine: <D extends VecType>(a: Typed<D>, b: Typed<NoInfer<D>>): Expr<"f64"> =>
    new Expr({ t: "op", op: "cosine", args: [toENode(a, "cosine"), toENode(b, "cosine")] }),
  /** l2(a, b): the Euclidean distance. */
  l2: <D extends VecType>(a: Typed<D>, b: Typed<NoInfer<D>>): Expr<"f64"> =>
    new Expr({ t: "op", op: "l2", args: [toENode(a, "l2"), toENode(b, "l2")] }),
  /** if(pred, then, else): `then` when the predicate is true, else `else`. */
  if<const A extends OperandOf<VT>, const B extends OperandOf<Fam<TypeOf<A>>>>(
    pred: Pred,
    then: A,
    otherwise: B,
  ): Expr<Join<TypeOf<A> | TypeOf<B>>> {
    return new Expr({ t: "if", pred: toPNode(pred, "if"), then: toENode(then, "if"), else: toENode(otherwise, "if") });
  },
};

// ---- load-time typing (the server fixes every type at load) ---------------------------

export interface TypeEnv {
  cols: ReadonlyMap<string, ColType>;
  params: ReadonlyMap<string, ColType>;
  /** The type of E.from(node, key) at this node; throws a PlanError when it may not be read. */
  from?: (node: unknown, key: string) => ColType;
}

function constType(c: ConstNode): VT {
  if (c.v === null) return "null";
  if (typeof c.v === "string") return "str";
  if (typeof c.v === "boolean") return "bool";
  return !c.f64 && Number.isSafeInteger(c.v) ? "i64" : "f64";
}

function show(n: ENode): string {
  switch (n.t) {
    case "const":
      return JSON.stringify(n.v);
    case "key":
      return n.name;
    case "param":
      return `$${n.name}`;
    case "from":
      return `from(${typeof n.node === "string" ? n.node : "node"}, ${n.key})`;
    case "if":
      return "if(…)";
    case "op":
      return `${n.op}(…)`;
  }
}

function numeric(t: VT): boolean {
  return t === "i64" || t === "f64" || t === "null";
}

export function isVec(t: VT): t is VecType {
  return t.startsWith("vec:");
}

const VEC_ONLY = "vectors go into dot, cosine and l2 only";

/** The value type of an expression; throws a PlanError naming the offending part. */
export function typeOfExpr(n: ENode, env: TypeEnv): VT {
  switch (n.t) {
    case "const":
      return constType(n);
    case "key": {
      const t = env.cols.get(n.name);
      if (!t) throw new PlanError(`unknown column '${n.name}' (columns here: ${[...env.cols.keys()].join(", ")})`);
      return t;
    }
    case "param": {
      const t = env.params.get(n.name);
      if (!t) throw new PlanError(`parameter '${n.name}' is not declared in the plan's params`);
      return t;
    }
    case "from":
      if (!env.from) throw new PlanError(`${show(n)}: E.from reads another node, only in a plan`);
      return env.from(n.node, n.key);
    case "if": {
      checkPred(n.pred, env);
      return join("if", [n.then, n.else], env);
    }
    case "op": {
      const arity: Record<string, [number, number]> = {
        neg: [1, 1], abs: [1, 1], log: [1, 1], log1p: [1, 1], exp: [1, 1], sqrt: [1, 1], pow: [2, 2],
        dot: [2, 2], cosine: [2, 2], l2: [2, 2],
      };
      const [lo, hi] = arity[n.op] ?? [2, Infinity];
      if (n.args.length < lo || n.args.length > hi)
        throw new PlanError(`${n.op} takes ${lo === hi ? lo : `at least ${lo}`} argument(s), got ${n.args.length}`);
      if (n.op === "min" || n.op === "max" || n.op === "coalesce") return join(n.op, n.args, env);
      const ts = n.args.map((a) => typeOfExpr(a, env));
      if (n.op === "dot" || n.op === "cosine" || n.op === "l2") {
        ts.forEach((t, i) => {
          if (!isVec(t)) throw new PlanError(`${n.op}: operand ${show(n.args[i])} is ${t}; ${n.op} needs two vectors`);
        });
        if (ts[0] !== ts[1])
          throw new PlanError(`${n.op}: ${show(n.args[0])} is ${ts[0]} but ${show(n.args[1])} is ${ts[1]}; the dimensions must agree`);
        return "f64";
      }
      ts.forEach((t, i) => {
        if (!numeric(t)) throw new PlanError(`${n.op}: operand ${show(n.args[i])} is ${t}; arithmetic needs numbers`);
      });
      if (n.op === "/" || ["log", "log1p", "exp", "sqrt", "pow"].includes(n.op)) return "f64";
      return ts.includes("f64") ? "f64" : "i64";
    }
  }
}

function join(op: string, args: ENode[], env: TypeEnv): VT {
  const ts = args.map((a) => typeOfExpr(a, env));
  ts.forEach((t, i) => {
    if (isVec(t)) throw new PlanError(`${op}: operand ${show(args[i])} is ${t}; ${VEC_ONLY}`);
  });
  const known = [...new Set(ts.filter((t) => t !== "null"))];
  if (known.length === 0) return "null";
  if (known.every((t) => t === "i64" || t === "f64")) return known.includes("f64") ? "f64" : "i64";
  if (known.length === 1) return known[0];
  throw new PlanError(`${op}: operands mix types ${known.join(" and ")} (${args.map(show).join(", ")})`);
}

function family(t: VT): string {
  return t === "i64" || t === "f64" ? "number" : t;
}

export function checkPred(p: PNode, env: TypeEnv): void {
  switch (p.t) {
    case "cmp": {
      const a = typeOfExpr(p.lhs, env);
      const b = typeOfExpr(p.rhs, env);
      for (const [t, e] of [[a, p.lhs], [b, p.rhs]] as const)
        if (isVec(t)) throw new PlanError(`cmp ${p.cmp}: ${show(e)} is ${t}; ${VEC_ONLY}`);
      if (a === "null" || b === "null")
        throw new PlanError(`cmp ${p.cmp}: comparing with null is always false (use is_null)`);
      if (family(a) !== family(b))
        throw new PlanError(`cmp ${p.cmp}: ${show(p.lhs)} is ${a} but ${show(p.rhs)} is ${b}; the comparison would always be false`);
      if (a === "bool" && p.cmp !== "==" && p.cmp !== "!=") throw new PlanError(`cmp ${p.cmp}: bools compare only with == and !=`);
      return;
    }
    case "and":
    case "or":
      if (p.args.length < 2) throw new PlanError(`${p.t} takes at least 2 predicates, got ${p.args.length}`);
      p.args.forEach((a) => checkPred(a, env));
      return;
    case "not":
      checkPred(p.arg, env);
      return;
    case "in": {
      const a = typeOfExpr(p.lhs, env);
      if (isVec(a)) throw new PlanError(`in: ${show(p.lhs)} is ${a}; ${VEC_ONLY}`);
      if (p.values.length === 0) throw new PlanError(`in: the list of values is empty`);
      for (const v of p.values) {
        const b = constType(v);
        if (b === "null") throw new PlanError(`in: null never matches (use is_null)`);
        if (a !== "null" && family(a) !== family(b)) throw new PlanError(`in: ${show(p.lhs)} is ${a} but value ${JSON.stringify(v.v)} is ${b}`);
      }
      return;
    }
    case "is_null":
      typeOfExpr(p.arg, env);
      return;
    case "regex": {
      const a = typeOfExpr(p.lhs, env);
      if (a !== "str") throw new PlanError(`regex: ${show(p.lhs)} is ${a}; regex matches strings`);
      checkRe2(p.pattern);
      return;
    }
  }
}

/** A syntax check that catches most patterns RE2 would reject at load. */
function checkRe2(pattern: string): void {
  const body = pattern.replace(/^\(\?[imsU]+\)/, "");
  try {
    new RegExp(body, "u");
  } catch (e) {
    throw new PlanError(`regex: bad pattern ${JSON.stringify(pattern)}: ${(e as Error).message}`);
  }
  if (/\(\?<?[=!]/.test(body)) throw new PlanError(`regex: lookaround is not supported by RE2 (${JSON.stringify(pattern)})`);
  if (/\\[1-9]/.test(body)) throw new PlanError(`regex: backreferences are not supported by RE2 (${JSON.stringify(pattern)})`);
}

// ---- JSON ----------------------------------------------------------------------------

function constJson(c: ConstNode): Json {
  return typeof c.v === "number" && (c.f64 || !Number.isSafeInteger(c.v)) ? new F64(c.v) : c.v;
}

/** `nodeId` names the node of an E.from (the plan's compile passes it). */
export type NodeIdOf = (node: unknown) => string;
const noNodeIds: NodeIdOf = () => {
  throw new PlanError(`E.from: a node id is known only when the plan compiles`);
};

export function exprJson(n: ENode, nodeId: NodeIdOf = noNodeIds): Json {
  const sub = (e: ENode) => exprJson(e, nodeId);
  switch (n.t) {
    case "const":
      return { const: constJson(n) };
    case "key":
      return { key: n.name };
    case "param":
      return { param: n.name };
    case "from":
      return { from: nodeId(n.node), key: n.key };
    case "op":
      return { op: n.op, args: n.args.map(sub) };
    case "if":
      return { op: "if", args: [predJson(n.pred, nodeId), sub(n.then), sub(n.else)] };
  }
}

export function predJson(p: PNode, nodeId: NodeIdOf = noNodeIds): Json {
  const e = (x: ENode) => exprJson(x, nodeId);
  switch (p.t) {
    case "cmp":
      return { op: "cmp", cmp: p.cmp, lhs: e(p.lhs), rhs: e(p.rhs) };
    case "and":
    case "or":
      return { op: p.t, args: p.args.map((a) => predJson(a, nodeId)) };
    case "not":
      return { op: "not", arg: predJson(p.arg, nodeId) };
    case "in":
      return { op: "in", lhs: e(p.lhs), values: p.values.map(constJson) };
    case "is_null":
      return { op: "is_null", arg: e(p.arg) };
    case "regex":
      return { op: "regex", lhs: e(p.lhs), pattern: p.pattern };
  }
}
