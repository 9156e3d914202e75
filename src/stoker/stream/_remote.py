"""A shard read by range straight from its store while its whole download is still running.

The first batches of a cold job need a few samples from each of many shards (a shuffled batch
draws from ``block_shards`` of them): waiting for every whole shard would hold the first step
for the time of gigabytes. Until a shard is in the node cache, its samples come by ranged GETs
(its tables first, one small read), checked against their checksums like any other read.
"""

from __future__ import annotations

from typing import Any

from ._format import CorruptSample, ShardReader


class RemoteShard(ShardReader):
    def __init__(self, name: str, size: int, store: Any, io: Any) -> None:
        self.name, self.fd, self.store, self.io = name, -1, store, io
        self._read_tables(size)

    def _pread(self, n: int, offset: int) -> bytes:
        return bytes(self.io.run(self.store.read_range(self.name, offset, offset + n)))

    def read_into(self, i: int, offset: int, out: memoryview) -> None:
        data = self.io.run(self.store.read_range(self.name, offset, offset + len(out)))
        if len(data) != len(out):
            raise CorruptSample(self.name, i, offset + len(data))
        out[:] = data

    def close(self) -> None:
        pass
