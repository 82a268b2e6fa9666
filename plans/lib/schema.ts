// The declared schema of a plans folder (`schema.json`, docs/data.md "Declared schema"):
// the families of Redis keys that the IO ops read (and the event types that keep its
// counters families, docs/events.md), as TypeScript types (from the `as const`
// module that lib/gen-schema.mjs writes next to the plans) and as a checked runtime value.

import { PlanError, type ColType, type VecType } from "./expr.js";

/** A field's declared type; "vec:D" (1 ≤ D ≤ 4096) in hash and json families only (docs/vectors.md). */
export type FieldType = "i64" | "f64" | "str" | "bool" | VecType;
export type IdType = "i64" | "str";
export type FamilyType = "hash" | "json" | "list" | "zset" | "set" | "counters";

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
/** A counters field: a sum of one counted event type, or a rate of two, over a window (an f64 column). */
export type CountersFieldDecl =
  | { readonly sum: string; readonly window_s: number }
  | { readonly rate: readonly [string, string]; readonly window_s: number; readonly prior?: readonly [number, number] };
/** A `counters` family (docs/events.md): kept by rankd from events, read like a hash. */
export interface CountersFamilyDecl {
  readonly type: "counters";
  readonly key: string;
  readonly id?: IdType;
  readonly by: "item" | "user";
  readonly count: readonly string[];
  readonly bucket_s: number;
  readonly keep_s: number;
  readonly fields: { readonly [field: string]: CountersFieldDecl };
  readonly cache_ms?: number;
  readonly members?: never;
}
export type FamilyDecl = FieldFamilyDecl | IdsFamilyDecl | CountersFamilyDecl;
/** An event type of `events` (docs/events.md). */
export interface EventDecl {
  readonly user: IdType;
  readonly item: IdType;
  readonly value?: boolean;
  readonly marks?: { readonly family: string; readonly max: number; readonly ttl_s: number };
}
/** An index of `indexes` (docs/vectors.md, "Indexes"): the vec field of a hash or json family. */
export interface IndexDecl {
  readonly family: string;
  readonly field: string;
  readonly metric: "ip" | "cosine" | "l2";
  readonly refresh_s?: number;
  readonly max_items?: number;
}
export interface SchemaDecl {
  readonly schema_version: 1;
  readonly events?: { readonly [type: string]: EventDecl };
  readonly event_log?: { readonly sink: string };
  readonly families: { readonly [name: string]: FamilyDecl };
  readonly indexes?: { readonly [name: string]: IndexDecl };
}

