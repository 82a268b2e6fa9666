#!/usr/bin/python3
"""Hit ratios of the eviction policies the shard cache could use: SIEVE, LRU, CLOCK.

Counts entries, not bytes (every key costs 1), on two kinds of key streams:
  (a) Zipf(alpha) over 100k keys, alpha 0.8 / 1.0 / 1.2, caches of 1% / 5% / 10%;
  (b) a feed-like pattern: a viewer (uniform over 2000) reads its follow list, the media
      lists of its ~50 followed authors (authors Zipf 1.0 over 2000) and ~500 items
      (Zipf 1.0 over 20000); caches of 1% / 5% / 10% of the 24000 keys.
A warm-up part of each stream is not counted. Plain python3, no dependencies; the
random generator starts from a fixed value, so every run prints the same table
(about 40 s). docs/cache.md holds the results.

Usage: bench/cache_policy.py [--quick]
"""
import bisect
import collections
import itertools
import random
import sys


class Lru:
    def __init__(self, size):
        self.size = size
        self.d = collections.OrderedDict()

    def access(self, k):
        d = self.d
        if k in d:
            d.move_to_end(k)
            return True
        if len(d) >= self.size:
            d.popitem(last=False)
        d[k] = None
        return False


class Clock:
    """Second chance over a ring of slots; a new key enters with its bit clear."""

    def __init__(self, size):
        self.size = size
        self.slot = {}  # key -> slot index
        self.keys = []
        self.ref = []
        self.hand = 0

    def access(self, k):
        i = self.slot.get(k)
        if i is not None:
            self.ref[i] = True
            return True
        if len(self.keys) < self.size:
            self.slot[k] = len(self.keys)
            self.keys.append(k)
            self.ref.append(False)
            return False
        ref, n, h = self.ref, self.size, self.hand
        while ref[h]:
            ref[h] = False
            h = h + 1 if h + 1 < n else 0
        del self.slot[self.keys[h]]
        self.keys[h] = k
        self.slot[k] = h
        self.hand = h + 1 if h + 1 < n else 0
        return False


class Sieve:
    """SIEVE (Zhang et al., NSDI '24): a FIFO queue, a visited bit, a hand that walks from
    the oldest entry towards the newest and evicts the first unvisited one; a hit only
    sets the bit (no move)."""

    def __init__(self, size):
        self.size = size
        self.visited = {}  # key -> bit; also the membership test
        self.newer = {}  # key -> the next newer key (None at the head)
        self.older = {}  # key -> the next older key (None at the tail)
        self.head = None  # newest
        self.tail = None  # oldest
        self.hand = None

    def access(self, k):
        visited = self.visited
        if k in visited:
            visited[k] = True
            return True
        if len(visited) >= self.size:
            self._evict()
        visited[k] = False
        self.older[k] = self.head
        self.newer[k] = None
        if self.head is not None:
            self.newer[self.head] = k
        self.head = k
        if self.tail is None:
            self.tail = k
        return False

    def _evict(self):
        visited, newer = self.visited, self.newer
        o = self.hand if self.hand is not None else self.tail
        while visited[o]:
            visited[o] = False
            o = newer[o]
            if o is None:
                o = self.tail
        self.hand = newer[o]
        # unlink o
        n, p = newer.pop(o), self.older.pop(o)
        del visited[o]
        if n is not None:
            self.older[n] = p
        else:
            self.head = p
        if p is not None:
            newer[p] = n
        else:
            self.tail = n


POLICIES = [("SIEVE", Sieve), ("LRU", Lru), ("CLOCK", Clock)]


def zipf_cum(n, alpha):
    return list(itertools.accumulate(1.0 / (r**alpha) for r in range(1, n + 1)))


def zipf_stream(rng, n, alpha, count):
    # Ranks are mapped to shuffled ids so popularity is unrelated to key order.
    ids = list(range(n))
    rng.shuffle(ids)
    cum = zipf_cum(n, alpha)
    return [ids[r] for r in rng.choices(range(n), cum_weights=cum, k=count)]


def feed_stream(rng, requests):
    viewers, authors, items = 2000, 2000, 20000
    author_cum = zipf_cum(authors, 1.0)
    item_cum = zipf_cum(items, 1.0)
    author_ids = list(range(authors))
    rng.shuffle(author_ids)
    item_ids = list(range(items))
    rng.shuffle(item_ids)
    follows = []
    for _ in range(viewers):
        picked = set()
        want = rng.randint(40, 60)
        while len(picked) < want:
            picked.add(author_ids[bisect.bisect_left(author_cum, rng.random() * author_cum[-1])])
        follows.append(sorted(picked))
    stream = []
    for _ in range(requests):
        v = rng.randrange(viewers)
        stream.append(("follow", v))
        stream.extend(("media", a) for a in follows[v])
        drawn = rng.choices(range(items), cum_weights=item_cum, k=rng.randint(450, 550))
        stream.extend(("item", item_ids[i]) for i in dict.fromkeys(drawn))
    return stream, viewers + authors + items


def hit_ratio(policy, size, stream, warm):
    cache = policy(size)
    access = cache.access
    for k in stream[:warm]:
        access(k)
    hits = 0
    for k in stream[warm:]:
        hits += access(k)
    return hits / (len(stream) - warm)


def main():
    quick = "--quick" in sys.argv
    rng = random.Random(20261127)
    rows = []
    n = 100_000
    count, warm = (400_000, 100_000) if quick else (1_500_000, 300_000)
    for alpha in (0.8, 1.0, 1.2):
        stream = zipf_stream(rng, n, alpha, count)
        for pct in (1, 5, 10):
            size = n * pct // 100
            r = [hit_ratio(p, size, stream, warm) for _, p in POLICIES]
            rows.append((f"Zipf {alpha} / 100k keys", f"{pct}%", r))
            print_row(rows[-1], flush=True)
    requests = 1500 if quick else 6000
    stream, keys = feed_stream(rng, requests)
    warm = len(stream) // 4
    for pct in (1, 5, 10):
        size = keys * pct // 100
        r = [hit_ratio(p, size, stream, warm) for _, p in POLICIES]
        rows.append((f"feed / {keys} keys", f"{pct}%", r))
        print_row(rows[-1], flush=True)
    print()
    print("| stream | cache | " + " | ".join(name for name, _ in POLICIES) + " |")
    print("|---|---|" + "---|" * len(POLICIES))
    for row in rows:
        print_row(row, markdown=True)


def print_row(row, markdown=False, flush=False):
    stream, pct, ratios = row
    cells = [f"{100 * x:.1f}%" for x in ratios]
    best = max(ratios)
    if markdown:
        cells = [f"**{c}**" if x == best else c for c, x in zip(cells, ratios)]
        print(f"| {stream} | {pct} | " + " | ".join(cells) + " |")
    else:
        print(f"{stream:24} {pct:>4}  " + "  ".join(f"{n}={c}" for (n, _), c in
                                                    zip(POLICIES, cells)), file=sys.stderr,
              flush=flush)


if __name__ == "__main__":
    main()
