// The expression-string syntax: "log1p(likes) * $weight + coalesce(quality, 0)".
// Parsed when the plan compiles; errors give the column of the offending token.
//
//   pred   := and ("||" and)*            expr := sum
//   and    := not ("&&" not)*            sum  := prod (("+" | "-") prod)*
//   not    := "!" not | cmp              prod := unary (("*" | "/") unary)*
//   cmp    := sum (CMP sum | "in" "[" consts "]" | "~" string)?
//   unary  := "-" unary | atom
//   atom   := number | string | true | false | null | column | $param
//           | fn "(" args ")" | "(" pred ")"
//   fn     := min max neg abs log log1p exp sqrt pow coalesce dot cosine l2 if is_null regex
//
// Numbers with a "." or an exponent are f64 (1.0 stays a double); integers are i64.

import { PlanError, type ConstNode, type ENode, type PNode, type ArithOp, type CmpOp } from "./expr.js";

type Tok = { k: "num" | "str" | "id" | "param" | "op" | "end"; s: string; v?: number | string; f64?: boolean; at: number };

function lex(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const rest = src.slice(i);
    let m: RegExpMatchArray | null;
    if ((m = rest.match(/^(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)/))) {
      toks.push({ k: "num", s: m[0], v: Number(m[0]), f64: /[.eE]/.test(m[0]) && Number.isInteger(Number(m[0])), at: i });
      i += m[0].length;
    } else if ((m = rest.match(/^[A-Za-z_][A-Za-z0-9_]*/))) {
      toks.push({ k: "id", s: m[0], at: i });
      i += m[0].length;
    } else if ((m = rest.match(/^\$([A-Za-z_][A-Za-z0-9_]*)/))) {
      toks.push({ k: "param", s: m[0], v: m[1], at: i });
      i += m[0].length;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let out = "";
      while (j < src.length && src[j] !== c) {
        if (src[j] === "\\" && j + 1 < src.length) {
          const e = src[j + 1];
          out += e === "n" ? "\n" : e === "t" ? "\t" : e;
          j += 2;
        } else out += src[j++];
      }
      if (j >= src.length) throw new Error(`unterminated string at column ${i + 1}`);
      toks.push({ k: "str", s: src.slice(i, j + 1), v: out, at: i });
      i = j + 1;
    } else if ((m = rest.match(/^(==|!=|<=|>=|&&|\|\||[-+*\/<>!(),\[\]~])/))) {
      toks.push({ k: "op", s: m[0], at: i });
      i += m[0].length;
    } else throw new Error(`unexpected character ${JSON.stringify(c)} at column ${i + 1}`);
  }
  toks.push({ k: "end", s: "end of input", at: src.length });
  return toks;
}

type Node = { e: ENode } | { p: PNode };

class Parser {
  private i = 0;
  constructor(private readonly toks: Tok[]) {}

  private peek(): Tok {
    return this.toks[this.i];
  }
  private next(): Tok {
    return this.toks[this.i++];
  }
  private fail(t: Tok, what: string): never {
    throw new Error(`${what} at column ${t.at + 1} (found ${JSON.stringify(t.s)})`);
  }
  private accept(s: string): boolean {
    const t = this.peek();
    if ((t.k === "op" || t.k === "id") && t.s === s) {
      this.i++;
      return true;
    }
    return false;
  }
  private expect(s: string): void {
    if (!this.accept(s)) this.fail(this.peek(), `expected "${s}"`);
  }
  private asE(n: Node, t: Tok): ENode {
    if ("e" in n) return n.e;
    this.fail(t, "expected a value, not a condition");
  }
  private asP(n: Node, t: Tok): PNode {
    if ("p" in n) return n.p;
    this.fail(t, "expected a condition (comparison, &&, ||, !, in, ~, is_null, regex), not a value");
  }

  top(): Node {
    const n = this.pred();
    if (this.peek().k !== "end") this.fail(this.peek(), "unexpected token");
    return n;
  }

  private logic(op: "||" | "&&", name: "or" | "and", sub: () => Node): Node {
    const t0 = this.peek();
    const first = sub();
    if (!(this.peek().k === "op" && this.peek().s === op)) return first;
    const args = [this.asP(first, t0)];
    while (this.accept(op)) {
      const t = this.peek();
      const p = this.asP(sub(), t);
      if (p.t === name) args.push(...p.args);
      else args.push(p);
    }
    return { p: { t: name, args } };
  }

