"""Redis over TLS: rankd's own transport with OpenSSL against Debian's
redis-server listening with --tls-port only, certificates made by the openssl CLI
(tests/support/tls_certs.py).

- rediss:// with the test CA: the seeder writes the demo data over TLS and /rank serves it.
- Mutual TLS: a server that requires client certificates refuses rankd without one (503,
  a log line naming the endpoint and OpenSSL's reason) and serves it with one.
- A wrong CA, an expired certificate, a certificate that does not name the host: each
  fails closed (503, /readyz not ready) with the reason logged; tls_verify=off is the
  explicit, logged opt-out.
- The cache's tracking connection over TLS: a write invalidates a cached answer.
- The served-log stream sink, `rankd run` and `rankd bench` over TLS.
- A Redis Cluster over TLS whose node certificates name only "localhost" while CLUSTER
  SLOTS answers 127.0.0.1: nodes are verified as the seed URL's host (plain build only).
"""
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import (RANKD, SANITIZED, Rankd, Redis, demo_data, plans_dir, run_tests,  # noqa: E402
                     temp_dir, wait_until, metric_value)
from tls_certs import make_certs  # noqa: E402

CERTS = make_certs()


class At:
    """What Rankd(redis=...) takes: a URL and the TLS flags to reach it."""

    def __init__(self, url, *flags):
        self._url, self._flags = url, list(flags)

    def url(self):
        return self._url

    def tls_args(self):
        return self._flags


def rank(rankd, user=3, plan="feed"):
    status, _, data = rankd.request("POST", "/rank", {"plan": plan, "user_id": user})
    return status, json.loads(data)


def ready(rankd):
    return rankd.request("GET", "/readyz")[0] == 200


def wait_logged(rankd, *parts, timeout=10):
    wait_until(lambda: all(p in rankd.stderr() for p in parts), timeout=timeout,
               what=f"log lines with {parts}: {rankd.stderr()[-1500:]}")


def test_tls_serves_the_demo_and_seeds_over_tls():
    redis = Redis(tls=CERTS)
    demo_data(redis, 30)  # rankd seed over rediss://
    rankd = Rankd(plans_dir(), redis=redis).wait_ready()
    status, body = rank(rankd)
    assert status == 200 and body["items"], body
    m = rankd.metrics()
    assert metric_value(m, "rankd_redis_connections", endpoint="redis_default",
                        state="live") >= 1, m[:2000]
    rankd.stop()


def test_mutual_tls_needs_the_client_certificate():
    redis = Redis(tls=CERTS, auth_clients=True)
    demo_data(redis, 10)
    without = Rankd(plans_dir(), redis=At(redis.url(), "--redis-tls-ca", CERTS.ca))
    wait_logged(without, "redis_default", "TLS")
    status, body = rank(without)
    assert status == 503, body
    assert not ready(without)
    with_cert = Rankd(plans_dir(), redis=redis).wait_ready()  # tls_args add the certificate
    status, body = rank(with_cert)
    assert status == 200 and body["items"], body
    # The per-URL parameters override the flags: the certificate given in the URL.
    url = f"{redis.url()}?tls_cert={CERTS.client}&tls_key={CERTS.client_key}&tls_ca={CERTS.ca}"
    by_url = Rankd(plans_dir(), redis=At(url, "--redis-tls-ca", CERTS.other_ca)).wait_ready()
    assert rank(by_url)[0] == 200
    for r in (without, with_cert, by_url):
        r.stop()


def test_bad_certificates_fail_closed_with_the_reason_logged():
    good = Redis(tls=CERTS)
    expired = Redis(tls=CERTS, server_cert=CERTS.expired)
    dns_only = Redis(tls=CERTS, server_cert=CERTS.dns_only)
    cases = [
        ("wrong CA", good.url(), ["--redis-tls-ca", CERTS.other_ca], "certificate verify failed"),
        ("expired", expired.url(), ["--redis-tls-ca", CERTS.ca], "certificate has expired"),
        # The certificate names localhost only; the URL's host is the address.
        ("host mismatch", f"rediss://127.0.0.1:{dns_only.port}", ["--redis-tls-ca", CERTS.ca],
         "certificate verify failed"),
    ]
    for what, url, args, reason in cases:
        rankd = Rankd(plans_dir(), redis=At(url, *args))
        wait_logged(rankd, "redis endpoint redis_default", "TLS handshake failed", reason)
        status, body = rank(rankd)
        assert status == 503, (what, body)
        assert body["error"]["code"] == "unavailable", (what, body)
        assert not ready(rankd), what
        rankd.stop()
    # The explicit opt-out connects to the wrong CA's server, and says so in the log.
    rankd = Rankd(plans_dir(), redis=At(f"{good.url()}?tls_verify=off",
                                        "--redis-tls-ca", CERTS.other_ca)).wait_ready()
    assert "tls_verify=off" in rankd.stderr()
    assert rank(rankd)[0] == 200
    rankd.stop()


