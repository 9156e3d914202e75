"""A shard read by range straight from its store, for the first batch of a cold job.

The first batch needs a few samples from each of many shards (a shuffled batch draws from
``block_shards`` of them): waiting for every whole shard would hold the first step for the time
of gigabytes. So the first batch comes by ranged GETs (each shard's tables first, one small
read), checked against their checksums like any other read. Later batches wait for whole
shards, downloaded a block ahead: ranged reads then would only slow those downloads (measured
on Azurite: 1,545-1,713 samples/s with ranged reads whenever a shard was missing, 1,764-2,030
with ranged reads for the first batch only).

``fetch_spans`` gets a batch's samples together: spans of one shard less than MERGE_GAP apart
go in one GET. A store answers a few hundred GETs a second per client while one GET moves a
megabyte in a few milliseconds (Azurite here: ~300 GETs/s, ~350 MB/s), so reading a gap of up
to a megabyte costs less than a GET of its own. A shuffled batch of 400 samples of 114 KB drawn
from 8 shards of 585 leaves gaps of ~11 samples on average, about half of them under 1 MiB.
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Any

from ._format import HEADER, CorruptSample, ShardReader
from ._index import ShardInfo

MERGE_GAP = 1 << 20  # read through a gap this small rather than start another GET
MERGE_MAX = 8 << 20  # but keep each GET small enough that many run at once


class RemoteShard(ShardReader):
    def __init__(self, info: ShardInfo, store: Any, io: Any) -> None:
        self.name, self.fd, self.store, self.io = info.name, -1, store, io
        self.got: list[tuple[int, bytes]] = []  # (offset, bytes) brought by fetch_spans
        # The header and both tables in one GET: the index says how many samples there are.
        self.head = b""
        self.head = self._pread(min(info.bytes, HEADER.size + 16 * info.samples + 8), 0)
        self._read_tables(info.bytes)

    def _pread(self, n: int, offset: int) -> bytes:
        if offset + n <= len(self.head):
            return self.head[offset : offset + n]
        data = self._fetched(offset, n)
        if data is not None and len(data) == n:
            return bytes(data)
        return bytes(self.io.run(self.store.read_range(self.name, offset, offset + n)))

    def read_into(self, i: int, offset: int, out: memoryview) -> None:
        data = self._fetched(offset, len(out))
        if data is None:
            data = self.io.run(self.store.read_range(self.name, offset, offset + len(out)))
        if len(data) != len(out):
            raise CorruptSample(self.name, i, offset + len(data))
        out[:] = data

    def _fetched(self, offset: int, n: int) -> memoryview | None:
        """Bytes ``[offset, offset + n)`` if fetch_spans brought them (as far as they go)."""
        got = self.got
        if not got:
            return None
        k = bisect.bisect_right(got, offset, key=lambda r: r[0]) - 1
        if k < 0 or offset >= got[k][0] + len(got[k][1]):
            return None
        start, data = got[k]
        return memoryview(data)[offset - start : offset - start + n]


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(offset, size) spans as (start, end) ranges, neighbours less than MERGE_GAP apart
    joined while a range stays under MERGE_MAX."""
    out: list[list[int]] = []
    for offset, size in sorted(spans):
        end = offset + size
        if out and offset - out[-1][1] < MERGE_GAP and end - out[-1][0] <= MERGE_MAX:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([offset, end])
    return [(a, b) for a, b in out]


def fetch_spans(wanted: dict[RemoteShard, list[tuple[int, int]]], inflight: int, io: Any) -> None:
    """Fetch every shard's wanted spans at once, ``inflight`` GETs at a time; each shard then
    serves those reads from memory. A failed GET leaves its span to be read by itself."""

    async def all_of() -> None:
        gate = asyncio.Semaphore(inflight)

        async def one(shard: RemoteShard, start: int, end: int) -> None:
            async with gate:
                try:
                    data = await shard.store.read_range(shard.name, start, end)
                except Exception:  # noqa: BLE001 - read_into fetches it again and reports
                    return
            bisect.insort(shard.got, (start, data), key=lambda r: r[0])

        await asyncio.gather(
            *(one(shard, a, b) for shard, spans in wanted.items() for a, b in merged(spans))
        )

    io.run(all_of())

    def close(self) -> None:
        pass
