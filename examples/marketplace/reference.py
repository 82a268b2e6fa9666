#!/usr/bin/python3
"""The marketplace's reference ranker: what rankd must answer for the `market` plan, computed
by reading Redis directly (docs/rank-your-own-data.md). End-to-end tests compare rankd's
response with it.

    examples/marketplace/reference.py --redis redis://127.0.0.1:6379/0 --account acct-000042 \\
        [--encoding native|i64] [--prefix P] [--param limit=10 --param w_rec=2.5 ...]

prints {"plan", "user_id", "items": [{"id", "score", "seller", "price", "title"}, ...]}.
As a module: rank(redis_url, account, params=None, encoding="native", prefix="").

It interprets the compiled plan (plans/market.plan.json, or i64/market.plan.json) over the
folder's schema.json with the semantics of docs/plan.md, written independently of the
server: the IO ops read the same keys (pipelined), a value that does not parse as its
declared type is null, a JSON document that is not an object (or not JSON) makes the whole
row null, nulls propagate through arithmetic (division by zero, log of a non-positive
number and non-finite results are null too), a comparison with null is false, `dedupe`
keeps the first row, `sort` is stable, descending, nulls last. A viewer whose key does not
exist gives zero rows, hence an empty answer.
"""
import argparse
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mklib import ENCODINGS, Redis  # noqa: E402