def test_plain_client_against_a_tls_server_fails_closed():
    redis = Redis(tls=CERTS)
    rankd = Rankd(plans_dir(), redis=At(f"redis://127.0.0.1:{redis.port}"))
    status, body = rank(rankd)
    assert status == 503, body
    assert rankd.proc.poll() is None
    rankd.stop()


def test_cache_tracker_over_tls():
    """The demo feed caches its features reads; a write to an item it read reaches rankd
    as an invalidation through the tracking connection, over TLS."""
    redis = Redis(tls=CERTS)
    demo_data(redis, 10)
    rankd = Rankd(plans_dir(), redis=redis, extra_args=["--cache-mb", "16"]).wait_ready()

    def invalidations():
        return metric_value(rankd.metrics(), "rankd_cache_invalidations_total") or 0

    status, body = rank(rankd, 3)
    assert status == 200 and body["items"], body
    item = body["items"][0]["id"]
    before = invalidations()
    deadline = time.monotonic() + 10
    while invalidations() <= before:
        assert time.monotonic() < deadline, "no invalidation over the TLS tracking connection"
        rank(rankd, 3)  # reads (and tracks) the item again
        assert redis.execute("HSET", f"item:{item}", "likes", "123456") in (0, 1)
        time.sleep(0.1)
    rankd.stop()


def test_served_log_run_and_bench_over_tls():
    """The served-log stream sink writes over TLS; `rankd run` and `rankd bench` read over
    TLS."""
    redis = Redis(tls=CERTS)
    demo_data(redis, 10)
    rankd = Rankd(plans_dir(), redis=redis, extra_args=[
        "--served-log", "main=redis-stream://redis_default?stream=served&maxlen=1000",
        "--allow-forced-logging"]).wait_ready()
    status, body = rank(rankd, 3, plan="rerank")
    assert status == 200, body
    status, _, data = rankd.request("POST", "/rank", {"plan": "rerank", "user_id": 4, "log": True})
    assert status == 200 and "served_id" in json.loads(data), data
    wait_until(lambda: redis.execute("XLEN", "served") >= 1, what="a record over TLS")
    rankd.stop()
    flags = ["--redis", f"redis_default={redis.url()}", "--redis-tls-ca", CERTS.ca,
             "--enable-test-ops"]
    run = subprocess.run([RANKD, "run", "--plans", plans_dir(), "--plan", "feed"] + flags,
                         input='{"user_id": 3}', capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and json.loads(run.stdout)["items"], run.stdout + run.stderr
    bench = subprocess.run([RANKD, "bench", "--plans", plans_dir(), "--plan", "feed",
                            "-n", "20"] + flags,
                           capture_output=True, text=True, timeout=60)
    assert bench.returncode == 0, bench.stdout + bench.stderr


def test_cluster_over_tls_verifies_nodes_as_the_seed_host():
    if SANITIZED:
        print("skipped under sanitizers: a Redis Cluster runs in the plain build only")
        return
    d = temp_dir("rankd-tls-cluster-")
    # Below the ephemeral range with room for the bus ports (+10000), as test_cluster.py.
    base = random.randrange(12000, 22000)
    ports = [base, base + 1, base + 2]
    procs = []
    tls = ["--tls-cert-file", CERTS.dns_only, "--tls-key-file", CERTS.server_key,
           "--tls-ca-cert-file", CERTS.ca, "--tls-auth-clients", "no", "--tls-cluster", "yes",
           "--tls-replication", "yes"]
    for p in ports:
        nd = os.path.join(d, str(p))
        os.makedirs(nd)
        procs.append(subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(p),
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--save", "",
             "--appendonly", "no", "--dir", nd, "--loglevel", "warning"] + tls,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        cli = ["redis-cli", "--tls", "--cacert", CERTS.ca, "--sni", "localhost"]
        wait_until(lambda: all(subprocess.run(cli + ["-p", str(p), "ping"], capture_output=True,
                                              text=True).stdout.strip() == "PONG" for p in ports),
                   what="TLS cluster nodes")
        out = subprocess.run(cli + ["--cluster", "create"] + [f"127.0.0.1:{p}" for p in ports] +
                             ["--cluster-replicas", "0", "--cluster-yes"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        wait_until(lambda: "cluster_state:ok" in subprocess.run(
            cli + ["-p", str(ports[0]), "cluster", "info"], capture_output=True,
            text=True).stdout, what="cluster_state:ok")
        url = "rediss-cluster://" + ",".join(f"localhost:{p}" for p in ports)
        seed = subprocess.run([RANKD, "seed", "--redis", url, "--users", "20", "--redis-tls-ca",
                               CERTS.ca], capture_output=True, text=True, timeout=60)
        assert seed.returncode == 0, seed.stderr
        rankd = Rankd(plans_dir(), redis=At(url, "--redis-tls-ca", CERTS.ca)).wait_ready()
        for user in range(1, 10):
            status, body = rank(rankd, user)
            assert status == 200, (body, rankd.stderr()[-3000:])
        rankd.stop()
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    run_tests([(n, f) for n, f in list(globals().items()) if n.startswith("test_")])
