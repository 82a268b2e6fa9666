"""Reads a counters key as rankd lays it out (src/events/counter_layout.h, docs/events.md),
for tests that check what rankd wrote: one hash per id holding a ring of keep_s / bucket_s
+ 1 slots; the bucket of index i (its start / bucket_s) lives in slot i mod ring; a slot is
the index it holds (u32 little-endian, 0: none) and one f64 little-endian sum per event
type of the family's `count`, in that order; 8 slots a hash field, named by its block
number in decimal, a field possibly shorter than its 8 slots."""
import struct

SLOTS_PER_FIELD = 8


class CounterKey:
    """A counters key from its HGETALL reply (a flat [field, value, ...] list: a value is
    bytes, or str when its bytes happen to be UTF-8) and its family's `count`, bucket_s and
    keep_s:
    `buckets` {(type, bucket start): sum} of the slots' non-zero sums, `blocks` the number
    of hash fields, `slots` the slots holding a bucket. Asserts the layout: whole slots,
    each in the place its index says."""

    def __init__(self, flat, count, bucket_s, keep_s):
        ring = keep_s // bucket_s + 1
        width = 4 + 8 * len(count)
        self.blocks = len(flat) // 2
        self.buckets = {}
        self.slots = 0
        for field, value in zip(flat[0::2], flat[1::2]):
            value = value.encode() if isinstance(value, str) else value  # the same bytes
            block = int(field)
            assert 0 <= block * SLOTS_PER_FIELD < ring, (field, ring)
            assert len(value) % width == 0 and len(value) <= SLOTS_PER_FIELD * width, (field, len(value))
            for j in range(len(value) // width):
                index, *sums = struct.unpack_from(f"<I{len(count)}d", value, j * width)
                if index == 0:
                    continue
                self.slots += 1
                assert index % ring == block * SLOTS_PER_FIELD + j, (field, j, index, ring)
                for kind, v in zip(count, sums):
                    if v:
                        self.buckets[(kind, index * bucket_s)] = v

    def starts(self, kind):
        """The bucket starts of `kind` holding a non-zero sum, oldest first."""
        return sorted(b for k, b in self.buckets if k == kind)