/** The demo schema: what a plans folder without `schema.json` uses (docs/data.md). */
export const DEMO_SCHEMA = {
  schema_version: 1,
  events: {
    impression: { user: "i64", item: "i64", marks: { family: "served", max: 500, ttl_s: 604800 } },
    click: { user: "i64", item: "i64" },
  },
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
    served: { type: "zset", key: "served:{id}" },
    user_emb: { type: "hash", key: "emb:user:{id}", fields: { emb: "vec:32" } },
    item_emb: { type: "hash", key: "emb:item:{id}", fields: { emb: "vec:32" } },
    item_counts: {
      type: "counters",
      key: "cnt:item:{id}",
      by: "item",
      count: ["impression", "click"],
      bucket_s: 3600,
      keep_s: 604800,
      fields: {
        clicks_1d: { sum: "click", window_s: 86400 },
        imps_1d: { sum: "impression", window_s: 86400 },
        ctr_1d: { rate: ["click", "impression"], window_s: 86400, prior: [1, 50] },
      },
    },
    user_counts: {
      type: "counters",
      key: "cnt:user:{id}",
      by: "user",
      count: ["impression", "click"],
      bucket_s: 3600,
      keep_s: 604800,
      fields: { clicks_1d: { sum: "click", window_s: 86400 }, imps_1d: { sum: "impression", window_s: 86400 } },
    },
  },
  indexes: {
    items: { family: "item_emb", field: "emb", metric: "ip", refresh_s: 300, max_items: 500000 },
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
/** The column type of a field: a `bool` field is an i64 column holding 0 or 1; a counters field an f64. */
export type FieldCol<T> = T extends "bool" ? "i64" : T extends "i64" | "f64" | "str" | VecType ? T : T extends CountersFieldDecl ? "f64" : never;
export type FieldCols<F, K extends string> = { [k in K]: FieldCol<FieldsOf<F>[k & keyof FieldsOf<F>]> };
export type TypeOfFamily<S extends SchemaDecl, N> = N extends keyof Fams<S> ? Fams<S>[N]["type"] : never;
/** The names of S's indexes, and the id type of the family index I holds. */
export type IndexName<S extends SchemaDecl> = keyof NonNullable<S["indexes"]> & string;
export type IndexIdOf<S extends SchemaDecl, I extends IndexName<S>> = IdOf<Fams<S>[NonNullable<S["indexes"]>[I]["family"] & keyof Fams<S>]>;

// ---- the runtime value, checked ----------------------------------------------------------

export interface Family {
  readonly name: string;
  readonly type: FamilyType;
  readonly key: string;
  readonly id: IdType;
  readonly members: IdType;
  /** Declared fields in declaration order, with their types (bool → i64; a counters field is f64). */
  readonly fields: ReadonlyMap<string, FieldType>;
  /** A counters family's `by`: which id of an event keys it (viewer reads only a `user` one). */
  readonly by?: "item" | "user";
}
export interface Schema {
  /** Where the schema came from, for messages: "schema.json" of a folder, or "the demo schema". */
  readonly source: string;
  readonly families: ReadonlyMap<string, Family>;
  /** `indexes`: name → the family and vec field it holds (the server checks the rest). */
  readonly indexes: ReadonlyMap<string, { readonly family: Family; readonly field: string }>;
  /** The schema as declared, for comparing with a folder's schema.json. */
  readonly decl: SchemaDecl;
}

const NAME_RE = /^[a-z_][a-z0-9_]{0,63}$/;
const FAMILY_TYPES: readonly FamilyType[] = ["hash", "json", "list", "zset", "set", "counters"];
const FIELD_TYPES: readonly FieldType[] = ["i64", "f64", "str", "bool"];
/** "vec:D" with D 1..4096, no sign or leading zero (the server's rule). */
const isVecField = (t: unknown): t is VecType =>
  typeof t === "string" && /^vec:[1-9][0-9]{0,3}$/.test(t) && Number(t.slice(4)) <= 4096;
const ID_TYPES: readonly IdType[] = ["i64", "str"];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Checks a schema value (the rules of docs/data.md); throws a PlanError naming `source` and the member. */
export function checkSchema(v: unknown, source: string): Schema {
  const bad = (where: string, msg: string): never => {
    throw new PlanError(`${source}: ${where}: ${msg}`);
  };
  if (!isObj(v)) bad("(top)", "must be an object {schema_version, families}");
  const top = v as Record<string, unknown>;
  const TOP = ["schema_version", "events", "event_log", "families", "indexes"];
  for (const k of Object.keys(top)) if (!TOP.includes(k)) bad(k, `unknown member (allowed: ${TOP.join(", ")})`);
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
    const allowed =
      type === "counters" ? ["type", "key", "id", "by", "count", "bucket_s", "keep_s", "fields", "cache_ms"] : ["type", "key", "id", withFields ? "fields" : "members"];
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
    let by: "item" | "user" | undefined;
    if (type === "counters") {
      by = checkCounters(fam, w, bad, fields);
    } else if (withFields) {
      if (!isObj(fam.fields)) bad(`${w}.fields`, `a ${type} family needs fields: field name → i64, f64, str, bool or vec:D`);
      const fs = fam.fields as Record<string, unknown>;
      const fnames = Object.keys(fs);
      if (fnames.length > 1024) bad(`${w}.fields`, `${fnames.length} fields; at most 1024`);
      for (const fname of fnames) {
        if (!NAME_RE.test(fname)) bad(`${w}.fields.${fname}`, "a field name must match [a-z_][a-z0-9_]{0,63}");
        const ft = fs[fname] as FieldType;
        if (!FIELD_TYPES.includes(ft) && !isVecField(ft))
          bad(`${w}.fields.${fname}`, `${JSON.stringify(fs[fname])} is not one of ${FIELD_TYPES.join(", ")}, vec:D (D 1..4096)`);
        fields.set(fname, ft);
      }
    }
    out.set(name, { name, type, key: k, id: idType, members, fields, ...(by ? { by } : {}) });
  }
  checkEvents(top, out, bad);
  const indexes = new Map<string, { family: Family; field: string }>();
  if (top.indexes !== undefined) {
    if (!isObj(top.indexes)) bad("indexes", "must be an object: index name → {family, field, metric}");
    for (const [name, def] of Object.entries(top.indexes as Record<string, unknown>)) {
      const w = `indexes.${name}`;
      if (!isObj(def)) bad(w, "must be an object {family, field, metric}");
      const d = def as Record<string, unknown>;
      const fam = out.get(d.family as string) ?? bad(`${w}.family`, `unknown family ${JSON.stringify(d.family)}`);
      const ft = fam.fields.get(d.field as string);
      if (!ft || !isVecField(ft)) bad(`${w}.field`, `${JSON.stringify(d.field)} is no vec:D field of '${fam.name}'`);
      indexes.set(name, { family: fam, field: d.field as string });
    }
  }
  return { source, families: out, indexes, decl: v as unknown as SchemaDecl };
}

