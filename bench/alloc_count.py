#!/usr/bin/env python3
"""Reads the counter file of bench/alloc_hook.c (RANKD_ALLOC_COUNT_FILE), for bench/alloc.sh.

  alloc_count.py totals FILE
      one JSON object: allocations by kind, their sum, frees, bytes requested, samples
  alloc_count.py check FILE
      the counts of bench/alloc_hook_check; exits non-zero unless each kind is there
  alloc_count.py sites --before F0 --after F1 --maps MAPS [--allocs N] [--top 25]
                       [--frames 4] [--title T] [--markdown]
      the sampled call stacks of the allocations between two copies of the file (F0
      and F1, taken before and after a run), symbolised with the process's
      /proc/PID/maps (MAPS), grouped by their first FRAMES frames past the allocator,
      the TOP most frequent; --allocs scales the samples to allocations per request

The file layout (uint64 little-endian words) is alloc_hook.c's: a header of 8 words,
256 counter slots of 8 words, then the call-site table.
"""
import argparse
import bisect
import collections
import json
import os
import re
import struct
import subprocess
import sys

HEADER_WORDS, SLOTS, SLOT_WORDS = 8, 256, 8
SITE_FRAMES, SITE_CAPACITY = 20, 16384
SITE_WORDS = 4 + SITE_FRAMES
MAGIC = 0x31434F4C4C414B52
KINDS = ("malloc", "calloc", "realloc", "aligned", "frees", "bytes")
CHECK_EACH = 100000  # alloc_hook_check.cc's kEach


def read_file(path):
    data = open(path, "rb").read()
    if len(data) < 8 * (HEADER_WORDS + SLOTS * SLOT_WORDS):
        sys.exit(f"{path}: too short for a counter file")
    header = struct.unpack_from(f"<{HEADER_WORDS}Q", data, 0)
    if header[0] != MAGIC:
        sys.exit(f"{path}: not a counter file of alloc_hook.c")
    return header, data


def totals(path):
    header, data = read_file(path)
    sums = [0] * SLOT_WORDS
    for i in range(SLOTS):
        words = struct.unpack_from(f"<{SLOT_WORDS}Q", data, 8 * (HEADER_WORDS + i * SLOT_WORDS))
        sums = [a + b for a, b in zip(sums, words)]
    t = dict(zip(KINDS, sums))
    t["allocations"] = t["malloc"] + t["calloc"] + t["realloc"] + t["aligned"]
    t.update(pid=header[2], sample_every=header[3], threads=header[4], sites=header[5],
             sites_dropped=header[6], samples=header[7])
    return t


def sites(path):
    """{stack hash: (count, bytes, frames)} of the file's call-site table."""
    _, data = read_file(path)
    base = 8 * (HEADER_WORDS + SLOTS * SLOT_WORDS)
    out = {}
    for i in range(SITE_CAPACITY):
        words = struct.unpack_from(f"<{SITE_WORDS}Q", data, base + 8 * SITE_WORDS * i)
        key, count, nbytes, depth = words[:4]
        if key and depth:
            out[key] = (count, nbytes, words[4:4 + min(depth, SITE_FRAMES)])
    return out


