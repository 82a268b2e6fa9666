#!/usr/bin/env python3
"""The measuring half of `ops/bench overload` (bench/overload.sh starts the servers).

Reads a JSON config (argv[1]): the variants to measure (current, and base with BASE_REV:
port and pid of each started rankd), plans, the quality plan, durations, wrk settings.
Everything goes through bench/wrk_paced.lua (open loop, latency from each request's
scheduled time, goodput = 2xx within the deadline): per variant and plan, capacity C by
an open-loop sweep, then steps at multiples of C, then optionally a Redis slow-down.
Progress goes to stderr, the figures (JSON lines) to stdout.
"""

import json
import math
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request

cfg = json.load(open(sys.argv[1]))
ROOT = cfg["root"]
PACED = os.path.join(ROOT, "bench", "wrk_paced.lua")
REPORT = os.path.join(ROOT, "bench", "wrk_report.lua")
DEADLINE_MS = cfg["deadline_ms"]
THREADS = cfg["wrk_threads"]
MAX_CONNS = cfg["max_conns"]
MIN_CONNS = 64
CONN_SECONDS = 0.4  # connections = rate x this: every request may take 1.6 deadlines
TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")
RULE = 0.99  # the capacity rule: >= 99% of the offered requests good


def log(msg):
    print(f"overload: {msg}", file=sys.stderr, flush=True)


def conns_for(rate):
    n = max(MIN_CONNS, min(MAX_CONNS, math.ceil(rate * CONN_SECONDS)))
    return max(n - n % THREADS, THREADS)


def cpu_ticks(pid):
    t = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                f = open(f"/proc/{pid}/task/{task}/stat").read()
                fields = f[f.rindex(")") + 2:].split()
                t += int(fields[11]) + int(fields[12])
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return t