I64_MIN, I64_MAX = -(2 ** 63), 2 ** 63 - 1
INT_RE = re.compile(r"^-?[0-9]+$")
FLOAT_RE = re.compile(r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
MAX_JSON = 1 << 20


def folder(encoding):
    return os.path.join(HERE, "plans" if encoding == "native" else "i64")


def load(encoding, plan="market"):
    d = folder(encoding)
    with open(os.path.join(d, f"{plan}.plan.json")) as f:
        p = json.load(f)
    with open(os.path.join(d, "schema.json")) as f:
        s = json.load(f)
    return p, s


# ---- values of Redis ------------------------------------------------------------------

def parse_id(text, t):
    """An id or member of type t (i64 | str) from its Redis bytes; None when it does not parse."""
    s = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    if t == "str":
        return s
    if INT_RE.match(s):
        v = int(s)
        if I64_MIN <= v <= I64_MAX:
            return v
    return None


def id_text(v):
    return str(v)


def parse_hash_value(b, t):
    """A hash field's text as its declared type (bool → 0/1); None when missing or bad."""
    if b is None:
        return None
    s = b.decode("utf-8", errors="replace")
    if t == "str":
        return s
    if t == "i64":
        return int(s) if INT_RE.match(s) and I64_MIN <= int(s) <= I64_MAX else None
    if t == "f64":
        if not FLOAT_RE.match(s):
            return None
        v = float(s)
        return v if math.isfinite(v) else None
    if t == "bool":
        return {"0": 0, "1": 1, "false": 0, "true": 1}.get(s)
    raise ValueError(t)


def parse_json_member(v, t):
    """A JSON member as its declared type; None when missing or of the wrong JSON type."""
    if v is None:
        return None
    if t == "str":
        return v if isinstance(v, str) else None
    if t == "i64":
        return v if isinstance(v, int) and not isinstance(v, bool) and I64_MIN <= v <= I64_MAX else None
    if t == "f64":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        v = float(v)
        return v if math.isfinite(v) else None
    if t == "bool":
        return (1 if v else 0) if isinstance(v, bool) else None
    raise ValueError(t)


def _reject_constant(c):
    raise ValueError(f"not JSON: {c}")


def parse_json_doc(b):
    """The document's object, or None for a missing key, non-JSON, a non-object, or > 1 MiB."""
    if b is None or len(b) > MAX_JSON:
        return None
    try:
        doc = json.loads(b.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def col_type(t):
    return "i64" if t == "bool" else t


# ---- expressions and predicates (docs/plan.md) ----------------------------------------

def finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class Env:
    def __init__(self, types, params, ptypes):
        self.types = types  # column → type
        self.params = params
        self.ptypes = ptypes


def etype(n, env):
    if "const" in n:
        v = n["const"]
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "i64"
        if isinstance(v, float):
            return "f64"
        return "str"
    if "key" in n:
        return env.types.get(n["key"], "null")
    if "param" in n:
        return env.ptypes[n["param"]]
    op = n["op"]
    if op in ("/", "log", "log1p", "exp", "sqrt", "pow"):
        return "f64"
    args = n["args"][1:] if op == "if" else n["args"]
    ts = {etype(a, env) for a in args} - {"null"}
    if not ts:
        return "null"
    if ts <= {"i64"}:
        return "i64"
    if ts <= {"i64", "f64"}:
        return "f64"
    return ts.pop()


def i64(v):
    return v if v is None or I64_MIN <= v <= I64_MAX else None


def ev(n, row, env):
    if "const" in n:
        return n["const"]
    if "key" in n:
        return row.get(n["key"])
    if "param" in n:
        return env.params[n["param"]]
    op, args = n["op"], n["args"]
    if op == "if":
        return ev(args[1], row, env) if pr(args[0], row, env) else ev(args[2], row, env)
    if op == "coalesce":
        t = etype(n, env)
        for a in args:
            v = ev(a, row, env)
            if v is not None:
                return float(v) if t == "f64" else v
        return None
    vals = [ev(a, row, env) for a in args]
    if any(v is None for v in vals):
        return None
    t = etype(n, env)
    if t == "f64":
        vals = [float(v) for v in vals]
    if op in ("+", "-", "*"):
        acc = vals[0]
        for v in vals[1:]:
            acc = acc + v if op == "+" else acc - v if op == "-" else acc * v
            if t == "i64":
                acc = i64(acc)
                if acc is None:
                    return None
        return finite(acc)
    if op == "/":
        acc = vals[0]
        for v in vals[1:]:
            if v == 0:
                return None
            acc = acc / v
        return finite(acc)
    if op in ("min", "max"):
        return (min if op == "min" else max)(vals)
    if op == "neg":
        return i64(-vals[0]) if t == "i64" else finite(-vals[0])
    if op == "abs":
        return i64(abs(vals[0])) if t == "i64" else finite(abs(vals[0]))
    x = float(vals[0])
    try:
        if op == "log":
            return finite(math.log(x)) if x > 0 else None
        if op == "log1p":
            return finite(math.log1p(x)) if x > -1 else None
        if op == "exp":
            return finite(math.exp(x))
        if op == "sqrt":
            return finite(math.sqrt(x)) if x >= 0 else None
        if op == "pow":
            return finite(math.pow(x, float(vals[1])))
    except (OverflowError, ValueError):
        return None
    raise ValueError(f"unknown op {op}")


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def cmp(op, a, b):
    if a is None or b is None:
        return False
    if is_num(a) != is_num(b):
        return False
    if isinstance(a, str):
        a, b = a.encode(), b.encode()
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def pr(n, row, env):
    op = n["op"]
    if op == "cmp":
        return cmp(n["cmp"], ev(n["lhs"], row, env), ev(n["rhs"], row, env))
    if op == "and":
        return all(pr(a, row, env) for a in n["args"])
    if op == "or":
        return any(pr(a, row, env) for a in n["args"])
    if op == "not":
        return not pr(n["arg"], row, env)
    if op == "in":
        v = ev(n["lhs"], row, env)
        return v is not None and any(cmp("==", v, c) for c in n["values"])
    if op == "is_null":
        return ev(n["arg"], row, env) is None
    if op == "regex":
        v = ev(n["lhs"], row, env)
        return isinstance(v, str) and re.search(n["pattern"], v) is not None
    raise ValueError(f"unknown predicate {op}")


# ---- the plan ----------------------------------------------------------------------------

DEFAULT_FAMILY = {"viewer": "user", "follow": "follow", "recommendation": "recs", "media": "media",
                  "features": "item", "seen_filter": "seen"}
DEFAULT_COUNT = {"follow": ("fanout", 100), "recommendation": ("fanout", 100), "media": ("per_author", 10)}


def resolve_params(plan, given):
    out, types = {}, {}
    for name, d in plan["params"].items():
        t = d["type"]
        v = given.get(name, d["default"])
        if t == "i64":
            v = int(v)
        elif t == "f64":
            v = float(v)
        elif t == "bool":
            v = v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")
        else:
            v = str(v)
        if "min" in d and v < d["min"] or "max" in d and v > d["max"]:
            raise ValueError(f"param {name}={v} outside {d.get('min')}..{d.get('max')}")
        out[name], types[name] = v, t
    unknown = set(given) - set(out)
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)}")
    return out, types


