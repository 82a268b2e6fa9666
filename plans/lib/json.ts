// Deterministic JSON text for plan files: 2-space indentation like JSON.stringify(v, null, 2),
// key order as inserted, a trailing newline, and f64 values that happen to be integral
// written with ".0" so that the C++ loader (simdjson) reads them as doubles, not int64.

/** A number that must be written as a JSON double even when integral (1 → "1.0"). */
export class F64 {
  constructor(readonly value: number) {}
}

export type Json = null | boolean | number | string | F64 | readonly Json[] | { readonly [k: string]: Json };

function num(v: number): string {
  if (!Number.isFinite(v)) throw new Error(`cannot write non-finite number ${v} to JSON`);
  return Object.is(v, -0) ? "0" : String(v);
}

function write(v: Json, indent: string, out: string[]): void {
  if (v === null) out.push("null");
  else if (typeof v === "boolean") out.push(v ? "true" : "false");
  else if (typeof v === "number") out.push(num(v));
  else if (typeof v === "string") out.push(JSON.stringify(v));
  else if (v instanceof F64) {
    const s = num(v.value);
    out.push(/^-?\d+$/.test(s) ? `${s}.0` : s);
  } else if (Array.isArray(v)) {
    if (v.length === 0) return void out.push("[]");
    const inner = indent + "  ";
    out.push("[\n");
    v.forEach((x, i) => {
      out.push(inner);
      write(x, inner, out);
      out.push(i + 1 < v.length ? ",\n" : "\n");
    });
    out.push(indent, "]");
  } else {
    const keys = Object.keys(v);
    if (keys.length === 0) return void out.push("{}");
    const inner = indent + "  ";
    const obj = v as { readonly [k: string]: Json };
    out.push("{\n");
    keys.forEach((k, i) => {
      out.push(inner, JSON.stringify(k), ": ");
      write(obj[k], inner, out);
      out.push(i + 1 < keys.length ? ",\n" : "\n");
    });
    out.push(indent, "}");
  }
}

/** The file text of a JSON value: 2-space indentation and a trailing newline. */
export function stringify(v: Json): string {
  const out: string[] = [];
  write(v, "", out);
  out.push("\n");
  return out.join("");
}

/** One-line canonical text of a JSON value, used as a deduplication key. */
export function canonical(v: Json): string {
  return stringify(v).replace(/\n\s*/g, "");
}
