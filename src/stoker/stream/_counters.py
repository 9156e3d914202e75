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
            for name, n in counts.items():
                self._shared[NAMES.index(name)] += n

    def snapshot(self) -> dict[str, int]:
        return dict(zip(NAMES, self._shared[:], strict=True))
