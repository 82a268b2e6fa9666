// The declared schema of a plans folder (`schema.json`, docs/data.md "Declared schema"):
// the families of Redis keys that the IO ops read, as TypeScript types (from the `as const`
// module that lib/gen-schema.mjs writes next to the plans) and as a checked runtime value.

import { PlanError, type ColType } from "./expr.js";

export type FieldType = "i64" | "f64" | "str" | "bool";
export type IdType = "i64" | "str";
export type FamilyType = "hash" | "json" | "list" | "zset" | "set";

/** A family with fields: `hash` (HMGET) or `json` (a string key holding a JSON object). */
export interface FieldFamilyDecl {
  readonly type: "hash" | "json";
  readonly key: string;
  readonly id?: IdType;
  readonly fields: { readonly [field: string]: FieldType };
  readonly members?: never;
}
/** A family of ids: `list` (LRANGE), `zset` (ZRANGE … REV WITHSCORES) or `set` (SMISMEMBER). */
export interface IdsFamilyDecl {
  readonly type: "list" | "zset" | "set";
  readonly key: string;
  readonly id?: IdType;
  readonly members?: IdType;
  readonly fields?: never;
}
export type FamilyDecl = FieldFamilyDecl | IdsFamilyDecl;
export interface SchemaDecl {
  readonly schema_version: 1;
  readonly families: { readonly [name: string]: FamilyDecl };
}

/** The demo schema: what a plans folder without `schema.json` uses (docs/data.md). */
export const DEMO_SCHEMA = {
  schema_version: 1,
  families: {
    user: { type: "hash", key: "user:{id}", fields: { country: "str", lang: "str", age: "i64", premium: "i64" } },
    item: {
      type: "hash",
      key: "item:{id}",
      fields: { author: "i64", likes: "i64", age_s: "i64", category: "str", country: "str", quality: "f64", nsfw: "i64" },
    },
    follow: { type: "list", key: "follow:{id}" },
    recs: { type: "list", key: "recs:{id}" },
    media: { type: "list", key: "media:{id}" },
    seen: { type: "set", key: "seen:{id}" },
  },
} as const satisfies SchemaDecl;
export type DemoSchema = typeof DEMO_SCHEMA;

// ---- type-level views of a schema ------------------------------------------------------

export type Fams<S extends SchemaDecl> = S["families"];
/** Names of the families of S whose type is in T (and, optionally, whose id type is I). */
export type FamilyOf<S extends SchemaDecl, T extends FamilyType, I = IdType> = {
  [K in keyof Fams<S> & string]: Fams<S>[K]["type"] extends T ? (IdOf<Fams<S>[K]> extends I ? K : never) : never;
}[keyof Fams<S> & string];
/** Names of the set and zset families of S whose members are of type M (what seen_filter reads). */
export type SetFamilyOf<S extends SchemaDecl, M> = {
  [K in keyof Fams<S> & string]: Fams<S>[K]["type"] extends "set" | "zset" ? (MembersOf<Fams<S>[K]> extends M ? K : never) : never;
}[keyof Fams<S> & string];
export type IdOf<F> = F extends { readonly id: infer I extends IdType } ? I : "i64";
export type MembersOf<F> = F extends { readonly members: infer M extends IdType } ? M : "i64";
export type FieldsOf<F> = F extends { readonly fields: infer X } ? X : {};
export type FieldName<F> = keyof FieldsOf<F> & string;
/** The column type of a field: a `bool` field is an i64 column holding 0 or 1. */
export type FieldCol<T> = T extends "bool" ? "i64" : T extends "i64" | "f64" | "str" ? T : never;
export type FieldCols<F, K extends string> = { [k in K]: FieldCol<FieldsOf<F>[k & keyof FieldsOf<F>]> };
export type TypeOfFamily<S extends SchemaDecl, N> = N extends keyof Fams<S> ? Fams<S>[N]["type"] : never;

// ---- the runtime value, checked ----------------------------------------------------------

export interface Family {
  readonly name: string;
  readonly type: FamilyType;
  readonly key: string;
  readonly id: IdType;
  readonly members: IdType;
  /** Declared fields in declaration order, with their column types (bool → i64). */
  readonly fields: ReadonlyMap<string, FieldType>;
}
export interface Schema {
  /** Where the schema came from, for messages: "schema.json" of a folder, or "the demo schema". */
  readonly source: string;
  readonly families: ReadonlyMap<string, Family>;
  /** The schema as declared, for comparing with a folder's schema.json. */
  readonly decl: SchemaDecl;
}

