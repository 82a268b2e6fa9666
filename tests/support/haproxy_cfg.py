"""Reads what the tests need from an HAProxy config (ops/haproxy.cfg): the health-check
timing of each server, from which the drain rule follows. A reader of the few keywords
used, not a parser of HAProxy's whole grammar. Standard library only."""
import re

# HAProxy's own defaults for a server's checks.
DEFAULT_INTER_MS = 2000
DEFAULT_FALL = 3
DEFAULT_RISE = 2


def duration_ms(text):
    """An HAProxy time ("1s", "500ms", "2m", "1500": milliseconds without a unit)."""
    m = re.fullmatch(r"(\d+)(us|ms|s|m|h|d)?", text)
    if not m:
        raise ValueError(f"not an HAProxy time: {text!r}")
    scale = {None: 1, "us": 0.001, "ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
    return int(m.group(1)) * scale[m.group(2)]


def sections(text):
    """[(section keyword + name, [lines])]: comments and blank lines dropped."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not raw[0].isspace():
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def _settings(words):
    """{keyword: value} of a server line's options (check, inter 1s, fall 2, ...)."""
    out = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("inter", "fall", "rise", "fastinter", "downinter") and i + 1 < len(words):
            out[w] = words[i + 1]
            i += 2
        else:
            out[w] = True
            i += 1
    return out


def server_checks(text):
    """{backend/server: {"check": bool, "inter_ms", "fall", "rise"}} for every server
    line, with default-server settings of its backend applied."""
    out = {}
    for head, lines in sections(text):
        kind, _, name = head.partition(" ")
        if kind not in ("backend", "listen"):
            continue
        defaults = {}
        for line in lines:
            words = line.split()
            if words[0] == "default-server":
                defaults.update(_settings(words[1:]))
            elif words[0] == "server":
                s = dict(defaults)
                s.update(_settings(words[3:]))
                out[f"{name.strip()}/{words[1]}"] = {
                    "check": bool(s.get("check")),
                    "inter_ms": duration_ms(s["inter"]) if "inter" in s else DEFAULT_INTER_MS,
                    "fall": int(s.get("fall", DEFAULT_FALL)),
                    "rise": int(s.get("rise", DEFAULT_RISE)),
                }
    return out


def min_drain_delay_ms(text):
    """The least --drain-delay-ms a replica behind this config needs: its balancer marks
    it down at most inter x fall after /readyz starts failing, plus 1 s to spare."""
    return max(s["inter_ms"] * s["fall"] for s in server_checks(text).values()) + 1000
