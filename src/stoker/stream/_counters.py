"""What a dataset's readers did, counted across processes: one object, handed to every stage
that counts (the sample reader, the shard access, the tensor reader).

The counts live in shared memory, so that the reads of DataLoader worker processes add up in
the training process, where the metrics are read. Stages add once per batch or per shard, not
per sample: each ``add`` takes a lock shared by every process.
"""

from __future__ import annotations

from typing import Any

NAMES = ("bytes_fetched", "bytes_read", "cache_hits", "cache_misses", "skipped", "samples")


class Counters:
    def __init__(self, mp_context: Any) -> None:
        self._shared = mp_context.Array("q", len(NAMES))

    def add(self, **counts: int) -> None:
        with self._shared.get_lock():
            # The plain array under the lock: each item of the synchronized one would take the
            # lock again.
            values = self._shared.get_obj()
            for name, n in counts.items():
                values[NAMES.index(name)] += n

    def snapshot(self) -> dict[str, int]:
        return dict(zip(NAMES, self._shared[:], strict=True))


def add_together(counts: list[tuple[Counters, dict[str, int]]]) -> None:
    """Each set of counters told the sum of its ``counts``: one add, and so one lock, for the
    counts of several readers that share a set (a mixture's sources do: a lock a source cost
    a batch of small samples ~3 us each)."""
    summed: dict[int, tuple[Counters, dict[str, int]]] = {}
    for counters, these in counts:
        total = summed.setdefault(id(counters), (counters, {}))[1]
        for name, n in these.items():
            total[name] = total.get(name, 0) + n
    for counters, total in summed.values():
        counters.add(**total)
