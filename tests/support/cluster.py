"""A loopback Redis Cluster for tests: ops/cluster (3 masters, 3 replicas) in a state
folder of its own, its nodes daemons that `ops/cluster down` stops at exit, also when a
test fails."""
import atexit
import os
import random
import shutil
import subprocess
import tempfile

from fake_cluster import key_slot
from harness import SOURCE_ROOT, RespClient

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
        return [(node_id, port, len(slots)) for node_id, port, slots in self._master_slots()]

    def _master_slots(self):
        """[(node id, port, [slot, ...])] of the masters not marked failed (migrating and
        importing slots left out), from the CLUSTER NODES of the first node that answers."""
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
            slots = []
            for r in parts[8:]:
                if r.startswith("["):
                    continue
                a, _, b = r.partition("-")
                slots.extend(range(int(a), int(b or a) + 1))
            out.append((parts[0], int(parts[1].split("@")[0].rsplit(":", 1)[1]), slots))
        return out

    def write_to_masters(self, commands):
        """Sends each command (a list whose second word is its key, with no hash tag)
        straight to the master of the key's slot, pipelined per master; returns {port: [keys
        of the commands sent there]}. Fails on any error reply (a MOVED included)."""
        owner = {}
        for _, port, slots in self._master_slots():
            owner.update((slot, port) for slot in slots)
        per_port = {}
        for c in commands:
            key = c[1] if isinstance(c[1], bytes) else str(c[1]).encode()
            per_port.setdefault(owner[key_slot(key)], []).append(c)
        for port, cmds in per_port.items():
            for start in range(0, len(cmds), 5000):
                for reply in RespClient(port).execute_many(cmds[start:start + 5000]):
                    assert not isinstance(reply, Exception), (port, reply)
        return {port: [c[1] for c in cmds] for port, cmds in per_port.items()}
