"""Redis on a shared network (redirects, cluster bounds, and the Redis flags of every command):

- A fake cluster node that answers every command with `-MOVED <slot> 127.0.0.1:<trap>`
  (or ASK, or ":<trap>") never gets rankd to the trap: no connection, no byte (no AUTH)
  arrives there; the request gets 502 backend_error and
  rankd_redis_errors_total{kind="unknown_redirect"} counts each refusal. A redirect to a
  node that the slot map, fetched again, does name is followed (200).
- A CLUSTER SLOTS reply naming more nodes than --redis-max-cluster-nodes is refused and
  logged, and the old map keeps serving; the nodes it named are never connected to.
- A password given through every URL form (":pw@", "pw@", "user:pw@", percent-encoded,
  '@' and ':' inside, ?password_file=, --redis-password-file) reaches Redis (200 with
  requirepass and an ACL user), and never appears in rankd's log, /metrics, /readyz, an
  error body or --help; the file forms keep it out of argv. A wrong one: 503, no trace.
- Every command that takes --redis takes the same Redis flags, and a bad TLS or password
  file is a start-up error (exit 2) naming the endpoint and the file.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from fake_cluster import FakeClusterNode, Trap  # noqa: E402
from harness import (RANKD, Rankd, Redis, metric_value, plans_dir, run_tests,  # noqa: E402
                     simple_plan, temp_dir, wait_until)

PLANS = {"viewer": simple_plan("viewer", [
    {"node_id": "v", "op": "viewer", "inputs": [], "params": {"endpoint": "redis_default"}}], "v")}
PASSWORD = "Cl7-s3cr3t-Xq"
DEFAULT_PW = "dEf4ult-Pw-9x7"
ALICE_PW = "Al1ce@p:w-Q8z"  # '@' and ':' inside
ALICE_PW_ENCODED = "Al1ce%40p%3Aw-Q8z"
SECRETS = [PASSWORD, DEFAULT_PW, ALICE_PW, ALICE_PW_ENCODED, "s3cr3t", "dEf4ult", "Al1ce", "Q8z"]


class Url:
    """What Rankd(redis=...) wants: an object with url()."""

    def __init__(self, url):
        self._url = url

    def url(self):
        return self._url


def rank(rankd, user_id=7):
    status, _, body = rankd.request("POST", "/rank", {"plan": "viewer", "user_id": user_id})
    return status, body.decode()


def assert_no_secret(where, text, secrets=SECRETS):
    for s in secrets:
        assert s not in text, f"{s!r} in {where}: {text[-3000:]}"


def unknown_redirects(rankd):
    return metric_value(rankd.metrics(), "rankd_redis_errors_total", endpoint="redis_default",
                        kind="unknown_redirect") or 0


def map_refreshes(rankd):
    """Slot maps installed: a CLUSTER SLOTS reply that reached rankd and was used."""
    return metric_value(rankd.metrics(), "rankd_redis_cluster_slot_map_refreshes_total",
                        endpoint="redis_default") or 0


# --- redirects only to known nodes ---------------------------------------------------

def test_redirects_to_unknown_nodes_send_nothing_there():
    trap = Trap()
    node = FakeClusterNode(redirect=f"127.0.0.1:{trap.port}")
    rankd = Rankd(plans_dir(PLANS, indexes=False), redis=Url(node.url(PASSWORD)),
                  extra_args=["--deadline-ms", "2000"]).wait_ready()
    assert node.auths and node.auths[0] == [PASSWORD]  # the seed itself: the URL names it
    for n, (kind, to) in enumerate([("MOVED", f"127.0.0.1:{trap.port}"),
                                    ("ASK", f"127.0.0.1:{trap.port}"),
                                    ("MOVED", f":{trap.port}")], start=1):
        node.kind, node.redirect = kind, to
        fetched = node.cluster_slots
        status, body = rank(rankd)
        assert status == 502, (kind, to, status, body)
        assert json.loads(body)["error"]["code"] == "backend_error", body
        assert_no_secret("an error body", body)
        # The map was fetched again (from the known node) before the redirect was refused.
        assert node.cluster_slots > fetched, (kind, node.cluster_slots, fetched)
        assert unknown_redirects(rankd) == n
    trap.settle()  # every connection made to it before now has been counted
    assert trap.connections == 0 and trap.received == b"", (trap.connections, trap.received)
    # The wait for the map is bounded by the request's deadline: a slow CLUSTER SLOTS
    # makes it 504, and the redirect is not decided (nor counted) after the deadline.
    node.slots_delay = 1.0
    installed = map_refreshes(rankd)
    status, _, body = rankd.request("POST", "/rank", {"plan": "viewer", "user_id": 7,
                                                      "deadline_ms": 300})
    assert status == 504, (status, body)
    wait_until(lambda: map_refreshes(rankd) > installed, what="the slow CLUSTER SLOTS installed")
    node.slots_delay = 0
    assert unknown_redirects(rankd) == 3
    status, body = rank(rankd)
    assert status == 502 and unknown_redirects(rankd) == 4, (status, body)
    log = rankd.stderr()
    assert f"MOVED from 127.0.0.1:{node.port} to 127.0.0.1:{trap.port} not followed" in log, log
    assert "ASK from" in log, log
    assert_no_secret("rankd's log", log)
    assert_no_secret("/metrics", rankd.metrics())
    rankd.stop()


def test_a_redirect_to_a_node_of_the_fetched_map_is_followed():
    real = Redis()
    real.execute("HSET", "user:7", "country", "FR", "age", "33")
    node = FakeClusterNode(redirect=f"127.0.0.1:{real.port}")
    rankd = Rankd(plans_dir(PLANS, indexes=False), redis=Url(node.url()),
                  extra_args=["--deadline-ms", "2000"]).wait_ready()
    # The slots move to a node rankd has not seen: the first MOVED there fetches the map.
    node.slots = [(0, 16383, [("127.0.0.1", real.port)])]
    status, body = rank(rankd)
    assert status == 200, body
    assert json.loads(body)["items"][0]["country"] == "FR", body
    text = rankd.metrics()
    assert metric_value(text, "rankd_redis_cluster_redirects_total", kind="moved") == 1, text
    assert unknown_redirects(rankd) == 0
    status, body = rank(rankd)  # now straight to the new owner
    assert status == 200, body
    assert metric_value(rankd.metrics(), "rankd_redis_cluster_redirects_total", kind="moved") == 1
    rankd.stop()


def test_cluster_slots_naming_too_many_nodes_is_refused_and_the_map_kept():
    traps = [Trap() for _ in range(4)]
    node = FakeClusterNode(redirect=f"127.0.0.1:{traps[0].port}")
    node.answer = lambda args: b"*4\r\n$7\r\ncountry\r\n$2\r\nFR\r\n$3\r\nage\r\n$2\r\n33\r\n"
    rankd = Rankd(plans_dir(PLANS, indexes=False), redis=Url(node.url()),
                  extra_args=["--deadline-ms", "2000", "--redis-max-cluster-nodes", "3"]).wait_ready()
    status, body = rank(rankd)
    assert status == 200, body
    # One node past the bound: 4 masters, each a trap.
    node.slots = [(i * 4096, i * 4096 + 4095, [("127.0.0.1", t.port)]) for i, t in enumerate(traps)]
    node.answer = node._redirect  # a MOVED to a stranger makes rankd fetch the map now
    fetched = node.cluster_slots
    status, body = rank(rankd)
    assert status == 502, body
    assert node.cluster_slots > fetched
    wait_until(lambda: "more than 3 nodes (--redis-max-cluster-nodes)" in rankd.stderr(),
               what="the refused reply logged")
    assert "the slot map is kept" in rankd.stderr()
    # The old map serves on: the fake node answers again.
    node.answer = lambda args: b"*4\r\n$7\r\ncountry\r\n$2\r\nFR\r\n$3\r\nage\r\n$2\r\n33\r\n"
    status, body = rank(rankd)
    assert status == 200, body
    for t in traps:
        t.settle()
    assert all(t.connections == 0 for t in traps), [t.connections for t in traps]
    rankd.stop()


# --- passwords -----------------------------------------------------------------------

_redis = {}


def acl_redis():
    """A redis-server that needs a password: requirepass for the default user and an ACL
    user alice whose password holds '@' and ':'."""
    if not _redis:
        r = Redis()
        r.execute_many([("HSET", "user:7", "country", "FR", "age", "33"),
                        ("ACL", "SETUSER", "alice", "on", ">" + ALICE_PW, "~*", "+@all"),
                        ("CONFIG", "SET", "requirepass", DEFAULT_PW)])
        _redis["r"] = r
    return _redis["r"]


def password_file(content):
    path = os.path.join(temp_dir("rankd-pw-"), "password")
    with open(path, "w") as f:
        f.write(content)
    os.chmod(path, 0o600)
    return path


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def test_a_password_in_every_form_reaches_redis_and_nothing_else():
    r = acl_redis()
    hp = f"127.0.0.1:{r.port}"
    default_file = password_file(DEFAULT_PW + "\n")
    alice_file = password_file(ALICE_PW + "\r\n")
    forms = [  # (URL, extra flags, whether argv is free of the password)
        (f"redis://:{DEFAULT_PW}@{hp}", [], False),
        (f"redis://{DEFAULT_PW}@{hp}", [], False),
        (f"redis://default:{DEFAULT_PW}@{hp}", [], False),
        (f"redis://alice:{ALICE_PW_ENCODED}@{hp}", [], False),
        (f"redis://alice:{ALICE_PW}@{hp}/0?prefix=", [], False),
        (f"redis://alice:@{hp}?password_file={alice_file}", [], True),
        (f"redis://{hp}", ["--redis-password-file", f"redis_default={default_file}"], True),
        (f"redis://alice:@{hp}", [f"--redis-password-file=redis_default={alice_file}"], True),
    ]
    for url, flags, clean_argv in forms:
        rankd = Rankd(plans_dir(PLANS, indexes=False), redis=Url(url),
                      extra_args=flags + ["--log-level", "debug"]).wait_ready()
        status, body = rank(rankd)
        assert status == 200, (url, body)
        assert json.loads(body)["items"][0]["country"] == "FR", body
        status, body = rank(rankd, user_id="not-a-number")  # an error body
        assert status >= 400, body
        assert_no_secret(f"an error body ({url})", body)
        assert_no_secret(f"/metrics ({url})", rankd.metrics())
        assert_no_secret(f"/readyz ({url})", rankd.request("GET", "/readyz")[2].decode())
        if clean_argv:
            assert_no_secret(f"argv ({url})", cmdline(rankd.proc.pid))
        rankd.stop()
        assert_no_secret(f"rankd's log ({url})", rankd.stderr())


def test_a_wrong_password_is_503_and_leaves_no_trace():
    r = acl_redis()
    hp = f"127.0.0.1:{r.port}"
    wrong = "wr0ng-Pa55-Kv3"
    forms = [(f"redis://:{wrong}@{hp}", []),
             (f"redis://alice:{wrong}@{hp}", []),
             (f"redis://alice:@{hp}", ["--redis-password-file",
                                       f"redis_default={password_file(wrong)}"])]
    for url, flags in forms:
        rankd = Rankd(plans_dir(PLANS, indexes=False), redis=Url(url), extra_args=flags + ["--log-level", "debug"])
        status, body = rank(rankd)
        assert status == 503, (url, status, body)
        assert json.loads(body)["error"]["code"] == "unavailable", body
        wait_until(lambda: "WRONGPASS" in rankd.stderr(), what="the AUTH failure logged")
        secrets = [wrong, "Kv3", "wr0ng"]
        assert_no_secret(f"an error body ({url})", body, secrets)
        assert_no_secret(f"/metrics ({url})", rankd.metrics(), secrets)
        assert_no_secret(f"/readyz ({url})", rankd.request("GET", "/readyz")[2].decode(), secrets)
        rankd.stop()
        assert_no_secret(f"rankd's log ({url})", rankd.stderr(), secrets)


def test_help_and_flag_errors_never_show_a_password():
    url = f"redis://alice:{ALICE_PW_ENCODED}@127.0.0.1:1"
    runs = [
        (["serve", "--redis", f"redis_default={url}", "--help"], 0),
        (["--help"], 0),
        (["serve", "--redis", f"redis_default=redis://alice:{ALICE_PW}@127.0.0.1:0"], 2),
        (["serve", "--redis", f"x={url}", "--redis", f"x={url}"], 2),
        (["serve", f"--rediss=redis_default={url}"], 2),
        (["serve", url], 2),
        (["run", "--redis", f"redis_default=redis://:{DEFAULT_PW}@h:1?tls_ca=/x"], 2),
        (["seed", "--redis", f"rediss://:{DEFAULT_PW}@127.0.0.1:1/zz"], 2),
    ]
    for args, rc in runs:
        out = subprocess.run([RANKD, *args], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == rc, (args, out.returncode, out.stderr)
        assert_no_secret(f"rankd {args[0]} output", out.stdout + out.stderr)
        if any(a.startswith("--rediss=") for a in args):
            assert "unknown flag '--rediss'" in out.stderr, out.stderr


# --- the same Redis flags on every command ---------------------------------------------

def test_every_command_takes_the_redis_flags_and_checks_their_files():
    cmds = {"serve": [], "run": [], "bench": ["--plan", "viewer"], "replay": ["--log", "/x"],
            "seed": []}
    for cmd, extra in cmds.items():
        url = "rediss://127.0.0.1:1" if cmd == "seed" else "redis_default=rediss://127.0.0.1:1"
        checks = [
            (["--redis", url, "--redis-tls-ca", "/nonexistent/ca.pem"],
             "redis endpoint 'redis_default': TLS: cannot load the CA file '/nonexistent/ca.pem'"),
            (["--redis", url + "?tls_cert=/nonexistent/c.pem&tls_key=/nonexistent/k.pem",
              "--redis-tls-ca", "/etc/ssl/certs/ca-certificates.crt"],
             "cannot load the client certificate '/nonexistent/c.pem'"),
            (["--redis-password-file", "redis_default=/nonexistent/pw"],
             "redis endpoint 'redis_default': password file '/nonexistent/pw': cannot read it"),
            (["--redis-tls-key", "/k.pem"], "--redis-tls-key: no --redis endpoint uses TLS"),
            (["--redis", "redis_default=redis://h:1?tls_verify=off"],
             "tls_verify: TLS parameters on a URL without TLS"),
        ]
        for flags, says in checks:
            if not os.path.exists("/etc/ssl/certs/ca-certificates.crt") and "ca-certificates" in " ".join(flags):
                continue
            out = subprocess.run([RANKD, cmd, *extra, *flags], capture_output=True, text=True,
                                 timeout=30, stdin=subprocess.DEVNULL)
            assert out.returncode == 2, (cmd, flags, out.returncode, out.stdout, out.stderr)
            assert says in out.stderr, (cmd, flags, out.stderr)


if __name__ == "__main__":
    run_tests([
        ("redirects to unknown nodes send nothing there",
         test_redirects_to_unknown_nodes_send_nothing_there),
        ("a redirect to a node of the fetched map is followed",
         test_a_redirect_to_a_node_of_the_fetched_map_is_followed),
        ("CLUSTER SLOTS naming too many nodes is refused and the map kept",
         test_cluster_slots_naming_too_many_nodes_is_refused_and_the_map_kept),
        ("a password in every form reaches Redis and nothing else",
         test_a_password_in_every_form_reaches_redis_and_nothing_else),
        ("a wrong password is 503 and leaves no trace", test_a_wrong_password_is_503_and_leaves_no_trace),
        ("help and flag errors never show a password", test_help_and_flag_errors_never_show_a_password),
        ("every command takes the Redis flags and checks their files",
         test_every_command_takes_the_redis_flags_and_checks_their_files),
    ])
