"""An ann index built from a Redis Cluster (docs/vectors.md, "Building"): a loopback cluster
(ops/cluster: 3 masters, 3 replicas) holding 3,000 8-dimensional item vectors written
straight to the master of each key's slot, so that every master holds some; a real rankd
on `redis-cluster://` whose builder asks CLUSTER SLOTS and SCANs each master.

- /readyz turns ready, and `rankd_index_items` counts every item written, once: none
  missed on a master, none read twice from a replica.
- Five items on each master, queried with their own vectors (l2: similarity 0, the
  highest there is), each come first.
- Bad vectors on every master and a key whose id does not parse are skipped and counted
  (`rankd_index_skipped_total`).

A Redis Cluster runs in the plain build only (docs/testing.md). About 10 s.

Runs under /usr/bin/python3 (Debian's python3-numpy)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from cluster import Cluster  # noqa: E402
from harness import Rankd, metric_value, run_tests, temp_dir, write_plan  # noqa: E402
from test_ann import ann_plan, ids_of, rank  # noqa: E402

D = 8
ITEMS = 3000
PER_MASTER = 5  # items queried on each master
BAD = 30  # bad vectors (ids ITEMS+1..ITEMS+BAD): enough that each master holds some

SCHEMA = {"schema_version": 1, "families": {
    "user_emb": {"type": "hash", "key": "cu:{id}", "fields": {"emb": f"vec:{D}"}},
    "item_emb": {"type": "hash", "key": "ci:{id}", "fields": {"emb": f"vec:{D}"}},
}, "indexes": {"items": {"family": "item_emb", "field": "emb", "metric": "l2"}}}


def vec(v):
    return np.asarray(v, np.float32).astype("<f4").tobytes()


def test_index_holds_the_items_of_every_master():
    cluster = Cluster()
    items = np.random.default_rng(46).normal(size=(ITEMS, D)).astype(np.float32)
    on = cluster.write_to_masters(
        [["HSET", f"ci:{i + 1}", "emb", vec(items[i])] for i in range(ITEMS)])
    assert len(on) == 3 and all(len(keys) > 500 for keys in on.values()), {
        port: len(keys) for port, keys in on.items()}
    bad_on = cluster.write_to_masters(
        [["HSET", f"ci:{ITEMS + 1 + i}", "emb", vec(items[i])[:-4]] for i in range(BAD)] +
        [["HSET", "ci:x1", "emb", vec(items[0])]])
    assert len(bad_on) == 3, bad_on
    # Each viewer's vector is that of an item on a given master: the viewer u's item.
    chosen = {}
    for port, keys in sorted(on.items()):
        for key in keys[:PER_MASTER]:
            chosen[len(chosen) + 1] = int(key.split(":")[1])
    cluster.write_to_masters([["HSET", f"cu:{u}", "emb", vec(items[i - 1])]
                              for u, i in chosen.items()])
    # What each master holds, as it says itself (replicas hold copies, not more keys).
    held = [int(cluster.cli("dbsize", port=port).strip()) for _, port, _ in cluster.masters()]
    assert sum(held) == ITEMS + BAD + 1 + len(chosen) and min(held) > 500, held

    d = temp_dir("rankd-ann-cluster-")
    with open(os.path.join(d, "schema.json"), "w") as f:
        json.dump(SCHEMA, f)
    write_plan(d, "near", ann_plan("near", "items", k=3))
    s = Rankd(d, redis=cluster, shards=2).wait_ready(timeout=60)
    text = s.metrics()
    items_in = metric_value(text, "rankd_index_items", index="items")
    assert items_in == ITEMS, f"{items_in} items in the index, {ITEMS} written"
    assert metric_value(text, "rankd_index_skipped_total", index="items", kind="bad_vector") == BAD
    assert metric_value(text, "rankd_index_skipped_total", index="items", kind="bad_id") == 1
    for u, i in chosen.items():
        body = rank(s, "near", u)
        assert ids_of(body)[0] == i and body["items"][0]["similarity"] == 0, (u, i, body)
    s.stop()
    cluster.down()


if __name__ == "__main__":
    run_tests([(name, fn) for name, fn in list(globals().items()) if name.startswith("test_")])