const NAME_RE = /^[a-z_][a-z0-9_]{0,63}$/;
const FAMILY_TYPES: readonly FamilyType[] = ["hash", "json", "list", "zset", "set"];
const FIELD_TYPES: readonly FieldType[] = ["i64", "f64", "str", "bool"];
const ID_TYPES: readonly IdType[] = ["i64", "str"];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Checks a schema value (the rules of docs/data.md); throws a PlanError naming `source` and the member. */
export function checkSchema(v: unknown, source: string): Schema {
  const bad = (where: string, msg: string): never => {
    throw new PlanError(`${source}: ${where}: ${msg}`);
  };
  if (!isObj(v)) bad("(top)", "must be an object {schema_version, families}");
  const top = v as Record<string, unknown>;
  for (const k of Object.keys(top)) if (k !== "schema_version" && k !== "families") bad(k, "unknown member (allowed: schema_version, families)");
  if (top.schema_version !== 1) bad("schema_version", `must be 1, got ${JSON.stringify(top.schema_version)}`);
  if (!isObj(top.families)) bad("families", "must be an object: family name → family");
  const fams = top.families as Record<string, unknown>;
  const names = Object.keys(fams);
  if (names.length > 256) bad("families", `${names.length} families; at most 256`);
  const out = new Map<string, Family>();
  for (const name of names) {
    const w = `families.${name}`;
    if (!NAME_RE.test(name)) bad(w, "a family name must match [a-z_][a-z0-9_]{0,63}");
    const f = fams[name];
    if (!isObj(f)) bad(w, "must be an object {type, key, …}");
    const fam = f as Record<string, unknown>;
    const type = fam.type as FamilyType;
    if (!FAMILY_TYPES.includes(type)) bad(`${w}.type`, `${JSON.stringify(fam.type)} is not one of ${FAMILY_TYPES.join(", ")}`);
    const withFields = type === "hash" || type === "json";
    const allowed = ["type", "key", "id", withFields ? "fields" : "members"];
    for (const k of Object.keys(fam))
      if (!allowed.includes(k)) bad(`${w}.${k}`, `unknown member for a ${type} family (allowed: ${allowed.join(", ")})`);
    const key = fam.key;
    if (typeof key !== "string") bad(`${w}.key`, "must be a key template string with one {id}");
    const k = key as string;
    const ids = k.split("{id}").length - 1;
    if (ids !== 1) bad(`${w}.key`, `${JSON.stringify(k)} must hold exactly one {id}, it has ${ids}`);
    if (Buffer.byteLength(k) > 256) bad(`${w}.key`, "longer than 256 bytes");
    if (k.startsWith("rankd:")) bad(`${w}.key`, "must not start with rankd: (the server's own keys)");
    const idType = (fam.id ?? "i64") as IdType;
    if (!ID_TYPES.includes(idType)) bad(`${w}.id`, `${JSON.stringify(fam.id)} is not one of i64, str`);
    const members = (fam.members ?? "i64") as IdType;
    if (!ID_TYPES.includes(members)) bad(`${w}.members`, `${JSON.stringify(fam.members)} is not one of i64, str`);
    const fields = new Map<string, FieldType>();
    if (withFields) {
      if (!isObj(fam.fields)) bad(`${w}.fields`, `a ${type} family needs fields: field name → i64, f64, str or bool`);
      const fs = fam.fields as Record<string, unknown>;
      const fnames = Object.keys(fs);
      if (fnames.length > 1024) bad(`${w}.fields`, `${fnames.length} fields; at most 1024`);
      for (const fname of fnames) {
        if (!NAME_RE.test(fname)) bad(`${w}.fields.${fname}`, "a field name must match [a-z_][a-z0-9_]{0,63}");
        const ft = fs[fname] as FieldType;
        if (!FIELD_TYPES.includes(ft)) bad(`${w}.fields.${fname}`, `${JSON.stringify(fs[fname])} is not one of ${FIELD_TYPES.join(", ")}`);
        fields.set(fname, ft);
      }
    }
    out.set(name, { name, type, key: k, id: idType, members, fields });
  }
  return { source, families: out, decl: v as unknown as SchemaDecl };
}

/** The column type a field becomes: bool → i64 (0/1). */
export function fieldCol(t: FieldType): ColType {
  return t === "bool" ? "i64" : t;
}