  private pred(): Node {
    return this.logic("||", "or", () => this.and());
  }
  private and(): Node {
    return this.logic("&&", "and", () => this.not());
  }
  private not(): Node {
    if (this.accept("!")) {
      const t = this.peek();
      return { p: { t: "not", arg: this.asP(this.not(), t) } };
    }
    return this.cmp();
  }
  private cmp(): Node {
    const t0 = this.peek();
    const lhs = this.sum();
    const t = this.peek();
    if (t.k === "op" && ["==", "!=", "<", "<=", ">", ">="].includes(t.s)) {
      this.i++;
      const t1 = this.peek();
      const rhs = this.sum();
      return { p: { t: "cmp", cmp: t.s as CmpOp, lhs: this.asE(lhs, t0), rhs: this.asE(rhs, t1) } };
    }
    if (t.k === "id" && t.s === "in") {
      this.i++;
      this.expect("[");
      const values: ConstNode[] = [];
      if (!this.accept("]")) {
        do values.push(this.constant());
        while (this.accept(","));
        this.expect("]");
      }
      return { p: { t: "in", lhs: this.asE(lhs, t0), values } };
    }
    if (t.k === "op" && t.s === "~") {
      this.i++;
      const s = this.next();
      if (s.k !== "str") this.fail(s, "expected a pattern string after ~");
      return { p: { t: "regex", lhs: this.asE(lhs, t0), pattern: s.v as string } };
    }
    return lhs;
  }
  private constant(): ConstNode {
    const t = this.next();
    const neg = t.k === "op" && t.s === "-";
    const u = neg ? this.next() : t;
    if (u.k === "num") return { t: "const", v: neg ? -(u.v as number) : (u.v as number), ...(u.f64 ? { f64: true } : {}) };
    if (neg) this.fail(u, "expected a number");
    if (u.k === "str") return { t: "const", v: u.v as string };
    if (u.k === "id" && (u.s === "true" || u.s === "false")) return { t: "const", v: u.s === "true" };
    if (u.k === "id" && u.s === "null") return { t: "const", v: null };
    this.fail(u, "expected a constant");
  }
  private chain(ops: string[], sub: () => Node): Node {
    const t0 = this.peek();
    let acc = sub();
    for (;;) {
      const t = this.peek();
      if (!(t.k === "op" && ops.includes(t.s))) return acc;
      this.i++;
      const op = t.s as ArithOp;
      const t1 = this.peek();
      const rhs = this.asE(sub(), t1);
      const lhs = this.asE(acc, t0);
      // Left-nested chains of one op are stored n-ary: (a - b) - c is -[a, b, c].
      acc = { e: lhs.t === "op" && lhs.op === op ? { t: "op", op, args: [...lhs.args, rhs] } : { t: "op", op, args: [lhs, rhs] } };
    }
  }
  private sum(): Node {
    return this.chain(["+", "-"], () => this.prod());
  }
  private prod(): Node {
    return this.chain(["*", "/"], () => this.unary());
  }
  private unary(): Node {
    if (this.accept("-")) {
      const u = this.peek();
      if (u.k === "num") {
        this.i++;
        return { e: { t: "const", v: -(u.v as number), ...(u.f64 ? { f64: true } : {}) } };
      }
      return { e: { t: "op", op: "neg", args: [this.asE(this.unary(), u)] } };
    }
    return this.atom();
  }
  private args(): { n: Node; t: Tok }[] {
    this.expect("(");
    const out: { n: Node; t: Tok }[] = [];
    if (!this.accept(")")) {
      do {
        const t = this.peek();
        out.push({ n: this.pred(), t });
      } while (this.accept(","));
      this.expect(")");
    }
    return out;
  }
  private atom(): Node {
    const t = this.next();
    switch (t.k) {
      case "num":
        return { e: { t: "const", v: t.v as number, ...(t.f64 ? { f64: true } : {}) } };
      case "str":
        return { e: { t: "const", v: t.v as string } };
      case "param":
        return { e: { t: "param", name: t.v as string } };
      case "op":
        if (t.s === "(") {
          const n = this.pred();
          this.expect(")");
          return n;
        }
        this.fail(t, "expected a value");
      case "end":
        this.fail(t, "unexpected end of expression");
      case "id":
        break;
    }
    if (t.s === "true" || t.s === "false") return { e: { t: "const", v: t.s === "true" } };
    if (t.s === "null") return { e: { t: "const", v: null } };
    if (!(this.peek().k === "op" && this.peek().s === "(")) return { e: { t: "key", name: t.s } };
    const fn = t.s;
    const args = this.args();
    const want = (lo: number, hi: number) => {
      if (args.length < lo || args.length > hi)
        this.fail(t, `${fn} takes ${lo === hi ? lo : hi === Infinity ? `at least ${lo}` : `${lo}..${hi}`} argument(s), got ${args.length}`);
    };
    const E = (k: number) => this.asE(args[k].n, args[k].t);
    switch (fn) {
      case "min":
      case "max":
      case "coalesce":
        want(2, Infinity);
        return { e: { t: "op", op: fn, args: args.map((_, k) => E(k)) } };
      case "neg":
      case "abs":
      case "log":
      case "log1p":
      case "exp":
      case "sqrt":
        want(1, 1);
        return { e: { t: "op", op: fn, args: [E(0)] } };
      case "pow":
      case "dot":
      case "cosine":
      case "l2":
        want(2, 2);
        return { e: { t: "op", op: fn, args: [E(0), E(1)] } };
      case "if":
        want(3, 3);
        return { e: { t: "if", pred: this.asP(args[0].n, args[0].t), then: E(1), else: E(2) } };
      case "is_null":
        want(1, 1);
        return { p: { t: "is_null", arg: E(0) } };
      case "regex": {
        want(2, 2);
        const pat = E(1);
        if (pat.t !== "const" || typeof pat.v !== "string") this.fail(args[1].t, "regex pattern must be a string literal");
        return { p: { t: "regex", lhs: E(0), pattern: pat.v } };
      }
      default:
        this.fail(t, `unknown function ${fn}`);
    }
  }
}

function parse(src: string): Node {
  if (typeof src !== "string") throw new PlanError(`expression source must be a string`);
  try {
    return new Parser(lex(src)).top();
  } catch (e) {
    if (e instanceof PlanError) throw e;
    throw new PlanError(`cannot parse ${JSON.stringify(src)}: ${(e as Error).message}`);
  }
}

/** Parses an expression string (a value). */
export function parseExpr(src: string): ENode {
  const n = parse(src);
  if ("p" in n) throw new PlanError(`${JSON.stringify(src)} is a condition; an expression (a value) is needed here`);
  return n.e;
}

/** Parses a predicate string (a condition). */
export function parsePred(src: string): PNode {
  const n = parse(src);
  if ("e" in n) throw new PlanError(`${JSON.stringify(src)} is a value; a condition (e.g. a comparison) is needed here`);
  return n.p;
}
