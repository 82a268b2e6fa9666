"""The demo's `discover` plan (plans/discover.plan.ts, docs/vectors.md "The demo") on a real
rankd and a real redis-server seeded with the demo data set (`rankd seed`, embeddings
included): the item index is built from the seeded item_emb hashes before /readyz, and
`discover` answers each viewer with items, ann's among them, none the viewer has seen,
every score finite; the seeded vectors have the hidden structure (an author's items are
nearer each other than to other authors'). About 3 s.

Runs under /usr/bin/python3 (Debian's python3-numpy)."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from harness import Rankd, Redis, demo_data, metric_value, plans_dir, run_tests  # noqa: E402

USERS = 200  # 4,000 items (20 each), the newest 3 of each with an embedding: 600
MEDIA = 20
EMBEDDED = 3  # rankd seed's default --embedded-media
D = 32

_env = {}


def env():
    if not _env:
        redis = Redis()
        demo_data(redis, USERS, embeddings=True)
        _env.update(redis=redis, rankd=Rankd(plans_dir(), redis=redis, shards=2).wait_ready(timeout=60))
    return _env["rankd"], _env["redis"]


def vector(redis, key):
    raw = redis.execute("HGET", key, "emb")
    assert raw is not None and len(raw) == 4 * D, (key, raw)
    return np.frombuffer(raw if isinstance(raw, bytes) else raw.encode(), dtype="<f4")


def test_the_index_holds_every_item_with_an_embedding():
    s, redis = env()
    m = s.metrics()
    assert metric_value(m, "rankd_index_items", index="items") == USERS * EMBEDDED
    # The newest EMBEDDED of an author's items (the head of its media list) carry one.
    media = [int(x) for x in redis.execute("LRANGE", "media:7", 0, -1)]
    assert [redis.execute("EXISTS", f"emb:item:{i}") for i in media] == [1] * EMBEDDED + [0] * (MEDIA - EMBEDDED)
    assert (metric_value(m, "rankd_index_builds_total", index="items", outcome="ok") or 0) >= 1


def test_discover_answers_unseen_items_with_ann_candidates():
    s, redis = env()
    for user in (1, 7, 42, 199):
        status, _, body = s.rank({"plan": "discover", "user_id": user, "explain": False})
        assert status == 200, (status, body)
        items = body["items"]
        assert len(items) == 50, (user, len(items))
        ids = [it["id"] for it in items]
        assert len(set(ids)) == len(ids), ids
        seen = {int(x) for x in redis.execute("SMEMBERS", f"seen:{user}")}
        assert seen, user
        assert not seen & set(ids), (user, seen & set(ids))
        assert all(isinstance(it["score"], float) and math.isfinite(it["score"]) for it in items), items
        # ann's rows carry their similarity; the followed authors' media have none.
        near = [it for it in items if it["similarity"] is not None]
        assert near, items
        assert all(math.isfinite(it["similarity"]) for it in near)


def test_similarity_is_the_viewers_dot_with_the_item():
    s, redis = env()
    status, _, body = s.rank({"plan": "discover", "user_id": 3})
    assert status == 200, body
    q = vector(redis, "emb:user:3").astype(np.float64)
    for it in body["items"]:
        if it["similarity"] is not None:
            want = float(vector(redis, f"emb:item:{it['id']}").astype(np.float64) @ q)
            assert abs(it["similarity"] - want) < 1e-5, (it, want)


def test_the_embeddings_have_a_low_rank_structure():
    # Items of one author share half their mixture: nearer each other than two random items.
    _, redis = env()
    ids = [(a - 1) * MEDIA + k + 1 for a in range(1, 41) for k in range(EMBEDDED)]
    items = np.stack([vector(redis, f"emb:item:{i}") for i in ids]).astype(np.float64)
    unit = items / np.linalg.norm(items, axis=1, keepdims=True)
    cos = unit @ unit.T
    author = np.repeat(np.arange(40), EMBEDDED)
    same = author[:, None] == author[None, :]
    off = ~np.eye(len(items), dtype=bool)
    assert cos[same & off].mean() > cos[~same].mean() + 0.1, (cos[same & off].mean(), cos[~same].mean())


if __name__ == "__main__":
    run_tests([
        ("the_index_holds_every_item_with_an_embedding", test_the_index_holds_every_item_with_an_embedding),
        ("discover_answers_unseen_items_with_ann_candidates",
         test_discover_answers_unseen_items_with_ann_candidates),
        ("similarity_is_the_viewers_dot_with_the_item", test_similarity_is_the_viewers_dot_with_the_item),
        ("the_embeddings_have_a_low_rank_structure", test_the_embeddings_have_a_low_rank_structure),
    ])
