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


# One line per request (level info), with what tells a resent request from a served one:
# %rc, the connection retries ("+" first when the last one went to another server), and
# %ts, the termination state ("--": ended normally).
REQUEST_LOG_FORMAT = "request %b/%s status=%ST term=%ts retries=%rc"
_REQUEST_LINE = re.compile(r"request (\S+) status=(-?\d+) term=(\S\S) retries=(\+?)(\d+)")


def _replace_once(text, pattern, replacement):
    new, n = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if n != 1:
        raise ValueError(f"expected one line matching {pattern!r} in the HAProxy config, found {n}")
    return new


def with_request_log(text):
    """The config `text` (ops/haproxy.cfg) with two changes for a test that must see
    every request: each one logged on stderr (REQUEST_LOG_FORMAT, level info), and
    retry-on narrowed to conn-failure, a connect refused or reset before any byte of the
    request went out. A request a replica dropped after it was sent (what empty-response
    would resend unseen) then ends in the log or at the client as a failure. One thread:
    HAProxy drops a log line rather than wait when two threads write to stderr at once."""
    text = _replace_once(text, r"^(\s*)log stderr .*$", r"\1log stderr format raw local0 info\n\1nbthread 1")
    text = _replace_once(text, r"^(\s*)option httplog\b.*$",
                         r'\g<0>\n\1log-format "' + REQUEST_LOG_FORMAT + '"')
    return _replace_once(text, r"^(\s*)retry-on .*$", r"\1retry-on conn-failure")


def request_log(log_text):
    """[{"server", "status", "term", "retries", "redispatched"}] of every request line of
    a with_request_log config's log."""
    out = []
    for m in _REQUEST_LINE.finditer(log_text):
        out.append({"server": m.group(1), "status": int(m.group(2)), "term": m.group(3),
                    "redispatched": m.group(4) == "+", "retries": int(m.group(5))})
    return out
