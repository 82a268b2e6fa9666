#!/usr/bin/env python3
"""Structural checks of rankd's deployment files (ops/), run by test_ops_files.sh.

Prints one line per check, `ok NAME` or `FAIL NAME` followed by indented reasons; the
shell script counts them. The names of the metrics rankd exports are read from
src/server (prometheus-cpp builders and scrape-time families), so a renamed metric
fails here until the dashboard, alerts and docs follow.

  check_ops_files.py ROOT                          run every check
  check_ops_files.py ROOT --write-plans-configmap  regenerate ops/k8s/configmap-plans.yaml
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import haproxy_cfg  # noqa: E402  (tests/support: also what the rolling-restart test reads)
NAMESPACE = "rankd"
APP_LABEL = ("app.kubernetes.io/name", "rankd")

results = []  # (name, [problems])


def check(name):
    def wrap(fn):
        try:
            problems = fn() or []
        except Exception as e:  # a crash in a check is a failure of that check
            problems = [f"{type(e).__name__}: {e}"]
        results.append((name, problems))
        return fn
    return wrap


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


try:
    import yaml  # Debian: python3-yaml
except ImportError:
    yaml = None


def need_yaml():
    if yaml is None:
        raise RuntimeError("python3-yaml is not installed (ops/lib/ensure-deps installs it)")


# --- what rankd exports --------------------------------------------------------------

# A row of kMetricTable: {"name", "help" ["more help"...], Type::Kind, {"label", ...}, reader}
METRIC_ROW = re.compile(r'\{\s*"([a-z_:][a-z0-9_:]*)",\s*(?:"(?:[^"\\]|\\.)*"\s*)+,\s*'
                        r'Type::(Counter|Gauge|Histogram),\s*\{([^}]*)\}')


def metric_table():
    """{family name: (type, [label names])} from the table in src/metrics/metric_table.cc."""
    text = read(os.path.join("src", "metrics", "metric_table.cc"))
    return {name: (kind.lower(), re.findall(r'"([a-z_]+)"', labels))
            for name, kind, labels in METRIC_ROW.findall(text)}


TABLE = metric_table()
FAMILIES = {name: kind for name, (kind, _) in TABLE.items()}
SERIES = set()
for _name, _kind in FAMILIES.items():
    if _kind == "histogram":
        SERIES.update({_name + "_bucket", _name + "_sum", _name + "_count"})
    else:
        SERIES.add(_name)
# Series Prometheus itself attaches to every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan", "atan2"}


def metric_names(expr):
    """Metric names a PromQL expression selects (a tokenizer, not a parser)."""
    e = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', expr)  # string literals
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\b(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def grafana_to_promql(expr):
    """Replace dashboard variables by values Prometheus accepts."""
    e = expr.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", ".*", e)


@check("metric list read from src/metrics/metric_table.cc")
def _():
    must = ["rankd_http_requests_total", "rankd_rank_duration_seconds", "rankd_redis_connections",
            "rankd_redis_errors_total", "rankd_loop_lag_seconds", "rankd_degraded_total",
            "process_cpu_seconds_total"]
    return [f"{m} not found in src/metrics/metric_table.cc" for m in must if m not in FAMILIES]


# --- Grafana dashboard ---------------------------------------------------------------

DASH = "ops/grafana/rankd.json"


def dashboard():
    return json.loads(read(DASH))


def panels(d):
    for p in d.get("panels", []):
        yield p
        yield from p.get("panels", [])  # panels of collapsed rows


@check("dashboard: JSON model, datasource variable, panel layout")
def _():
    d = dashboard()
    bad = []
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in d:
            bad.append(f"missing top-level '{key}'")
    vars_ = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    ds = [v for v in vars_.values() if v.get("type") == "datasource" and v.get("query") == "prometheus"]
    if not ds:
        bad.append("no datasource variable of type prometheus")
    ds_names = {v["name"] for v in ds}
    ids = set()
    for p in panels(d):
        if p.get("id") in ids:
            bad.append(f"panel id {p.get('id')} used twice")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            bad.append(f"panel '{p.get('title')}' has no gridPos")
        if p.get("type") == "row":
            continue
        for obj in [p] + p.get("targets", []):
            uid = (obj.get("datasource") or {}).get("uid", "")
            if uid.strip("${}") not in ds_names:
                bad.append(f"panel '{p.get('title')}': datasource uid '{uid}' is not a datasource variable")
        if not p.get("targets"):
            bad.append(f"panel '{p.get('title')}' has no query")
        for t in p.get("targets", []):
            for ref in re.findall(r"\$\{?(\w+)\}?", t.get("expr", "")):
                if not ref.startswith("__") and ref not in vars_:
                    bad.append(f"panel '{p.get('title')}' uses undefined variable ${ref}")
    return bad


@check("dashboard: every expression selects only metrics rankd exports")
def _():
    bad = []
    for p in panels(dashboard()):
        for t in p.get("targets", []):
            for name in sorted(metric_names(t.get("expr", ""))):
                if name not in SERIES:
                    bad.append(f"panel '{p.get('title')}': '{name}' is not exported by rankd")
    return bad


@check("dashboard: the panels operators need are there")
def _():
    d = dashboard()
    exprs = "\n".join(t.get("expr", "") for p in panels(d) for t in p.get("targets", []))
    want = {
        "request rate": r"rate\(rankd_http_requests_total",
        "p50 per plan": r"histogram_quantile\(0\.5, sum by \([^)]*plan[^)]*\) \(rate\(rankd_rank_duration_seconds_bucket",
        "p99 per plan": r"histogram_quantile\(0\.99, sum by \([^)]*plan[^)]*\) \(rate\(rankd_rank_duration_seconds_bucket",
        "errors by code": r"sum by \(code\)",
        "Redis latency": r"rankd_redis_batch_duration_seconds_bucket",
        "Redis errors": r"rankd_redis_errors_total",
        "loop lag per shard": r"by \([^)]*shard[^)]*\) \(rankd_loop_lag_seconds",
        "requests per shard": r"sum by \(instance, shard\) \(rate\(rankd_http_requests_total",
        "in-flight per shard": r"by \([^)]*shard[^)]*\) \(rankd_inflight_requests",
        "degraded nodes": r"rankd_degraded_total",
        "plan reloads": r"rankd_plan_reloads_total",
        "process memory": r"process_resident_memory_bytes",
        "process CPU": r"rate\(process_cpu_seconds_total",
    }
    return [f"no panel for {what} (/{rx}/)" for what, rx in want.items() if not re.search(rx, exprs)]


@check("dashboard: every expression is valid PromQL (promtool)")
def _():
    rules = []
    for p in panels(dashboard()):
        for t in p.get("targets", []):
            rules.append({"record": f"dashboard:panel{p['id']}:{t.get('refId', 'A')}",
                          "expr": grafana_to_promql(t["expr"])})
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
        path = f.name
    try:
        r = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    return [] if r.returncode == 0 else [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]


# --- alert rules ---------------------------------------------------------------------

@check("alerts: required alerts, for, severity, summary and description")
def _():
    need_yaml()
    doc = yaml.safe_load(read("ops/alerts.yml"))
    rules = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    bad = []
    for r in rules:
        n = r["alert"]
        if "for" not in r:
            bad.append(f"{n}: no 'for'")
        if r.get("labels", {}).get("severity") not in ("critical", "warning"):
            bad.append(f"{n}: severity label must be critical or warning")
        for a in ("summary", "description"):
            if not r.get("annotations", {}).get(a):
                bad.append(f"{n}: no {a} annotation")
    exprs = {r["alert"]: r["expr"] for r in rules}
    want = {
        "error ratio": r'rankd_http_requests_total\{[^}]*code=~"5\.\."',
        "p99 over deadline": r"histogram_quantile\(0\.99,[\s\S]*rankd_rank_duration_seconds_bucket[\s\S]*> 0\.2\b",
        "Redis down": r'rankd_redis_connections\{state="live"\}\) == 0',
        "Redis unavailable": r'rankd_redis_errors_total\{kind="unavailable"\}',
        "loop lag": r"rankd_loop_lag_(seconds|distribution_seconds_bucket)",
        "degraded rate": r"rankd_degraded_total",
        "target down": r'up\{job="rankd"\} == 0',
    }
    for what, rx in want.items():
        if not any(re.search(rx, e) for e in exprs.values()):
            bad.append(f"no alert on {what} (/{rx}/)")
    return bad


@check("alerts: every expression selects only metrics rankd exports")
def _():
    need_yaml()
    doc = yaml.safe_load(read("ops/alerts.yml"))
    bad = []
    for g in doc["groups"]:
        for r in g["rules"]:
            for name in sorted(metric_names(r["expr"])):
                if name not in SERIES | PROMETHEUS_SERIES:
                    bad.append(f"{r.get('alert') or r.get('record')}: '{name}' is not exported by rankd")
    return bad


@check("alerts_test: every alert has a unit test")
def _():
    need_yaml()
    alerts = {r["alert"] for g in yaml.safe_load(read("ops/alerts.yml"))["groups"]
              for r in g["rules"] if "alert" in r}
    tested = {}
    for t in yaml.safe_load(read("ops/alerts_test.yml"))["tests"]:
        for a in t.get("alert_rule_test", []):
            fires = bool(a.get("exp_alerts"))
            tested.setdefault(a["alertname"], set()).add(fires)
    bad = [f"{a}: no test in which it fires" for a in sorted(alerts) if True not in tested.get(a, set())]
    for a in ("RankdHighErrorRatio", "RankdRedisDown"):
        if False not in tested.get(a, set()):
            bad.append(f"{a}: no test in which it stays quiet")
    return bad


# --- YAML files ----------------------------------------------------------------------

def ops_yaml_files():
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, "ops")):
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith((".yml", ".yaml"))]
    return sorted(out)


@check("yaml: every ops/ YAML file parses")
def _():
    need_yaml()
    bad = []
    for rel in ops_yaml_files():
        try:
            docs = [d for d in yaml.safe_load_all(read(rel)) if d is not None]
            if not docs:
                bad.append(f"{rel}: empty")
        except yaml.YAMLError as e:
            bad.append(f"{rel}: {e}")
    return bad


# --- Kubernetes ----------------------------------------------------------------------

def k8s_objects():
    need_yaml()
    objs = []
    for rel in sorted(os.listdir(os.path.join(ROOT, "ops", "k8s"))):
        if rel.endswith((".yaml", ".yml")) and rel != "kustomization.yaml":
            for d in yaml.safe_load_all(read(os.path.join("ops", "k8s", rel))):
                if d:
                    objs.append((rel, d))
    return objs


def by_kind(objs, kind):
    return [d for _, d in objs if d.get("kind") == kind]


@check("k8s: apiVersion, kind, name, one namespace, common labels")
def _():
    objs = k8s_objects()
    bad = []
    known = {"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1",
             "HorizontalPodAutoscaler": "autoscaling/v2", "ServiceMonitor": "monitoring.coreos.com/v1",
             "PodDisruptionBudget": "policy/v1", "NetworkPolicy": "networking.k8s.io/v1"}
    for rel, d in objs:
        kind, meta = d.get("kind"), d.get("metadata", {})
        if kind not in known:
            bad.append(f"{rel}: unexpected kind {kind}")
        elif d.get("apiVersion") != known[kind]:
            bad.append(f"{rel}: {kind} should be {known[kind]}, is {d.get('apiVersion')}")
        if not meta.get("name"):
            bad.append(f"{rel}: no metadata.name")
        if kind == "Namespace":
            if meta.get("name") != NAMESPACE:
                bad.append(f"{rel}: namespace is {meta.get('name')}, not {NAMESPACE}")
        elif meta.get("namespace") != NAMESPACE:
            bad.append(f"{rel}: {kind} {meta.get('name')} is not in namespace {NAMESPACE}")
        if meta.get("labels", {}).get(APP_LABEL[0]) != APP_LABEL[1]:
            bad.append(f"{rel}: {kind} lacks label {APP_LABEL[0]}={APP_LABEL[1]}")
    for kind in known:
        if not by_kind(objs, kind):
            bad.append(f"no {kind}")
    kust = yaml.safe_load(read("ops/k8s/kustomization.yaml"))
    listed = set(kust.get("resources", []))
    files = {rel for rel, _ in objs}
    for f in files - listed:
        bad.append(f"kustomization.yaml does not list {f}")
    for f in listed - files:
        bad.append(f"kustomization.yaml lists missing {f}")
    return bad


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@check("k8s: selectors, ports, probes, drain budget, plans volume agree")
def _():
    objs = k8s_objects()
    bad = []
    dep = by_kind(objs, "Deployment")[0]
    svc = by_kind(objs, "Service")[0]
    sm = by_kind(objs, "ServiceMonitor")[0]
    hpa = by_kind(objs, "HorizontalPodAutoscaler")[0]
    pdb = by_kind(objs, "PodDisruptionBudget")[0]
    cms = {c["metadata"]["name"] for c in by_kind(objs, "ConfigMap")}
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    if not selects(dep["spec"]["selector"]["matchLabels"], pod_labels):
        bad.append("Deployment selector does not match its pod labels")
    if not selects(svc["spec"]["selector"], pod_labels):
        bad.append("Service selector does not match the pod labels")
    if not selects(pdb["spec"]["selector"]["matchLabels"], pod_labels):
        bad.append("PodDisruptionBudget selector does not match the pod labels")
    if not selects(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]):
        bad.append("ServiceMonitor selector does not match the Service labels")
    if NAMESPACE not in sm["spec"].get("namespaceSelector", {}).get("matchNames", []):
        bad.append("ServiceMonitor namespaceSelector does not name the namespace")
    svc_ports = {p.get("name"): p for p in svc["spec"]["ports"]}
    ref = hpa["spec"]["scaleTargetRef"]
    if (ref.get("kind"), ref.get("name")) != ("Deployment", dep["metadata"]["name"]):
        bad.append("HPA does not target the Deployment")
    if not any(m.get("type") == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]):
        bad.append("HPA does not scale on CPU")

    c = pod["spec"]["containers"][0]
    args = c.get("args", [])
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    cports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if str(cports.get("http")) != flags.get("port"):
        bad.append(f"containerPort http {cports.get('http')} is not --port {flags.get('port')}")
    # /metrics on the metrics address (no token there; 404 on the client port).
    if str(cports.get("metrics")) != flags.get("metrics-port"):
        bad.append(f"containerPort metrics {cports.get('metrics')} is not --metrics-port {flags.get('metrics-port')}")
    by_number = {v: k for k, v in cports.items()}

    def container_port(svc_port):
        t = svc_port.get("targetPort")
        return t if t in cports else by_number.get(t)
    for p in svc_ports.values():
        if container_port(p) is None:
            bad.append(f"Service targetPort {p.get('targetPort')} is not a container port")
    for ep in sm["spec"]["endpoints"]:
        if ep.get("port") not in svc_ports:
            bad.append(f"ServiceMonitor port {ep.get('port')} is not a Service port name")
        elif container_port(svc_ports[ep["port"]]) != "metrics":
            bad.append(f"ServiceMonitor port {ep.get('port')} is not the container's metrics port")
        if ep.get("path", "/metrics") != "/metrics":
            bad.append("ServiceMonitor path is not /metrics")
    notes = pod["metadata"].get("annotations", {})
    if notes.get("prometheus.io/port") != flags.get("metrics-port"):
        bad.append(f"annotation prometheus.io/port {notes.get('prometheus.io/port')} is not --metrics-port")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        got = c.get(probe, {}).get("httpGet", {}).get("path")
        if got != path:
            bad.append(f"{probe} path is {got}, want {path}")
    for k in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in c.get("resources", {}).get(k, {}):
                bad.append(f"no resources.{k}.{r}")
    # One drain mechanism: rankd's --drain-delay-ms (readiness fails, it serves on), long
    # enough for the readiness probe to see it, and no preStop delay besides.
    drain_s = int(flags.get("drain-timeout-ms", "10000")) / 1000
    delay_s = int(flags.get("drain-delay-ms", "0")) / 1000
    rp = c.get("readinessProbe", {})
    notice_s = rp.get("periodSeconds", 10) * rp.get("failureThreshold", 3)
    if delay_s < notice_s + 1:
        bad.append(f"--drain-delay-ms {delay_s * 1000:.0f} is under the readiness probe's periodSeconds x "
                   f"failureThreshold + 1 s = {notice_s + 1} s")
    if c.get("lifecycle", {}).get("preStop"):
        bad.append("a preStop hook: rankd's --drain-delay-ms is the one drain delay")
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    if grace < delay_s + drain_s + 5:
        bad.append(f"terminationGracePeriodSeconds {grace} is under --drain-delay-ms {delay_s} s + "
                   f"--drain-timeout-ms {drain_s} s + 5 s")
    if not pod["spec"].get("securityContext", {}).get("runAsNonRoot"):
        bad.append("pod does not require runAsNonRoot")
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    # The plan folder: an emptyDir, read-only for rankd, that init containers fill with
    # the plans of a ConfigMap of ops/k8s and the models of an image.
    plans_dir = flags.get("plans")
    plans_vol = mounts.get(plans_dir, "")
    if "emptyDir" not in vols.get(plans_vol, {}):
        bad.append(f"--plans {plans_dir} is not a mounted emptyDir")
    if not any(m["name"] == plans_vol and m.get("readOnly") for m in c.get("volumeMounts", [])):
        bad.append(f"rankd mounts the plan folder {plans_dir} writable")
    fillers = [i for i in pod["spec"].get("initContainers", [])
               if any(m["name"] == plans_vol and not m.get("readOnly") for m in i.get("volumeMounts", []))]
    if not any(vols.get(m["name"], {}).get("configMap", {}).get("name") in cms
               for i in fillers for m in i.get("volumeMounts", [])):
        bad.append(f"no init container copies a ConfigMap of ops/k8s into the plan folder {plans_dir}")
    if not any("model.json" in " ".join(i.get("command", []) + i.get("args", [])) for i in fillers):
        bad.append(f"no init container copies model files into the plan folder {plans_dir}")
    return bad


@check("k8s: the NetworkPolicy opens the client port, and the metrics port to a namespace only")
def _():
    objs = k8s_objects()
    pol = by_kind(objs, "NetworkPolicy")[0]
    pod = by_kind(objs, "Deployment")[0]["spec"]["template"]
    cports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0].get("ports", [])}
    bad = []
    if not selects(pol["spec"]["podSelector"].get("matchLabels"), pod["metadata"]["labels"]):
        bad.append("NetworkPolicy podSelector does not match the pod labels")
    if "Ingress" not in pol["spec"].get("policyTypes", []):
        bad.append("NetworkPolicy has no Ingress policy type")
    rules = pol["spec"].get("ingress", [])

    def opens(rule, name):
        return any(p.get("port") in (name, cports.get(name)) for p in rule.get("ports", []))
    if not any(opens(r, "http") for r in rules):
        bad.append("no ingress rule opens the client port http")
    metrics = [r for r in rules if opens(r, "metrics")]
    if not metrics:
        bad.append("no ingress rule opens the metrics port (Prometheus)")
    if any(not r.get("from") for r in metrics):
        bad.append("the metrics port is open to every source: give its rule a from")
    unknown = [p.get("port") for r in rules for p in r.get("ports", [])
               if p.get("port") not in cports and p.get("port") not in cports.values()]
    if unknown:
        bad.append(f"ingress ports {unknown} are not container ports")
    return bad


CONFIGMAP = "ops/k8s/configmap-plans.yaml"
# Ops a production rankd refuses (rankd --enable-test-ops loads them): plans that use
# them live in tests/plans, never in what is shipped.
TEST_OPS = ("sleep", "busy_cpu", "fixed_source")


def shipped_plan_files():
    """{file name: text} of what the Dockerfile copies into the image's plan folder, less
    the models (they come from the model image): plans/*.plan.json, schema.json and
    experiments.json. The ConfigMap carries exactly these."""
    import glob
    m = re.search(r"(?m)^COPY ((?:plans/\S+ )+)/etc/rankd/plans/$", read("ops/Dockerfile"))
    if not m:
        raise RuntimeError("ops/Dockerfile has no `COPY plans/... /etc/rankd/plans/` line")
    files = {}
    for pattern in m.group(1).split():
        paths = sorted(glob.glob(os.path.join(ROOT, pattern)))
        if not paths:
            raise RuntimeError(f"ops/Dockerfile copies {pattern}, which matches no file")
        for path in paths:
            if not path.endswith(".model.json"):
                with open(path, encoding="utf-8") as f:
                    files[os.path.basename(path)] = f.read()
    return dict(sorted(files.items()))


def plans_configmap_text():
    out = [
        "# The compiled plans (plans/*.plan.json) with the folder's schema.json and",
        "# experiments.json, which the Deployment's init container copies into the plan folder",
        "# /etc/rankd/plans next to the models: what ops/Dockerfile puts in the image, less the",
        "# models. Production plans only (test fixtures live in tests/plans). Generated: do not",
        "# edit. After changing plans/, regenerate with",
        "#   tests/ops/test_ops_files.sh --write-plans-configmap",
        "# then `kubectl apply -k ops/k8s` and `kubectl -n rankd rollout restart deployment/rankd`.",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: rankd-plans",
        f"  namespace: {NAMESPACE}",
        "  labels:",
        "    app.kubernetes.io/name: rankd",
        "    app.kubernetes.io/component: plans",
        "    app.kubernetes.io/part-of: rankd",
        "data:",
    ]
    for n, body in shipped_plan_files().items():
        chomp = "" if body.endswith("\n") else "-"
        out.append(f"  {n}: |{chomp}")
        out += [("    " + line) if line else "" for line in body.rstrip("\n").split("\n")]
    return "\n".join(out) + "\n"


@check("k8s: the plans ConfigMap holds exactly the image's plan files less the models")
def _():
    need_yaml()
    cm = yaml.safe_load(read(CONFIGMAP))
    want = shipped_plan_files()
    got = cm.get("data", {})
    bad = [f"{n} differs from plans/{n}" for n in want if n in got and got[n] != want[n]]
    bad += [f"{n} is missing" for n in want if n not in got]
    bad += [f"{n} is not one of the plan files ops/Dockerfile ships" for n in got if n not in want]
    for n, body in got.items():
        if n.endswith(".plan.json") and json.loads(body).get("name") + ".plan.json" != n:
            bad.append(f"{n}: its plan name does not match the key")
    if bad:
        bad.append("regenerate with: tests/ops/test_ops_files.sh --write-plans-configmap")
    return bad


@check("production: no shipped plan uses a test-only op, and no shipped file enables them")
def _():
    bad = []
    for n, body in shipped_plan_files().items():
        if n.endswith(".plan.json"):
            for node in json.loads(body).get("nodes", []):
                if node.get("op") in TEST_OPS:
                    bad.append(f"plans/{n}: node '{node.get('node_id')}' uses the test-only op "
                               f"'{node['op']}' (move the plan to tests/plans)")
    for rel in ["ops/Dockerfile", "ops/systemd/rankd.service", "ops/run"] + sorted(
            os.path.join("ops", "k8s", f) for f in os.listdir(os.path.join(ROOT, "ops", "k8s"))):
        if "--enable-test-ops" in read(rel):
            bad.append(f"{rel} passes --enable-test-ops")
    return bad


# --- HAProxy -------------------------------------------------------------------------

HAPROXY = "ops/haproxy.cfg"


def directives(text, section_kind):
    """The lines of every section of a kind (defaults, backend, ...) of an HAProxy config."""
    return [line for head, lines in haproxy_cfg.sections(text) if head.split()[0] == section_kind
            for line in lines]


@check("haproxy: /readyz checks on every server, retries, redispatch, ports from the environment")
def _():
    text = read(HAPROXY)
    bad = []
    lines = directives(text, "defaults") + directives(text, "backend")
    have = lambda rx: any(re.fullmatch(rx, line) for line in lines)  # noqa: E731
    if not have(r"option httpchk"):
        bad.append("no option httpchk")
    if not have(r"http-check send meth GET uri /readyz"):
        bad.append("the health check is not GET /readyz")
    if not have(r"http-check expect status 200"):
        bad.append("the health check does not expect 200")
    retry_on = [line.split()[1:] for line in lines if line.startswith("retry-on ")]
    if not retry_on or not {"conn-failure", "empty-response"} <= set(retry_on[-1]):
        bad.append("retry-on lacks conn-failure or empty-response")
    if not any(re.fullmatch(r"retries [1-9]\d*", line) for line in lines):
        bad.append("no retries N (N >= 1)")
    if not have(r"option redispatch( \d+)?"):
        bad.append("no option redispatch")
    servers = haproxy_cfg.server_checks(text)
    if len(servers) < 2:
        bad.append(f"{len(servers)} server(s): want 2 or more replicas")
    bad += [f"server {n} is not health-checked" for n, c in servers.items() if not c["check"]]
    for line in lines:
        if line.startswith("server ") and "${" not in line:
            bad.append(f"'{line}': its address is not taken from the environment")
    return bad


def ops_run_drain_delay_ms():
    m = re.search(r"--drain-delay-ms \"\$\{RANKD_DRAIN_DELAY_MS:-(\d+)\}\"", read("ops/run"))
    return int(m.group(1)) if m else 0


@check("haproxy: --drain-delay-ms >= check inter x fall + 1 s where rankd runs behind it")
def _():
    need = haproxy_cfg.min_drain_delay_ms(read(HAPROXY))
    given = {"ops/run (RANKD_DRAIN_DELAY_MS default)": ops_run_drain_delay_ms()}
    for n in re.findall(r"--drain-delay-ms[ =](\d+)", read(HAPROXY)):
        given[f"{HAPROXY} (its comments)"] = int(n)
    return [f"{where}: --drain-delay-ms {ms} is under {need}" for where, ms in given.items() if ms < need]


# --- systemd, Dockerfile -------------------------------------------------------------

@check("systemd: reload, stop signal and timeout, restart, limits, unprivileged")
def _():
    text = read("ops/systemd/rankd.service")
    keys = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line.strip())
        if m:
            keys.setdefault(m.group(1), []).append(m.group(2))
    one = {k: v[-1] for k, v in keys.items()}
    bad = []
    if "-HUP" not in one.get("ExecReload", ""):
        bad.append("ExecReload does not send SIGHUP")
    if one.get("KillSignal") != "SIGTERM":
        bad.append("KillSignal is not SIGTERM")
    if one.get("Restart") != "on-failure":
        bad.append("Restart is not on-failure")
    if "LimitNOFILE" not in one:
        bad.append("no LimitNOFILE")
    if one.get("DynamicUser") != "yes" and not one.get("User"):
        bad.append("runs as root: set DynamicUser=yes or User=")
    m = re.search(r"--drain-timeout-ms[ =](\d+)", one.get("ExecStart", ""))
    drain = int(m.group(1)) / 1000 if m else 10
    m = re.search(r"--drain-delay-ms[ =](\d+)", one.get("ExecStart", ""))
    drain += int(m.group(1)) / 1000 if m else 0
    t = re.match(r"^(\d+)s?$", one.get("TimeoutStopSec", ""))
    if not t or int(t.group(1)) <= drain + 2:
        bad.append(f"TimeoutStopSec {one.get('TimeoutStopSec')} is not over the drain delay and timeout ({drain} s) + 2 s")
    for k in ("NoNewPrivileges", "ProtectSystem", "PrivateTmp", "CapabilityBoundingSet", "SystemCallFilter"):
        if k not in keys:
            bad.append(f"no {k}")
    # The Redis password: never in argv, but through the drop-in's credential file.
    if "$RANKD_REDIS_PASSWORD_ARGS" not in one.get("ExecStart", ""):
        bad.append("ExecStart does not pass $RANKD_REDIS_PASSWORD_ARGS")
    dropin = read("ops/systemd/redis-password.conf")
    cred = re.search(r"(?m)^LoadCredential=([\w.-]+):/", dropin)
    if not cred:
        bad.append("redis-password.conf: no LoadCredential=ID:/path")
    elif f"--redis-password-file redis_default=%d/{cred.group(1)}" not in dropin:
        bad.append("redis-password.conf: RANKD_REDIS_PASSWORD_ARGS does not read the credential")
    return bad


def ensure_deps_packages():
    m = re.search(r"packages=\(([^)]*)\)", read("ops/lib/ensure-deps"))
    return m.group(1).split() if m else []


@check("Dockerfile: bookworm stages, meson release+LTO, -dev packages of ensure-deps, runtime")
def _():
    text = read("ops/Dockerfile")
    stages = re.split(r"(?m)^FROM ", text)[1:]
    bad = []
    if len(stages) < 2:
        return ["not a multi-stage build"]
    build, runtime = stages[0], stages[-1]
    for s in (build, runtime):
        if not s.startswith("debian:bookworm"):
            bad.append(f"stage not on debian:bookworm: FROM {s.splitlines()[0]}")
    # libclang-rt-14-dev is libFuzzer's engine, for ops/fuzz only, and libxgboost-dev the
    # reference predictor of the model tests and benchmarks: no part of the image.
    for p in ensure_deps_packages():
        if p in ("libclang-rt-14-dev", "libxgboost-dev"):
            continue
        if (p.endswith("-dev") or p in ("node-llhttp", "meson", "ninja-build")) and not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", build):
            bad.append(f"build stage does not install {p} (ops/lib/ensure-deps)")
    for flag in ("--buildtype=release", "-Db_lto=true"):
        if flag not in build:
            bad.append(f"meson setup lacks {flag}")
    if re.search(r"\S+-dev\b", runtime):
        bad.append("runtime stage installs -dev packages")
    if not re.search(r"(?m)^USER (?!root|0\b)\S+", runtime):
        bad.append("runtime runs as root")
    if not re.search(r"(?m)^EXPOSE 8080\b", runtime):
        bad.append("no EXPOSE 8080")
    if not re.search(r"(?ms)^HEALTHCHECK .*?/healthz", runtime):
        bad.append("no HEALTHCHECK on /healthz")
    if not re.search(r"(?m)^COPY .*plans", runtime):
        bad.append("plans are not copied in")
    return bad


# --- docs ----------------------------------------------------------------------------

def metric_doc_rows(doc):
    """{family: (type cell, labels cell)} of the metrics reference table of a doc."""
    rows = {}
    for m in re.finditer(r"(?m)^\| `([a-z_:][a-z0-9_:]*)` \| ([^|]*) \| ((?:[^|\\]|\\.)*) \|", doc):
        rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return rows


@check("docs/operations.md: every flag of `rankd serve --help` and every metric family")
def _():
    doc = read("docs/operations.md")
    # The flag table of `rankd serve` (its --help is written from it), with the Redis flags
    # every command shares.
    flags = set(re.findall(r'Flag[({]"(--[a-z-]+)"', read("src/cli/serve_flags.cc") +
                           read("src/cli/redis_flags.cc")))
    bad = [f"flag {f} not documented" for f in sorted(flags) if f"`{f}" not in doc]
    # Each family of the metric table has its row: same type, every label named.
    rows = metric_doc_rows(doc)
    for name, (kind, labels) in sorted(TABLE.items()):
        if name not in rows:
            bad.append(f"metric {name} has no row in the metrics reference")
            continue
        doc_kind, doc_labels = rows[name]
        if doc_kind != kind:
            bad.append(f"metric {name}: documented as {doc_kind}, exported as {kind}")
        named = set(re.findall(r"`([a-z_]+)`", doc_labels))
        bad += [f"metric {name}: label {l} not in its row" for l in labels if l not in named]
        if not labels and doc_labels != "—":
            bad.append(f"metric {name}: has no labels, its row says {doc_labels!r}")
    bad += [f"documented metric {m} is not exported" for m in sorted(set(rows) - set(TABLE))]
    for a in {r["alert"] for g in yaml.safe_load(read("ops/alerts.yml"))["groups"] for r in g["rules"] if "alert" in r} if yaml else ():
        if a not in doc:
            bad.append(f"alert {a} not documented")
    return bad



# --- the repository stands alone -------------------------------------------------------

# Pointers to material that is not in the repository: the design notes (the numbered
# seed notes and their folder, the design document) and the contracts' upper-case files,
# whose in-repo versions are docs/api.md, docs/plan.md and docs/data.md. Written so that
# no pattern matches this file's own text.
OUTSIDE_REFS = [
    (re.compile(r"\.\./shared"), "a path into the folder next to the repository"),
    (re.compile(r"DESIGN\.md"), "the design document"),
    (re.compile(r"(?i)\bseeds?/"), "the design notes' folder"),
    (re.compile(r"(?i)(?<![-\w])seeds? ?0\d\d\b"), "a numbered design note"),
    (re.compile(r"\b(?:PLAN|DATA|API)\.md"), "an upper-case contract file (use docs/plan.md, docs/data.md, docs/api.md)"),
]


def tracked_files():
    """Paths of the tracked files (every file but build trees when ROOT is no git checkout)."""
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True)
    if r.returncode == 0:
        return [p for p in r.stdout.decode().split("\0") if p]
    paths = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".git", "build"))]
        paths += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return paths


@check("repo: no file refers to design notes or contract files outside it")
def _():
    bad = []
    for rel in tracked_files():
        if "node_modules" in rel.split("/"):
            continue
        try:
            text = read(rel)
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary, a submodule, or deleted but not yet committed
        for n, line in enumerate(text.splitlines(), 1):
            for pattern, what in OUTSIDE_REFS:
                m = pattern.search(line)
                if m:
                    bad.append(f"{rel}:{n}: {what} ({m.group(0)!r}): state the rule itself or point into docs/")
    return bad


def main():
    if len(sys.argv) > 2 and sys.argv[2] == "--write-plans-configmap":
        with open(os.path.join(ROOT, CONFIGMAP), "w", encoding="utf-8") as f:
            f.write(plans_configmap_text())
        print(f"wrote {CONFIGMAP}")
        return
    for name, problems in results:
        print(("ok   " if not problems else "FAIL ") + name)
        for p in problems:
            print("       " + p)


main()