def machine_busy_ticks():
    """Busy CPU time of the whole machine (every process, /proc/stat), in clock ticks."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def rss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def settle(v):
    """Waits until the variant's rankd and Redis are idle (a previous step's backlog gone)."""
    pids = [cfg["variants"][v]["pid"], cfg["redis_pid"]]
    prev = sum(cpu_ticks(p) for p in pids)
    for _ in range(60):  # 15 s at most
        time.sleep(0.25)
        cur = sum(cpu_ticks(p) for p in pids)
        if (cur - prev) * TICK_US < 0.04 * 0.25e6:  # under 4% of a core
            return
        prev = cur
    log(f"{v}: rankd still busy after 15 s of settling")


def body(plan):
    return '{"plan":"%s","user_id":$USER,"deadline_ms":%d}' % (plan, DEADLINE_MS)


OTHER_CPU = []  # every paced run's other_cpu


def run_wrk(args, env):
    """Runs wrk, returns (its JSON line, wrk's CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["wrk", *args], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [l for l in out.splitlines() if l.startswith('{"rps"')]
    if not lines:
        raise RuntimeError(f"wrk printed no report: {out}")
    return json.loads(lines[-1]), cpu


def paced(v, plan, rate, warm, measure, tail, timeline_ms=None):
    """One open-loop run at `rate` req/s; counted: slots from warm to warm+measure s."""
    url = f"http://127.0.0.1:{cfg['variants'][v]['port']}/rank"
    conns = conns_for(rate)
    secs = math.ceil(warm + measure + tail)
    env = {"WRK_BODY": body(plan), "WRK_USERS": str(cfg["viewers"]), "WRK_RATE": f"{rate:.1f}",
           "WRK_PACE_THREADS": str(THREADS), "WRK_CONNS": str(conns),
           "WRK_DEADLINE_MS": str(DEADLINE_MS), "WRK_WINDOW": f"{warm}:{measure}"}
    if timeline_ms:
        env["WRK_TIMELINE_MS"] = str(timeline_ms)
    ours = [x["pid"] for x in cfg["variants"].values()] + [cfg["redis_pid"]]
    m0, o0, t0 = machine_busy_ticks(), sum(cpu_ticks(p) for p in ours), time.monotonic()
    r, cpu = run_wrk([f"-t{THREADS}", f"-c{conns}", f"-d{secs}s", "--timeout", "10s", "-s", PACED,
                      url], env)
    m1, o1, t1 = machine_busy_ticks(), sum(cpu_ticks(p) for p in ours), time.monotonic()
    r["wrk_cpu_share"] = round(cpu / secs, 3)  # of one core, over the whole wrk run
    # The CPU of everything but the bench's rankd, Redis and wrk (the machine's other users),
    # in cores over the run: what disturbed it.
    r["other_cpu"] = round(max(0.0, ((m1 - m0) - (o1 - o0)) * TICK_US / 1e6 - cpu) / (t1 - t0), 2)
    OTHER_CPU.append(r["other_cpu"])
    r["good_share"] = r["good"] / r["offered"] if r["offered"] else 0.0
    return r


def closed_loop_estimate(v, plan):
    url = f"http://127.0.0.1:{cfg['variants'][v]['port']}/rank"
    env = {"WRK_BODY": '{"plan":"%s","user_id":$USER,"deadline_ms":2000}' % plan,
           "WRK_USERS": str(cfg["viewers"])}
    run_wrk(["-t1", "-c16", "-d1s", "-s", REPORT, url], env)  # warm-up
    r, _ = run_wrk(["-t1", "-c16", "-d2s", "-s", REPORT, url], env)
    return r["rps"]


def refusal_buckets(v):
    """rankd_admission_refusal_seconds buckets summed over shards: {le: count}, or None."""
    port = cfg["variants"][v]["port"]
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    return parse_refusal_buckets(text)


def parse_refusal_buckets(text):
    out = {}
    for m in re.finditer(r'^rankd_admission_refusal_seconds_bucket\{([^}]*)\}\s+(\S+)', text, re.M):
        le = re.search(r'le="([^"]+)"', m.group(1))
        if not le:
            continue
        k = math.inf if le.group(1) == "+Inf" else float(le.group(1))
        out[k] = out.get(k, 0) + float(m.group(2))
    return out or None


def histogram_p(before, after, p):
    """(p-th percentile in seconds from cumulative bucket deltas, count, past the last
    bound), interpolating linearly inside the bucket; the last finite bound (a lower bound
    of the percentile) when it falls in +Inf."""
    if not after:
        return None, 0, False
    les = sorted(after)
    cum = [after[le] - (before or {}).get(le, 0) for le in les]
    total = cum[-1]
    if total <= 0:
        return None, 0, False
    want = total * p / 100
    prev_le, prev_c = 0.0, 0.0
    for le, c in zip(les, cum):
        if c >= want:
            if math.isinf(le):
                return prev_le, total, True
            frac = (want - prev_c) / (c - prev_c) if c > prev_c else 1.0
            return prev_le + (le - prev_le) * frac, total, False
        prev_le, prev_c = le, c
    return prev_le, total, True


class Sweep:
    """One side's search for C: x1.2 up / x0.8 down from 0.9 x the closed-loop estimate
    until a pass and a fail, then bisection to SWEEP_RESOLUTION; the final C is run once
    more and must pass again (else it counts as a fail and the bisection goes on between it
    and the highest pass below it)."""

    def __init__(self, est):
        self.est, self.rate, self.lo, self.hi = est, 0.9 * est, None, None
        self.steps, self.confirming, self.done = [], False, False

    def record(self, r):
        ok = r["good_share"] >= RULE
        self.steps.append({"rate": round(self.rate, 1), "good_share": round(r["good_share"], 4),
                           "p99_ms": round(r["p99_us"] / 1e3, 1), "sent_rps": r["sent_rps"],
                           "dropped": r["dropped"], "other_cpu": r["other_cpu"],
                           "confirm": self.confirming})
        if self.confirming:
            self.confirming = False
            if ok:
                self.done = True
                return ok
            # a pass and a fail at this rate: not C; the next pass below it is the new lo
            below = [x["rate"] for x in self.steps if x["good_share"] >= RULE
                     and x["rate"] < round(self.rate, 1)]
            self.lo = max(below) if below else None
            self.hi = self.rate
            self._next()
            return ok
        if ok:
            self.lo = self.rate
        else:
            self.hi = self.rate if self.hi is None else min(self.hi, self.rate)
        self._next()
        return ok

    def _next(self):
        if self.lo is not None and self.hi is not None:
            if self.hi / self.lo <= 1 + cfg["sweep_resolution"]:
                self.rate, self.confirming = self.lo, True
            else:
                self.rate = (self.lo + self.hi) / 2
        elif self.lo is not None:
            self.rate = self.lo * 1.2
        else:
            self.rate = self.hi * 0.8

    def capacity(self):
        if self.lo is not None:
            return self.lo
        passed = [s["rate"] for s in self.steps if s["good_share"] >= RULE]
        return max(passed) if passed else min(s["rate"] for s in self.steps)


def sweep_all(variants, plan):
    """Every side's sweep, in lockstep (one step of each in turn, the order swapped every
    step) so that the shared machine's slow minutes fall on all alike -> {v: Sweep}."""
    sweeps = {}
    for v in variants:
        settle(v)
        est = closed_loop_estimate(v, plan)
        log(f"{v} {plan}: closed-loop estimate {est:.0f} req/s")
        sweeps[v] = Sweep(est)
    order = list(variants)
    for _ in range(cfg["sweep_steps"]):
        for v in order:
            sw = sweeps[v]
            if sw.done:
                continue
            settle(v)
            rate = sw.rate
            r = paced(v, plan, rate, cfg["sweep_warm"], cfg["sweep_measure"], cfg["sweep_tail"])
            ok = sw.record(r)
            log(f"{v} {plan}: sweep {rate:.0f} req/s: good {r['good_share']:.4f} p99 "
                f"{r['p99_us'] / 1e3:.1f} ms sent {r['sent_rps']:.0f}/s dropped {r['dropped']} other CPU "
                f"{r['other_cpu']:.2f} -> "
                f"{'pass' if ok else 'fail'}")
        order.reverse()
        if all(sw.done for sw in sweeps.values()):
            break
    for v, sw in sweeps.items():
        if not sw.done:
            log(f"{v} {plan}: the sweep did not converge in {cfg['sweep_steps']} steps; "
                f"C = {sw.capacity():.0f} req/s (the best pass, else the lowest rate tried)")
    return sweeps


def step(v, plan, rate):
    settle(v)
    pid = cfg["variants"][v]["pid"]
    b0 = refusal_buckets(v)
    t0 = cpu_ticks(pid)
    r = paced(v, plan, rate, cfg["warm"], cfg["duration"], cfg["tail"])
    t1 = cpu_ticks(pid)
    b1 = refusal_buckets(v)
    r["rankd_cpu_share"] = round((t1 - t0) * TICK_US / 1e6 / math.ceil(
        cfg["warm"] + cfg["duration"] + cfg["tail"]), 3)
    p99, n, past = histogram_p(b0, b1, 99)
    r["refusal_p99_s"], r["refusals_timed"], r["refusal_p99_past_last_bucket"] = p99, n, past
    r["refusal_metric"] = b1 is not None
    st = r["status"]
    r["n_503"] = st.get("503", 0)
    r["n_504"] = st.get("504", 0)
    r["n_other"] = sum(c for s, c in st.items() if not s.startswith("2")) - r["n_503"] - r["n_504"]
    r["not_2xx"] = r["offered"] - sum(c for s, c in st.items() if s.startswith("2"))
    log(f"{v} {plan}: {rate:.0f} req/s offered: goodput {r['goodput_rps']:.0f}/s, sent "
        f"{r['sent_rps']:.0f}/s, dropped {r['dropped']}, 503 {r['n_503']} 504 {r['n_504']} other "
        f"{r['n_other']} unanswered {r['unanswered']}, p50 {r['p50_us'] / 1e3:.1f} p99 "
        f"{r['p99_us'] / 1e3:.1f} ms, conns {r['conns']} (max in flight {r['max_in_flight']}), "
        f"wrk CPU {r['wrk_cpu_share']:.2f}, other processes {r['other_cpu']:.2f} cores")
    return r


def redis_command(port, *words):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(("*%d\r\n" % len(words) + "".join(
            "$%d\r\n%s\r\n" % (len(w), w) for w in words)).encode())
        return s.recv(4096)
    finally:
        s.close()


def redis_slow(v, plan, c):
    """Steady load at REDIS_SLOW_LOAD x C; Redis blocked by DEBUG SLEEP 0.05 back to back for
    SLOW_S; goodput per 250 ms bucket before, during, and the time to recover."""
    settle(v)
    bucket_ms = 250
    pre_s, slow_s, post_s = cfg["slow_before"], cfg["slow_s"], cfg["slow_after"]
    rate = cfg["slow_load"] * c
    pid = cfg["variants"][v]["pid"]
    marks, rss = {}, []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            rss.append((time.monotonic(), rss_kb(pid)))
            time.sleep(0.05)

    def slower(start_at):
        time.sleep(max(0.0, start_at - time.monotonic()))
        s = socket.create_connection(("127.0.0.1", cfg["redis_port"]), timeout=10)
        marks["start"] = time.monotonic()
        n = 0
        while time.monotonic() < marks["start"] + slow_s:
            s.sendall(b"*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$4\r\n0.05\r\n")
            reply = s.recv(64)
            if not reply.startswith(b"+OK"):
                marks["error"] = reply.decode(errors="replace")
                break
            n += 1
            if cfg["slow_gap_ms"]:
                time.sleep(cfg["slow_gap_ms"] / 1000)
        marks["end"] = time.monotonic()
        marks["sleeps"] = n
        s.close()

    t_wrk = time.monotonic()
    threads = [threading.Thread(target=sampler), threading.Thread(target=slower,
                                                                   args=(t_wrk + pre_s,))]
    for t in threads:
        t.start()
    try:
        r = paced(v, plan, rate, 0, pre_s + slow_s + post_s, 0, timeline_ms=bucket_ms)
    finally:
        stop.set()
        for t in threads:
            t.join()
    if "error" in marks:
        raise RuntimeError(f"DEBUG SLEEP failed: {marks['error']}")
    tl = r["timeline"]
    start, end = marks["start"] * 1000, marks["end"] * 1000
    t_end_wrk = (t_wrk + pre_s + slow_s + post_s) * 1000
    buckets = [(tl["t0_ms"] + i * bucket_ms, g) for i, g in enumerate(tl["good"])]
    per_s = 1000 / bucket_ms

    def mean(xs):
        return sum(xs) / len(xs) if xs else 0.0

    before = [g * per_s for b, g in buckets if b >= t_wrk * 1000 + 1000 and b + bucket_ms <= start]
    during = [g * per_s for b, g in buckets if b >= start and b + bucket_ms <= end]
    after = [(b, g * per_s) for b, g in buckets if b >= end and b + bucket_ms <= t_end_wrk - 250]
    before_rate = mean(before)
    recovery_ms = None
    for i in range(len(after) - 1):  # two buckets in a row back at >= 0.9 of before
        if after[i][1] >= 0.9 * before_rate and after[i + 1][1] >= 0.9 * before_rate:
            recovery_ms = max(0.0, after[i][0] - end)
            break
    rss_before = max((k for t, k in rss if t * 1000 < start), default=0)
    rss_phase = max((k for t, k in rss if t * 1000 >= start), default=0)
    out = {"rate": rate, "goodput_before": before_rate, "goodput_during": mean(during),
           "goodput_after": mean([g for _, g in after]), "recovery_ms": recovery_ms,
           "rss_before_mb": rss_before / 1024, "max_rss_mb": rss_phase / 1024,
           "sleeps": marks.get("sleeps", 0), "slow_s": (end - start) / 1000,
           "timeline_good_per_s": [round(g * per_s) for _, g in buckets],
           "timeline_t0_s": round((tl["t0_ms"] - start) / 1000, 3),
           "status": r["status"], "dropped": r["dropped"], "conns": r["conns"],
           "max_in_flight": r["max_in_flight"], "wrk_cpu_share": r["wrk_cpu_share"],
           "other_cpu": r["other_cpu"]}
    log(f"{v} {plan}: Redis slow-down at {rate:.0f} req/s: goodput before {before_rate:.0f}/s, "
        f"during {out['goodput_during']:.0f}/s, after {out['goodput_after']:.0f}/s, recovery "
        f"{'none' if recovery_ms is None else round(recovery_ms)} ms, RSS {out['rss_before_mb']:.0f} -> max {out['max_rss_mb']:.0f} MB")
    return out


def main():
    variants = list(cfg["variants"])
    plans = cfg["plans"]
    multiples = cfg["multiples"]
    res = {v: {} for v in variants}   # v -> plan -> {"C", "est", "sweep", k: step}
    order = list(variants)
    for plan in plans:
        for v, sw in sweep_all(order, plan).items():
            res[v][plan] = {"C": sw.capacity(), "est": sw.est, "sweep": sw.steps,
                            "converged": sw.done}
        order.reverse()
        # The multiples are of the current build's C, so that both sides are offered the
        # same rates; each side's own C is on the capacity line.
        c = res["current"][plan]["C"]
        for k in multiples:
            for v in order:
                res[v][plan][k] = step(v, plan, k * c)
            order.reverse()
        if cfg["redis_slow"]:
            for v in order:
                res[v][plan]["slow"] = redis_slow(v, plan, c)
            order.reverse()
    qplan = cfg.get("quality_plan")
    quality = None
    if qplan:
        c = res["current"][plans[0]]["C"]
        quality = step("current", qplan, cfg["quality_multiple"] * c)
    print_figures(res, quality)


def kname(k):
    return f"{k:g}".replace(".", "_") + "c"


def print_figures(res, quality):
    ctx = {"machine": cfg["machine"], "build": "release+lto", "shards": 2, "cache": "none",
           "deadline_ms": DEADLINE_MS,
           "wrk": f"wrk -t{THREADS} -c<rate x {CONN_SECONDS} s, {MIN_CONNS}..{MAX_CONNS}> "
                  f"--timeout 10s -s bench/wrk_paced.lua (open loop, latency from the "
                  f"scheduled send)",
           "step": f"{cfg['warm']} s warm-up + {cfg['duration']} s counted + {cfg['tail']} s tail",
           "viewers": cfg["viewers"]}
    if cfg.get("base_sha"):
        ctx["base_rev"] = cfg["base_sha"][:12]
    # The machine's other users, in cores, over the bench's wrk runs (mean, max).
    ctx["other_cpu"] = [round(sum(OTHER_CPU) / len(OTHER_CPU), 2), max(OTHER_CPU)] if OTHER_CPU else None
    if OTHER_CPU and sum(OTHER_CPU) / len(OTHER_CPU) > 0.25:
        log(f"other processes used {ctx['other_cpu'][0]} cores on average (at most "
            f"{ctx['other_cpu'][1]}) during the runs: C and the steps measured the machine's "
            f"load as much as rankd")
    if cfg.get("serve_flags"):
        ctx["serve_flags"] = cfg["serve_flags"]
    has_base = "base" in res

    def emit(d, plan):
        d.update(plan=plan, **ctx)
        print(json.dumps(d), flush=True)

    def step_fields(r):
        return {"offered_rps": r["offered_rps"], "sent_rps": r["sent_rps"],
                "answered_rps": r["answered_rps"], "dropped": r["dropped"],
                "unanswered": r["unanswered"], "status": r["status"], "conns": r["conns"],
                "max_in_flight": r["max_in_flight"], "conns_exhausted": r["conns_exhausted"],
                "send_lag_p99_ms": round(r["send_lag_p99_us"] / 1e3, 2),
                "wrk_cpu_share": r["wrk_cpu_share"], "rankd_cpu_share": r["rankd_cpu_share"],
                "other_cpu": r["other_cpu"]}

    for plan in cfg["plans"]:
        cur = res["current"][plan]
        base = res["base"][plan] if has_base else None
        c = cur["C"]
        d = {"name": f"{plan}_capacity", "value": round(c, 1), "unit": "req/s",
             "rule": f">= {RULE:.0%} of offered requests 2xx within {DEADLINE_MS} ms of their "
                     f"scheduled send", "closed_loop_estimate": round(cur["est"], 1),
             "converged": cur["converged"], "sweep": cur["sweep"]}
        if base:
            d.update(baseline=round(base["C"], 1), ratio=round(c / base["C"], 3),
                     baseline_converged=base["converged"], baseline_sweep=base["sweep"])
        emit(d, plan)
        for k in cfg["multiples"]:
            r = cur[k]
            kn = kname(k)
            target = "<= 1% not 2xx" if k < 1 else ">= 0.95"
            emit({"name": f"{plan}_goodput_{kn}", "value": round(r["goodput_rps"], 1),
                  "unit": "req/s", "baseline": round(c, 1), "ratio": round(r["goodput_rps"] / c, 3),
                  "baseline_is": "capacity C (current build)", "multiple": k, "target": target,
                  "baseline_command": f"this run's sweep ({plan}_capacity)",
                  **step_fields(r)}, plan)
            share = r["not_2xx"] / r["offered"] if r["offered"] else 0.0
            emit({"name": f"{plan}_not_2xx_share_{kn}", "value": round(share, 4), "unit": "share",
                  "note": "offered requests not answered 2xx (non-2xx, dropped or unanswered)",
                  "share_503": round(r["n_503"] / r["offered"], 4) if r["offered"] else 0,
                  "share_504": round(r["n_504"] / r["offered"], 4) if r["offered"] else 0,
                  "share_other": round(r["n_other"] / r["offered"], 4) if r["offered"] else 0,
                  "share_not_answered": round((r["dropped"] + r["unanswered"]) / r["offered"], 4)
                  if r["offered"] else 0, "multiple": k,
                  **({"target": "<= 0.01"} if k < 1 else {})}, plan)
            for p in ("p50", "p99"):
                emit({"name": f"{plan}_{p}_latency_{kn}", "value": round(r[f"{p}_us"] / 1e3, 2),
                      "unit": "ms", "latency_from": "scheduled send", "multiple": k}, plan)
            if r["refusal_metric"] and r["refusals_timed"]:
                emit({"name": f"{plan}_refusal_p99_{kn}", "value": round(r["refusal_p99_s"] * 1e3, 3),
                      "unit": "ms", "refusals": int(r["refusals_timed"]), "target": "<= 1 ms",
                      "past_last_bucket": r["refusal_p99_past_last_bucket"],
                      "source": "rankd_admission_refusal_seconds (all shards, bucket deltas)",
                      "multiple": k}, plan)
            if base:
                b = base[k]
                for name, key, unit, scale in (("goodput", "goodput_rps", "req/s", 1),
                                               ("p99_latency", "p99_us", "ms", 1e-3)):
                    val, bval = r[key] * scale, b[key] * scale
                    emit({"name": f"{plan}_{name}_{kn}_vs_base", "value": round(val, 2),
                          "unit": unit, "baseline": round(bval, 2),
                          "ratio": round(val / bval, 3) if bval else None, "multiple": k,
                          "baseline_fields": step_fields(b)}, plan)
                bshare = b["not_2xx"] / b["offered"] if b["offered"] else 0.0
                emit({"name": f"{plan}_not_2xx_share_{kn}_vs_base", "value": round(share, 4),
                      "unit": "share", "baseline": round(bshare, 4),
                      "ratio": round(share / bshare, 3) if bshare else None, "multiple": k}, plan)
        if "slow" in cur:
            s = cur["slow"]
            bs = base["slow"] if base else None
            for key, unit in (("goodput_before", "req/s"), ("goodput_during", "req/s"),
                              ("goodput_after", "req/s"), ("recovery_ms", "ms"),
                              ("max_rss_mb", "MB")):
                d = {"name": f"{plan}_redis_slow_{key}", "value": None if s[key] is None else round(s[key], 1),
                     "unit": unit, "load": f"{cfg['slow_load']:g} C = {s['rate']:.0f} req/s",
                     "slow": f"DEBUG SLEEP 0.05 every {50 + cfg['slow_gap_ms']:g} ms for "
                             f"{s['slow_s']:.1f} s ({s['sleeps']} sleeps)"}
                if key == "recovery_ms":
                    d["note"] = ("from the slow-down's end to the first of two 250 ms buckets in a "
                                 "row with goodput >= 0.9 x before; null: not within the run")
                d["other_cpu"] = s["other_cpu"]
                if key == "max_rss_mb":
                    d["rss_before_mb"] = round(s["rss_before_mb"], 1)
                if key == "goodput_during":
                    d["timeline_good_per_s"] = s["timeline_good_per_s"]
                    d["timeline_t0_s"] = s["timeline_t0_s"]
                    d["status"] = s["status"]
                if bs:
                    bv = bs[key]
                    d["baseline"] = None if bv is None else round(bv, 1)
                    d["ratio"] = round(s[key] / bv, 3) if bv and s[key] is not None else None
                emit(d, plan)
    if quality:
        qplan = cfg["quality_plan"]
        c = res["current"][cfg["plans"][0]]["C"]
        k = cfg["quality_multiple"]
        emit({"name": f"{qplan}_quality_goodput_{kname(k)}", "value": round(quality["goodput_rps"], 1),
              "unit": "req/s", "baseline": round(c, 1), "ratio": round(quality["goodput_rps"] / c, 3),
              "baseline_is": f"capacity C of {cfg['plans'][0]} (current build)", "target": ">= 1.3",
              "baseline_command": f"this run's sweep ({cfg['plans'][0]}_capacity)",
              "p50_ms": round(quality["p50_us"] / 1e3, 2), "p99_ms": round(quality["p99_us"] / 1e3, 2),
              **step_fields(quality)}, qplan)


if __name__ == "__main__":
    main()