type Bad = (where: string, msg: string) => never;
const isInt = (v: unknown, lo: number, hi: number): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= lo && v <= hi;

/** A counters family's members (docs/events.md); its fields go into `fields` as f64. Returns its `by`. */
function checkCounters(fam: Record<string, unknown>, w: string, bad: Bad, fields: Map<string, FieldType>): "item" | "user" {
  if (fam.by !== "item" && fam.by !== "user") bad(`${w}.by`, `must be "item" or "user", got ${JSON.stringify(fam.by)}`);
  if (!Array.isArray(fam.count) || fam.count.length === 0 || fam.count.some((t) => typeof t !== "string"))
    bad(`${w}.count`, "must be a non-empty list of event types");
  const count = fam.count as string[];
  if (new Set(count).size !== count.length) bad(`${w}.count`, "lists an event type twice");
  if (!isInt(fam.bucket_s, 1, 86400)) bad(`${w}.bucket_s`, `must be an integer 1..86400, got ${JSON.stringify(fam.bucket_s)}`);
  const bs = fam.bucket_s as number;
  if (!isInt(fam.keep_s, bs, bs * 1000) || (fam.keep_s as number) % bs !== 0)
    bad(`${w}.keep_s`, `must be a multiple of bucket_s (${bs}), at most 1000 buckets, got ${JSON.stringify(fam.keep_s)}`);
  const keep = fam.keep_s as number;
  if (fam.cache_ms !== undefined && !isInt(fam.cache_ms, 0, 60000)) bad(`${w}.cache_ms`, `must be an integer 0..60000, got ${JSON.stringify(fam.cache_ms)}`);
  if (!isObj(fam.fields)) bad(`${w}.fields`, "a counters family needs fields: name → {sum, window_s} or {rate, window_s, prior}");
  const fs = fam.fields as Record<string, unknown>;
  for (const fname of Object.keys(fs)) {
    const fw = `${w}.fields.${fname}`;
    if (!NAME_RE.test(fname)) bad(fw, "a field name must match [a-z_][a-z0-9_]{0,63}");
    const f = fs[fname];
    if (!isObj(f)) bad(fw, "must be an object {sum, window_s} or {rate, window_s, prior}");
    const fo = f as Record<string, unknown>;
    const counted = (t: unknown, where: string) => {
      if (typeof t !== "string" || !count.includes(t)) bad(`${fw}.${where}`, `${JSON.stringify(t)} is not one of count (${count.join(", ")})`);
    };
    if ("sum" in fo) {
      for (const k of Object.keys(fo)) if (k !== "sum" && k !== "window_s") bad(`${fw}.${k}`, "unknown member of a sum (allowed: sum, window_s)");
      counted(fo.sum, "sum");
    } else if ("rate" in fo) {
      for (const k of Object.keys(fo)) if (!["rate", "window_s", "prior"].includes(k)) bad(`${fw}.${k}`, "unknown member of a rate (allowed: rate, window_s, prior)");
      if (!Array.isArray(fo.rate) || fo.rate.length !== 2) bad(`${fw}.rate`, "must be [NUM, DEN], two counted event types");
      (fo.rate as unknown[]).forEach((t, i) => counted(t, `rate[${i}]`));
      if (fo.prior !== undefined && (!Array.isArray(fo.prior) || fo.prior.length !== 2 || fo.prior.some((x) => typeof x !== "number" || !Number.isFinite(x) || x < 0)))
        bad(`${fw}.prior`, `must be two finite numbers >= 0, got ${JSON.stringify(fo.prior)}`);
    } else bad(fw, "must hold sum or rate");
    const ws = fo.window_s;
    if (!isInt(ws, bs, keep) || ws % bs !== 0) bad(`${fw}.window_s`, `must be a multiple of bucket_s (${bs}) from ${bs} to keep_s (${keep}), got ${JSON.stringify(ws)}`);
    fields.set(fname, "f64");
  }
  return fam.by as "item" | "user";
}

