"""Shards read by range straight from their store, for the first batch of a cold job.

The first batch needs a few samples from each of many shards (a shuffled batch draws from
``block_shards`` of them): waiting for every whole shard would hold the first step for the time
of gigabytes. So the first batch comes by ranged GETs, checked against their checksums like any
other read. Later batches wait for whole shards, downloaded a block ahead: ranged reads then
would only slow those downloads (docs/stream-notes.md).

The GETs are latency-bound (a few hundred of ~100 KiB each), so they are all issued at once on
the IO loop, ``INFLIGHT`` at a time: the shards' tables first (one small GET each), then every
sample of the batch, straight into the batch's rows (``fetch_into``) or, for samples that are
decoded, into memory the readers then take them from (``fetch_samples``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any

from ..errors import StokerError
from ._format import HEADER, CorruptSample, ShardReader
from ._index import ShardInfo

# GETs at once: 8 left the service idle between requests.
INFLIGHT = 32
PIECE = 8 << 20  # a larger decoded sample is fetched in ranges of this size, in parallel


class RemoteShard(ShardReader):
    def __init__(self, info: ShardInfo, head: Any, store: Any, io: Any) -> None:
        self.name, self.fd, self.store, self.io = info.name, -1, store, io
        self.head = bytes(head)  # the header and both tables: the index says how many samples
        self.got: dict[int, Any] = {}  # sample -> its bytes, fetched ahead by fetch_samples
        self._read_tables(info.bytes)

    @staticmethod
    def head_bytes(info: ShardInfo) -> int:
        return min(info.bytes, HEADER.size + 16 * info.samples + 8)

    def _pread(self, n: int, offset: int) -> bytes:
        if offset + n <= len(self.head):
            return self.head[offset : offset + n]
        return bytes(self.io.run(self.store.read_range(self.name, offset, offset + n)))

    def raw(self, i: int) -> bytes:
        data = self.got.pop(i, None)
        if data is None:
            return super().raw(i)
        self.check(i, memoryview(data))
        return bytes(data)

    def close(self) -> None:
        self.got.clear()


def open_remote(infos: dict[int, ShardInfo], store: Any, io: Any) -> dict[int, RemoteShard]:
    """The shards whose tables could be read, by shard number. One that failed is left out: it
    will be downloaded whole, which retries and names the shard if it fails again."""

    async def one(info: ShardInfo) -> RemoteShard:
        head = await store.read_range(info.name, 0, RemoteShard.head_bytes(info))
        return RemoteShard(info, head, store, io)

    shards = io.run(_bounded((one(info) for info in infos.values()), errors_ok=True))
    return {
        s: shard
        for s, shard in zip(infos, shards, strict=True)
        if not isinstance(shard, BaseException)
    }


def fetch_samples(wanted: list[tuple[RemoteShard, int]]) -> None:
    """Every wanted sample's bytes into its shard's ``got`` (for samples that are decoded), in
    ranges of up to PIECE, all at once (a short read is caught by the sample's checksum)."""
    pieces = []
    for shard, i in wanted:
        offset, size = shard.span(i)
        buf = shard.got[i] = memoryview(bytearray(size))
        pieces += [
            (shard, i, start, buf[start - offset : start - offset + PIECE])
            for start in range(offset, offset + size, PIECE)
        ]
    fetch_into(pieces)


def fetch_into(pieces: list[tuple[RemoteShard, int, int, memoryview]]) -> list[Any]:
    """Each piece (shard, sample, offset, view) filled by one ranged GET, all on the shards' IO
    loop at once, ``INFLIGHT`` at a time. Per piece, None or the CorruptSample of a short
    read."""

    async def one(shard: RemoteShard, i: int, offset: int, view: memoryview) -> Any:
        data = await shard.store.read_range(shard.name, offset, offset + len(view))
        if len(data) != len(view):
            return CorruptSample(shard.name, i, offset + len(data))
        view[:] = data
        return None

    if not pieces:
        return []
    return pieces[0][0].io.run(_bounded(one(*piece) for piece in pieces))


async def _bounded(jobs: Iterable[Awaitable[Any]], *, errors_ok: bool = False) -> list[Any]:
    """The jobs' results, ``INFLIGHT`` running at once. Unless ``errors_ok``, the first error
    cancels the rest and is raised; with it, a failed job's StokerError is its result."""
    gate = asyncio.Semaphore(INFLIGHT)

    async def run(job: Awaitable[Any]) -> Any:
        async with gate:
            try:
                return await job
            except StokerError as exc:
                if errors_ok:
                    return exc
                raise

    tasks = [asyncio.ensure_future(run(job)) for job in jobs]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