def rank(redis_url, account, params=None, encoding="native", prefix="", plan_name="market", r=None):
    """The `market` plan's answer for `account`: a list of {column: value} in rank order."""
    plan, schema = load(encoding, plan_name)
    fams = schema["families"]
    params, ptypes = resolve_params(plan, params or {})
    own = r is None
    r = r or Redis(redis_url)
    nodes = {n["node_id"]: n for n in plan["nodes"]}
    memo = {}

    def arg(v):
        return params[v["param"]] if isinstance(v, dict) and "param" in v else v

    def family(n):
        f = n["params"].get("family", DEFAULT_FAMILY[n["op"]])
        return f, fams[f]

    def key(fam, idv):
        return prefix + fam["key"].replace("{id}", id_text(idv))

    viewer_id = None

    def run(nid):
        nonlocal viewer_id
        if nid in memo:
            return memo[nid]
        n = nodes[nid]
        ins = [run(i) for i in n["inputs"]]
        op, p = n["op"], n["params"]
        if op == "viewer":
            name, fam = family(n)
            uid = parse_id(str(account), fam.get("id", "i64"))
            viewer_id = uid
            fields = p.get("fields", list(fam["fields"]))
            k = key(fam, uid)
            rows, types = [], {"id": fam.get("id", "i64")}
            for f in fields:
                types[f] = col_type(fam["fields"][f])
            if fam["type"] == "hash":
                exists, vals = r.pipeline([("EXISTS", k), ("HMGET", k, *fields)])
                if exists:
                    row = {"id": uid}
                    for f, b in zip(fields, vals):
                        row[f] = parse_hash_value(b, fam["fields"][f])
                    rows.append(row)
            else:
                b = r.call("GET", k)
                if b is not None:
                    doc = parse_json_doc(b) or {}
                    row = {"id": uid}
                    for f in fields:
                        row[f] = parse_json_member(doc.get(f), fam["fields"][f])
                    rows.append(row)
            out = (rows, types)
        elif op in ("follow", "recommendation", "media"):
            rows_in, types_in = ins[0]
            name, fam = family(n)
            cname, cdef = DEFAULT_COUNT[op]
            count = arg(p.get(cname, cdef))
            zset = fam["type"] == "zset"
            cmds = [("ZREVRANGE", key(fam, row["id"]), 0, count - 1, "WITHSCORES") if zset
                    else ("LRANGE", key(fam, row["id"]), 0, count - 1) for row in rows_in]
            replies = r.pipeline(cmds)
            mtype = fam.get("members", "i64")
            src = p.get("source_as", "author") if op == "media" else None
            score_as = p.get("score_as")
            types = {"id": mtype}
            if src:
                types[src] = types_in["id"]
            if score_as:
                types[score_as] = "f64"
            rows = []
            for row, rep in zip(rows_in, replies):
                pairs = list(zip(rep[0::2], rep[1::2])) if zset else [(m, None) for m in rep]
                for m, sc in pairs:
                    mid = parse_id(m, mtype)
                    if mid is None:
                        continue  # a member that does not parse: counted by the server, dropped here
                    out_row = {"id": mid}
                    if src:
                        out_row[src] = row["id"]
                    if score_as:
                        out_row[score_as] = float(sc)
                    rows.append(out_row)
            out = (rows, types)
        elif op == "concat":
            rows, types = [], {}
            for rs, ts in ins:
                types.update(ts)
                rows += rs
            out = (rows, types)
        elif op == "dedupe":
            rows_in, types = ins[0]
            k, seen, rows = p["key"], set(), []
            for row in rows_in:
                v = row.get(k)
                if v in seen:
                    continue
                seen.add(v)
                rows.append(row)
            out = (rows, types)
        elif op == "features":
            rows_in, types_in = ins[0]
            name, fam = family(n)
            fields = p["fields"]
            types = dict(types_in)
            for f in fields:
                types[f] = col_type(fam["fields"][f])
            if fam["type"] == "hash":
                replies = r.pipeline([("HMGET", key(fam, row["id"]), *fields) for row in rows_in]) if rows_in else []
                vals = [[parse_hash_value(b, fam["fields"][f]) for f, b in zip(fields, rep)] for rep in replies]
            else:
                replies = r.pipeline([("GET", key(fam, row["id"])) for row in rows_in]) if rows_in else []
                vals = []
                for b in replies:
                    doc = parse_json_doc(b) or {}
                    vals.append([parse_json_member(doc.get(f), fam["fields"][f]) for f in fields])
            rows = []
            for row, vs in zip(rows_in, vals):
                row = dict(row)
                row.update(zip(fields, vs))
                rows.append(row)
            out = (rows, types)
        elif op == "vm":
            rows_in, types_in = ins[0]
            expr = plan["expr_table"][p["expr"]]
            env = Env(types_in, params, ptypes)
            t = etype(expr, env)
            rows = []
            for row in rows_in:
                row = dict(row)
                v = ev(expr, row, env)
                row[p["out_key"]] = float(v) if t == "f64" and v is not None else v
                rows.append(row)
            out = (rows, {**types_in, p["out_key"]: t})
        elif op == "filter":
            rows_in, types = ins[0]
            pred = plan["pred_table"][p["pred"]]
            env = Env(types, params, ptypes)
            out = ([row for row in rows_in if pr(pred, row, env)], types)
        elif op == "seen_filter":
            rows_in, types = ins[0]
            name, fam = family(n)
            if viewer_id is None:
                raise ValueError("seen_filter needs the request's user_id (a viewer node)")
            k = key(fam, viewer_id)
            hits = r.pipeline([("SISMEMBER", k, id_text(row["id"])) for row in rows_in]) if rows_in else []
            out = ([row for row, h in zip(rows_in, hits) if not h], types)
        elif op == "sort":
            rows_in, types = ins[0]
            k, desc = p["key"], p["order"] == "desc"
            present = [row for row in rows_in if row.get(k) is not None]
            nulls = [row for row in rows_in if row.get(k) is None]
            # Python's sort is stable: ties keep their input order in either direction
            present.sort(key=(lambda row: _Desc(row[k])) if desc else (lambda row: _bytes(row[k])))
            out = (present + nulls, types)
        elif op == "take":
            rows_in, types = ins[0]
            out = (rows_in[: arg(p["count"])], types)
        else:
            raise ValueError(f"the reference ranker does not implement op {op}")
        memo[nid] = out
        return out

    try:
        # the viewer runs first: seen_filter reads the request's user_id
        for n in plan["nodes"]:
            if n["op"] == "viewer":
                run(n["node_id"])
        rows, types = run(plan["output"]["node"])
    finally:
        if own:
            r.close()
    cols = plan["output"].get("columns") or list(types)
    return [{c: row.get(c) for c in cols} for row in rows]


def _bytes(v):
    return v.encode() if isinstance(v, str) else v


class _Desc:
    """Sort key for a stable descending sort."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = _bytes(v)

    def __lt__(self, other):
        return self.v > other.v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--account", required=True, help="the account id (acct-000042, or 42 for --encoding i64)")
    ap.add_argument("--encoding", choices=ENCODINGS, default="native")
    ap.add_argument("--prefix", default="", help="the endpoint's key prefix (default: none)")
    ap.add_argument("--plan", default="market")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a request parameter (repeatable)")
    a = ap.parse_args(argv)
    given = {}
    for kv in a.param:
        k, sep, v = kv.partition("=")
        if not sep:
            ap.error(f"--param {kv!r}: expected NAME=VALUE")
        given[k] = v
    items = rank(a.redis, a.account, given, a.encoding, a.prefix, a.plan)
    uid = a.account if a.encoding == "native" else int(a.account)
    print(json.dumps({"plan": a.plan, "user_id": uid, "items": items}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