/** `events` and `event_log` (docs/events.md): id types, marks on a fitting zset, counted types declared. */
function checkEvents(top: Record<string, unknown>, fams: ReadonlyMap<string, Family>, bad: Bad): void {
  const events = top.events ?? {};
  if (!isObj(events)) bad("events", "must be an object: event type → {user, item, value?, marks?}");
  const ev = events as Record<string, unknown>;
  if (top.event_log !== undefined) {
    const log = top.event_log;
    if (top.events === undefined) bad("event_log", "only with events");
    if (!isObj(log) || Object.keys(log).join() !== "sink" || typeof log.sink !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(log.sink))
      bad("event_log", "must be {sink: a --served-log sink's name}");
  }
  for (const [name, e] of Object.entries(ev)) {
    const w = `event type '${name}'`;
    if (!NAME_RE.test(name)) bad(w, "an event type's name must match [a-z_][a-z0-9_]{0,63}");
    if (!isObj(e)) bad(w, "must be an object {user, item, value?, marks?}");
    for (const k of Object.keys(e)) if (!["user", "item", "value", "marks"].includes(k)) bad(`${w}: ${k}`, "unknown member (allowed: user, item, value, marks)");
    for (const k of ["user", "item"]) if (!ID_TYPES.includes(e[k] as IdType)) bad(`${w}: ${k}`, `must be i64 or str, got ${JSON.stringify(e[k])}`);
    if (e.value !== undefined && typeof e.value !== "boolean") bad(`${w}: value`, "must be true or false");
    if (e.marks !== undefined) {
      const m = e.marks;
      if (!isObj(m)) bad(`${w}: marks`, "must be {family, max, ttl_s}");
      const f = typeof m.family === "string" ? fams.get(m.family) : undefined;
      if (!f || f.type !== "zset") bad(`${w}: marks.family`, `${JSON.stringify(m.family)} is not a zset family`);
      if (f.id !== e.user) bad(`${w}: marks.family`, `zset '${f.name}' is keyed by ${f.id} ids but the user ids are ${e.user}`);
      if (f.members !== e.item) bad(`${w}: marks.family`, `zset '${f.name}' holds ${f.members} members but the item ids are ${e.item}`);
      if (!isInt(m.max, 1, 100000)) bad(`${w}: marks.max`, `must be an integer 1..100000, got ${JSON.stringify(m.max)}`);
      if (!isInt(m.ttl_s, 1, 316224000)) bad(`${w}: marks.ttl_s`, `must be an integer 1..316224000, got ${JSON.stringify(m.ttl_s)}`);
    }
  }
  for (const f of fams.values()) {
    if (f.type !== "counters") continue;
    const decl = (top.families as Record<string, Record<string, unknown>>)[f.name];
    for (const t of decl.count as string[]) {
      const e = ev[t] as Record<string, unknown> | undefined;
      if (!e) bad(`families.${f.name}.count`, `'${t}' is not a declared event type`);
      if (e[f.by!] !== f.id) bad(`families.${f.name}.by`, `event type '${t}' has ${e[f.by!]} ${f.by} ids but the family is keyed by ${f.id}`);
    }
  }
}

/** The column type a field becomes: bool → i64 (0/1). */
export function fieldCol(t: FieldType): ColType {
  return t === "bool" ? "i64" : t;
}
