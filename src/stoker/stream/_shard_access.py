"""What one process needs to read a dataset's shards: the open readers, the node cache, the
prefetch threads, and the ranged readers of the first batch. Stores, threads and maps do not
survive fork, so each process (training process, DataLoader worker) makes its own."""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch.utils.data

from ..errors import AccessDeniedError, NoContainerError, StokerError, StreamError
from ..store import IOLoop, adopt, download, open_store, retry_budget_s
from ._buffers import BufferPool, shared_tensor
from ._cache import ShardCache
from ._format import ShardReader, page_cached
from ._index import INDEX
from ._remote import RemoteShard, open_remote
from ._tensors import PIECE

if TYPE_CHECKING:
    from ._sample_reader import SampleReader

FETCH_TRIES = 3


class ShardAccess:
    """What one process needs to read: open shards, the cache, the prefetch threads."""

    def __init__(self, owner: SampleReader) -> None:
        self.owner, self.pid = owner, os.getpid()  # how to read: where, cache, threads, counters
        self.open: OrderedDict[int, ShardReader] = OrderedDict()
        self.keep_open = max(2 * owner.block_shards, owner.prefetch_shards + 2)
        self.cache = None if owner.in_place else ShardCache(owner.local, owner.cache_limit)  # type: ignore[arg-type]
        if self.cache is not None:
            self.io = IOLoop("stoker-stream-io")
            adopt(owner.store_env)  # a fork server's worker lacks what was set since it began
            self.store = open_store(owner.remote)
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="stoker-prefetch")
        self._read_pool: ThreadPoolExecutor | None = None
        # Batches leave a DataLoader worker through shared memory; in the training process
        # itself they come from buffers recycled once the loop drops them.
        in_worker = torch.utils.data.get_worker_info() is not None
        self.alloc = (
            shared_tensor if in_worker else BufferPool(capacity=owner.index.largest_sample).tensor
        )
        self.may_map = not in_worker  # (a worker's batch must be in shared memory to leave it)
        self.fetching: dict[int, Future[int]] = {}  # shard -> an open file descriptor
        self.remote: dict[int, RemoteShard] = {}
        self.sequence: list[int] = []  # shards in the order this process first needs them
        self.cursor, self.downloading = 0, True
        self.reads_warm = False  # whether the last batch read was judged in the page cache
        self.refetched: set[int] = set()  # shards whose damaged cached copy was fetched again

    def read_pool(self) -> ThreadPoolExecutor:
        if self._read_pool is None:
            self._read_pool = ThreadPoolExecutor(
                self.owner.read_threads, thread_name_prefix="stoker-read"
            )
        return self._read_pool

    def plan_prefetch(self, samples: np.ndarray) -> None:
        if self.cache is None or len(samples) == 0:
            return
        shards, _ = self.owner.index.locate_all(samples)
        # Shards in the order they are first needed. Not np.unique: its first call imports
        # numpy.ma, 0.2-0.5 s of the first batch.
        self.sequence = list(dict.fromkeys(shards.tolist()))
        self.cursor, self.downloading = 0, False

    def start_downloads(self) -> None:
        if not self.downloading:
            self.downloading = True
            self.remote.clear()  # and the first batch's bytes they held
            self._ahead()

    def advance(self, shard: int) -> None:
        if self.cursor < len(self.sequence) and self.sequence[self.cursor] == shard:
            self.cursor += 1
            self._ahead()

    def _ahead(self) -> None:
        if not self.downloading:
            return
        for shard in self.sequence[self.cursor : self.cursor + self.owner.prefetch_shards]:
            if shard not in self.fetching and shard not in self.open:
                self.fetching[shard] = self.pool.submit(self._fetch, shard)

    def batch_readers(self, places: list[tuple[int, int]]) -> dict[int, ShardReader]:
        """A reader for every shard a batch reads, from its (shard, sample) places. Before
        downloads start (the first batch), shards not yet in the cache are read by range
        (RemoteShard: the caller fetches the batch's samples from them at once)."""
        shards = list(dict.fromkeys(shard for shard, _ in places))
        return dict(zip(shards, self.shard_readers(shards), strict=True))

    def shard_readers(self, shards: list[int]) -> list[ShardReader]:
        """A reader for each of ``shards`` (distinct), as ``batch_readers``."""
        self.keep_open = max(self.keep_open, len(shards))  # every reader stays open for the batch
        for shard in shards:
            self.advance(shard)
        ranged = {s: self.owner.index.shards[s] for s in shards if self._by_range(s)}
        if ranged:
            self.remote.update(open_remote(ranged, self.store, self.io))
        return [self.remote[s] if s in self.remote else self.reader(s) for s in shards]

    def _by_range(self, shard: int) -> bool:
        if self.cache is None or self.downloading or shard in self.open or shard in self.remote:
            return False
        info = self.owner.index.shards[shard]
        return not self.cache.has(info.name, info.bytes, info.xxh3)

    def advise(self, batches: np.ndarray) -> None:
        """Ask the kernel to read these batches' small samples now (``POSIX_FADV_WILLNEED``, on
        a prefetch thread). A shuffled small sample is one small pread, and the reader threads
        have a few in flight: with the next batch's queued beside them, small records read
        faster cold. Samples of a ``PIECE`` or more are read in pieces by every reader thread
        already; advice there only takes the disk from the batch being read (figures:
        docs/stream-notes.md). In place only: a shard of the node cache may not be downloaded
        yet, and this would wait for it."""
        ids = batches.reshape(-1)
        # Nor while batches are read warm (the drop-in path's rule too): a warm epoch's advice
        # was a search and a probe a shard every batch for nothing (a mixture's: ~45 us).
        if self.cache is not None or self.reads_warm or not len(ids):
            return
        shards, within = self.owner.index.locate_all(ids)
        work: list[tuple[int, np.ndarray, np.ndarray]] = []
        for shard in sorted(set(shards.tolist())):  # not np.unique: see plan_prefetch()
            try:
                reader = self.reader(int(shard))
            except StreamError:  # missing or damaged: named when the batch that reads it comes
                continue
            at = within[shards == shard]
            # One sample's middle page first (its first and last may be its neighbours' too):
            # a warm shard, the usual case of a later epoch, costs no more than that probe.
            first, end = reader.offsets[at[0]], reader.offsets[at[0] + 1]
            if page_cached(reader.fd, int(first + (end - first) // 2)):
                continue
            at = np.sort(at)  # in file order
            offsets = reader.offsets[at]
            sizes = reader.offsets[at + 1] - offsets
            offsets, sizes = offsets[sizes < PIECE], sizes[sizes < PIECE]
            if len(offsets):
                # A descriptor of its own: the reader may be closed before the thread is done.
                work.append((os.dup(reader.fd), offsets, sizes))
        if work:
            self.pool.submit(_advise, work)

    def reader(self, shard: int) -> ShardReader:
        if shard in self.open:
            self.open.move_to_end(shard)
            return self.open[shard]
        info = self.owner.index.shards[shard]
        fd = self._open(shard)
        if self.cache is not None:
            self.cache.touch(fd)
        reader = ShardReader.open(info.name, fd, shuffled=self.owner.shuffled)
        self.open[shard] = reader
        while len(self.open) > self.keep_open:
            self.open.popitem(last=False)[1].close()
        return reader

    def refetch_damaged(self, shard: int, reader: ShardReader) -> ShardReader | None:
        """A new reader of ``shard`` when ``reader``, in which a sample failed its checksum, is a
        cached copy not yet fetched again: that copy was whole and verified when it arrived, so
        the node's disk (or a hand) damaged it since, and the source's is good. None otherwise."""
        if self.cache is None or isinstance(reader, RemoteShard) or shard in self.refetched:
            return None
        self.refetched.add(shard)
        info = self.owner.index.shards[shard]
        if self.open.get(shard) is reader:
            del self.open[shard]
        reader.close()
        self.cache.drop(info.name, info.xxh3)
        return self.reader(shard)

    def _open(self, shard: int) -> int:
        """A file descriptor on the shard: in place, or in the cache (fetched if needed)."""
        if self.cache is None:
            name = self.owner.index.shards[shard].name
            try:
                return os.open(Path(self.owner.remote) / name, os.O_RDONLY)
            except FileNotFoundError as exc:
                raise StreamError(
                    f"shard {name}, listed in {self.owner.remote}/{INDEX}, is missing: the dataset "
                    "is incomplete; write or stage it again"
                ) from exc
        future = self.fetching.pop(shard, None)
        return future.result() if future else self._fetch(shard)

    def _fetch(self, shard: int) -> int:
        info = self.owner.index.shards[shard]
        assert self.cache is not None

        def fetch(partial: Path) -> None:
            # Each request is retried below (store._retry's budget); a shard is fetched again
            # only while that budget lasts, and never for what no retry mends.
            spent_at = time.monotonic() + retry_budget_s()
            for attempt in range(FETCH_TRIES):
                try:
                    self.io.run(download(self.store, info.name, info.bytes, partial, sync=False))
                    return
                except StokerError as exc:
                    final = isinstance(exc, AccessDeniedError | NoContainerError)
                    if final or attempt == FETCH_TRIES - 1 or time.monotonic() > spent_at:
                        raise StreamError(
                            f"shard {info.name} from {self.store}: {exc} (tried {attempt + 1} "
                            "times); check that the dataset is complete and reachable"
                        ) from exc
                    time.sleep(2**attempt)

        fd, hit = self.cache.get(info.name, info.bytes, info.xxh3, fetch)
        if hit:
            self.owner.counters.add(cache_hits=1)
        else:
            self.owner.counters.add(cache_misses=1, bytes_fetched=info.bytes)
        return fd


def _advise(work: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
    for fd, offsets, sizes in work:
        try:
            for offset, size in zip(offsets.tolist(), sizes.tolist(), strict=True):
                os.posix_fadvise(fd, offset, size, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