class Symbolizer:
    """Address -> (file, "function") via /proc/PID/maps and addr2line (the symbol table if
    there is no debug info), or for a stripped library the nearest exported symbol."""

    def __init__(self, maps_path):
        self.maps = []  # (start, end, file offset, path)
        for line in open(maps_path):
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                self.maps.append((lo, hi, int(parts[2], 16), parts[5]))
        self.maps.sort()
        self.starts = [m[0] for m in self.maps]
        self.base = {}  # path -> load bias (the start of its mapping at offset 0)
        for lo, _, off, path in self.maps:
            if off == 0 and path not in self.base:
                self.base[path] = lo
        self.cache = {}
        self.dynsyms = {}
        self.dyn = {}

    def module(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and self.maps[i][0] <= addr < self.maps[i][1]:
            path = self.maps[i][3]
            bias = self.base.get(path, 0) if self.is_dyn(path) else 0
            return path, addr - bias
        return None, addr

    def is_dyn(self, path):  # PIE or shared object: its addresses move with the load bias
        if path not in self.dyn:
            with open(path, "rb") as f:
                self.dyn[path] = f.read(18)[16] == 3  # e_type ET_DYN
        return self.dyn[path]

    def resolve(self, addrs):
        by_module = collections.defaultdict(set)
        for a in addrs:
            if a not in self.cache:
                path, rel = self.module(a - 1)  # a return address: look up the call
                if path is None:
                    self.cache[a] = (None, f"0x{a:x}")
                else:
                    by_module[path].add((a, rel))
        for path, items in by_module.items():
            items = sorted(items)
            if self.has_symbols(path):
                names = self.addr2line(path, [rel for _, rel in items])
            else:  # addr2line would name the nearest exported symbol without a hint
                names = ["??"] * len(items)
            for (a, rel), name in zip(items, names):
                if name == "??":
                    name = self.nearest_dynsym(path, rel) or f"{os.path.basename(path)}+0x{rel:x}"
                self.cache[a] = (path, name)
        return [self.cache[a] for a in addrs]

    @staticmethod
    def has_symbols(path):
        """Whether the file has a full symbol table or debug info (its own or installed
        under /usr/lib/debug/.build-id), not only the exported symbols."""
        out = subprocess.run(["readelf", "-SW", "-n", path], capture_output=True, text=True).stdout
        if re.search(r"\] \.(symtab|debug_info) ", out):
            return True
        m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", out)
        return bool(m) and os.path.exists(f"/usr/lib/debug/.build-id/{m[1]}/{m[2]}.debug")

    @staticmethod
    def addr2line(path, rels):
        out = subprocess.run(["addr2line", "-a", "-f", "-C", "-i", "-e", path]
                             + [f"0x{r:x}" for r in rels],
                             capture_output=True, text=True).stdout.splitlines()
        # Per address: its line, then (function, file:line) pairs, innermost first
        # (-i: the functions inlined at that place, then those they were inlined into).
        names, cur, pos = [], None, 0
        for line in out:
            if re.fullmatch(r"0x[0-9a-f]+", line):
                if cur is not None:
                    names.append(cur)
                cur, pos = [], 0
                continue
            if cur is not None and pos % 2 == 0 and line != "??":
                cur.append(line)
            pos += 1
        if cur is not None:
            names.append(cur)
        return [" < ".join(n) if n else "??" for n in names] + ["??"] * (len(rels) - len(names))

    def nearest_dynsym(self, path, rel):
        if path not in self.dynsyms:
            syms = []
            out = subprocess.run(["nm", "-D", "-C", "--defined-only", path],
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[1] in "TtWi":
                    syms.append((int(parts[0], 16), parts[2].split("@")[0]))
            syms.sort()
            self.dynsyms[path] = syms
        syms = self.dynsyms[path]
        i = bisect.bisect_right(syms, (rel, chr(0x10FFFF))) - 1
        if i < 0:
            return None
        # A stripped library's static functions have no symbol: the nearest exported one
        # before the address may be another function, hence the offset and the "?".
        return f"{syms[i][1]}+0x{rel - syms[i][0]:x}? in {os.path.basename(path)}"


# Frames that are the allocator itself, not who asked: dropped from the top of a stack.
ALLOCATOR = re.compile(r"^(operator new|operator delete|__gnu_cxx::new_allocator|"
                       r"std::__new_allocator|malloc|calloc|realloc|__libc_|posix_memalign|"
                       r"aligned_alloc|memalign)")


def stacks(before, after, maps, frames_shown):
    """[(samples, bytes, [frame names])] of the samples taken between the two copies."""
    s0, s1 = sites(before) if before else {}, sites(after)
    sym = Symbolizer(maps)
    grouped = collections.Counter()
    grouped_bytes = collections.Counter()
    for key, (count, nbytes, frames) in s1.items():
        c0, b0, _ = s0.get(key, (0, 0, ()))
        if count <= c0:
            continue
        names = []
        for path, name in sym.resolve(list(frames)):
            if path and os.path.basename(path) == "alloc_hook.so":
                continue  # the hook's own frames
            if not names and ALLOCATOR.match(name.split(" < ")[-1]):
                continue
            names.append(name)
        key_names = tuple(names[:frames_shown]) or ("(allocator frames only)",)
        grouped[key_names] += count - c0
        grouped_bytes[key_names] += nbytes - b0
    return [(n, grouped_bytes[k], list(k)) for k, n in grouped.most_common()]


def function_target(name):
    """std::_Function_handler<SIG, F>::_M_invoke -> "std::function of F"."""
    head = "std::_Function_handler<"
    if not name.startswith(head):
        return name
    depth, last, i = 0, len(head), len(head)
    while i < len(name):
        c = name[i]
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            if depth == 0:
                return f"std::function of {name[last:i].strip()}"
            depth -= 1
        elif c == "," and depth == 0:
            last = i + 1
        i += 1
    return name


def short(name, width=110):
    """The name without argument lists, clone suffixes and the usual template noise."""
    name = function_target(name)
    for pat, rep in ((r"\(anonymous namespace\)::", ""), (r"std::__cxx11::", "std::"),
                     (r"std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
                      "std::string"),
                     (r", std::allocator<[^<>]*(?:<[^<>]*>[^<>]*)*> ?>", ">"),
                     (r" \[clone \.(?:lto_priv|constprop|isra|part|cold)[.0-9]*\]", ""),
                     (r"\((?:[^()]|\([^()]*\))*\)", "()")):
        name = re.sub(pat, rep, name)
    return name if len(name) <= width else name[:width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("totals").add_argument("file")
    sub.add_parser("check").add_argument("file")
    s = sub.add_parser("sites")
    s.add_argument("--before")
    s.add_argument("--after", required=True)
    s.add_argument("--maps", required=True)
    s.add_argument("--allocs", type=float, help="allocations per request, to scale samples")
    s.add_argument("--top", type=int, default=25)
    s.add_argument("--frames", type=int, default=4)
    s.add_argument("--title", default="")
    s.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    if args.cmd == "totals":
        print(json.dumps(totals(args.file)))
    elif args.cmd == "check":
        t = totals(args.file)
        want = {"malloc": 3 * CHECK_EACH, "calloc": CHECK_EACH, "realloc": CHECK_EACH,
                "aligned": CHECK_EACH, "frees": 5 * CHECK_EACH}
        bad = {k: (t[k], v) for k, v in want.items() if not v <= t[k] <= v + 1000}
        if bad:
            sys.exit(f"alloc hook self-check failed (counted, expected): {bad}")
    else:
        rows = stacks(args.before, args.after, args.maps, args.frames)
        total = sum(n for n, _, _ in rows) or 1
        if args.markdown:
            print(f"| {args.title} share | allocs/req | bytes/alloc | call stack (innermost first) |")
            print("|---:|---:|---:|---|")
        elif args.title:
            print(f"== {args.title}: top {args.top} allocation stacks of {total} samples "
                  f"(first {args.frames} frames past the allocator) ==")
        for n, nbytes, names in rows[:args.top]:
            share = n / total
            per_req = f"{share * args.allocs:.1f}" if args.allocs else "-"
            if args.markdown:
                stack = " ← ".join(f"`{short(x, 70)}`" for x in names)
                print(f"| {share:.1%} | {per_req} | {nbytes // n} | {stack} |")
            else:
                print(f"{share:6.1%}  {per_req:>7} allocs/req  {nbytes // n:>6} B/alloc")
                for x in names:
                    print(f"          {short(x)}")


if __name__ == "__main__":
    main()
