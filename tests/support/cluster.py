"""A loopback Redis Cluster for tests: ops/cluster (3 masters, 3 replicas) in a state
folder of its own, its nodes daemons that `ops/cluster down` stops at exit, also when a
test fails."""
import atexit
import os
import random
import shutil
import subprocess
import tempfile

from harness import SOURCE_ROOT

OPS_CLUSTER = os.path.join(SOURCE_ROOT, "ops", "cluster")


class Cluster:
    """A Redis Cluster started by ops/cluster in its own state folder, on ports from a
    random base so that concurrent runs do not meet; below the kernel's ephemeral range
    (32768 up), bus ports included, so that no outgoing connection holds one."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rankd-cluster-")
        self.env = dict(os.environ, RANKD_CLUSTER_DIR=self.dir,
                        RANKD_CLUSTER_PORT=str(random.randrange(12000, 22000)))
        atexit.register(self.down)
        out = subprocess.run([OPS_CLUSTER, "up"], env=self.env, capture_output=True, text=True,
                             timeout=90)
        assert out.returncode == 0, f"ops/cluster up failed:\n{out.stdout}\n{out.stderr}"
        self.cluster_url = out.stdout.strip().splitlines()[-1]
        assert self.cluster_url.startswith("redis-cluster://"), self.cluster_url
        self.ports = [int(a.rsplit(":", 1)[1]) for a in
                      self.cluster_url[len("redis-cluster://"):].split(",")]

    def url(self):
        return self.cluster_url

    def down(self):
        subprocess.run([OPS_CLUSTER, "down"], env=self.env, capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args, port=None, timeout=30):
        out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port or self.ports[0]),
                              *args], capture_output=True, text=True, timeout=timeout)
        return out.stdout

    def masters(self):
        """[(node id, port, slot count)] of the masters not marked failed, from the CLUSTER
        NODES of the first node that answers."""
        out = []
        text = ""
        for port in self.ports:
            text = self.cli("cluster", "nodes", port=port)
            if text.strip():
                break
        for line in text.splitlines():
            parts = line.split()
            if "master" not in parts[2] or "fail" in parts[2]:
                continue
            slots = 0
            for r in parts[8:]:
                if r.startswith("["):
                    continue
                a, _, b = r.partition("-")
                slots += int(b or a) - int(a) + 1
            out.append((parts[0], int(parts[1].split("@")[0].rsplit(":", 1)[1]), slots))
        return out
