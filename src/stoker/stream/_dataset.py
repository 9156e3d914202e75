"""``StreamingDataset``: samples from a shard dataset on any stoker store, at the tier's speed.

Shards on a POSIX tier (Lustre, NVMe, a mount) are read in place, one pread per sample. Remote
shards (Blob, S3, GCS) are fetched whole into the node cache (_cache.py), ahead of need, in the
order this worker will read them. Every sample is checked against its checksum when read.

The dataset is a torch ``IterableDataset`` (each rank and worker reads its share of the global
order, _order.py) and also answers ``ds[i]`` for any global sample id. Counters (bytes, cache
hits, skipped samples) live in shared memory so that DataLoader workers' reads add up.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch.utils.data

from ..errors import StokerError, StreamError, StreamWarning
from ..store import PosixStore, open_store
from ..store._download import download
from ..store._loop import IOLoop
from ..units import parse_bytes
from ._cache import ShardCache
from ._format import CorruptSample, ShardReader
from ._index import INDEX, DatasetIndex
from ._order import epoch_order, rank_batches, worker_batches
from ._remote import RemoteShard, fetch_samples, open_remote
from ._tensors import BufferPool, as_dtype, read_batch, sample_shape, shared_tensor

COUNTERS = ("bytes_fetched", "bytes_read", "cache_hits", "cache_misses", "skipped", "samples")
FETCH_TRIES = 3


def rank_and_world() -> tuple[int, int]:
    """torch.distributed's rank and world size when initialized, else RANK / WORLD_SIZE."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class StreamingDataset(torch.utils.data.IterableDataset):
    def __init__(
        self,
        remote: str | os.PathLike[str],
        local: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        block_shards: int = 8,
        drop_last: bool = True,
        cache_limit: int | str | None = None,
        prefetch_shards: int | None = None,
        on_corrupt: str = "raise",
        transform: Callable[[Any], Any] | None = None,
        dtype: torch.dtype | None = None,
        read_threads: int = 8,
    ) -> None:
        if on_corrupt not in ("raise", "skip"):
            raise StreamError(f"on_corrupt={on_corrupt!r}: use 'raise' or 'skip'")
        for name, value in (("batch_size", batch_size), ("block_shards", block_shards)):
            if not isinstance(value, int) or value < 1:
                raise StreamError(f"StreamingDataset {name}={value!r}: use a whole number >= 1")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise StreamError(f"StreamingDataset dtype={dtype!r}: use a torch dtype (torch.int32)")
        self.remote = str(remote)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.block_shards, self.drop_last = block_shards, drop_last
        self.prefetch_shards, self.on_corrupt, self.transform = (
            prefetch_shards or block_shards,  # a whole block ahead: every batch reads all of it
            on_corrupt,
            transform,
        )
        self.dtype, self.read_threads = dtype, max(1, read_threads)
        limit = int(parse_bytes(cache_limit)) if isinstance(cache_limit, str) else cache_limit
        self.cache_limit = limit
        self.epoch, self.position = 0, 0  # position: global samples consumed in this epoch
        self.collate: Callable[[list[Any]], Any] | None = None  # set by StreamingLoader
        store = open_store(self.remote)
        self.in_place = isinstance(store, PosixStore)
        self.tier = "posix" if self.in_place else self.remote.split("://", 1)[0]
        self.index = _read_index(store, self.remote)
        self.sample_shape = sample_shape(self.index, dtype, self.remote) if dtype else (-1,)
        if local is None and not self.in_place:
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            tag = hashlib.blake2b(self.remote.encode(), digest_size=8).hexdigest()
            local = cache / "stoker" / "stream" / tag
        self.local = Path(local) if local is not None else None
        self.mp_context = _mp_context(self.in_place)
        self.counters = self.mp_context.Array("q", len(COUNTERS))
        self._proc: _Process | None = None

    # ------------------------------------------------------------------ sizes and state
    def __len__(self) -> int:
        return self.index.samples

    def set_epoch(self, epoch: int) -> None:
        """Read ``epoch`` next, from its start; the epoch already under way (as a resumed
        state left it) goes on from where it was, as torch's ``set_epoch(epoch)`` idiom
        expects after ``load_state_dict``."""
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def stats(self) -> dict[str, int]:
        return dict(zip(COUNTERS, self.counters[:], strict=True))

    def _count(self, **adds: int) -> None:
        with self.counters.get_lock():
            for name, n in adds.items():
                self.counters[COUNTERS.index(name)] += n

    # ------------------------------------------------------------------ reading
    def __getitem__(self, sample: int) -> Any:
        shard, i = self.index.locate(int(sample))
        proc = self._process()
        readers = {shard: proc.reader(shard)}
        data = self._read(proc, readers, shard, i, skip=False)
        assert data is not None
        self._count(bytes_read=len(data), samples=1)
        return self._decode(data)

    def _decode(self, data: bytes) -> Any:
        if self.dtype is not None:
            value = as_dtype(data, self.dtype, self.remote).view(self.sample_shape)
        else:
            value = self.index.decode(data)
        return self.transform(value) if self.transform else value

    def _reads_into_batches(self) -> bool:
        """Whether batches are read straight into one tensor (see _tensors.py)."""
        return (
            self.dtype is not None
            and self.transform is None
            and self.index.compression is None
            and self.collate is torch.utils.data.default_collate
        )

    def my_batches(self, worker: int = 0, workers: int = 1) -> np.ndarray:
        """The global sample ids this rank's ``worker`` reads this epoch, batch by batch."""
        rank, world = rank_and_world()
        order = epoch_order(
            self.index.shard_sizes,
            seed=self.seed,
            epoch=self.epoch,
            shuffle=self.shuffle,
            block_shards=self.block_shards,
        )
        batches = rank_batches(
            order,
            start=self.position,
            world_size=world,
            rank=rank,
            batch_size=self.batch_size,
            drop_last=self.drop_last,
        )
        if not len(batches) and self.position == 0 and worker == 0:
            warnings.warn(self._no_batch(rank, world), StreamWarning, stacklevel=3)
        return worker_batches(batches, worker, workers)

    def _no_batch(self, rank: int, world: int) -> str:
        if not self.index.samples:
            return f"{self.remote} holds no samples: this epoch reads nothing"
        return (
            f"{self.remote}: rank {rank} of {world} gets no batch this epoch: the dataset's "
            f"{self.index.samples} samples are fewer than {world} ranks x batch_size "
            f"{self.batch_size}, and drop_last drops a partial batch: lower batch_size, or "
            "pass drop_last=False"
        )

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        batches = self.my_batches(worker, workers)
        proc = self._process()
        proc.plan_prefetch(batches.reshape(-1))
        fast = self._reads_into_batches()
        for batch in batches:
            out = read_batch(self, proc, batch) if fast else self._read_samples(proc, batch)
            # Whole-shard downloads start once the first batch is read by range: started
            # earlier, they take the store's bandwidth from the batch the loop waits for.
            proc.start_downloads()
            if self.collate is None:
                yield from out
            else:
                yield out if fast else self.collate(out)

    def _read_samples(self, proc: _Process, batch: np.ndarray) -> list[Any]:
        places = [self.index.locate(int(g)) for g in batch]
        readers = proc.batch_readers(places)
        fetch_samples([(r, i) for s, i in places if isinstance(r := readers[s], RemoteShard)])
        raw = [self._read(proc, readers, shard, i) for shard, i in places]
        kept = [data for data in raw if data is not None]
        # one update of the shared counters per batch: a lock per sample costs CPU
        self._count(bytes_read=sum(map(len, kept)), samples=len(kept), skipped=len(raw) - len(kept))
        return [self._decode(data) for data in kept]

    def _read(
        self,
        proc: _Process,
        readers: dict[int, ShardReader],
        shard: int,
        i: int,
        *,
        skip: bool = True,
    ) -> bytes | None:
        """Sample ``i`` of ``shard``, or None for a corrupt one skipped (``on_corrupt="skip"``).
        A damaged cached copy is fetched again once (``readers`` gets the new reader)."""
        try:
            return readers[shard].sample(i)
        except CorruptSample:
            fresh = proc.refetch_damaged(shard, readers[shard])
            if fresh is not None:
                readers[shard] = fresh
                return self._read(proc, readers, shard, i, skip=skip)
            if self.on_corrupt == "raise" or not skip:
                raise
            return None

    def _process(self) -> _Process:
        # Stores, threads and maps do not survive fork: each process makes its own.
        if self._proc is None or self._proc.pid != os.getpid():
            self._proc = _Process(self)
        return self._proc

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_proc": None}


class _Process:
    """What one process needs to read: open shards, the cache, the prefetch threads."""

    def __init__(self, ds: StreamingDataset) -> None:
        self.ds, self.pid = ds, os.getpid()
        self.open: OrderedDict[int, ShardReader] = OrderedDict()
        self.keep_open = max(2 * ds.block_shards, ds.prefetch_shards + 2)
        self.cache = None if ds.in_place else ShardCache(ds.local, ds.cache_limit)  # type: ignore[arg-type]
        if self.cache is not None:
            self.io = IOLoop("stoker-stream-io")
            self.store = open_store(ds.remote)
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="stoker-prefetch")
        self._read_pool: ThreadPoolExecutor | None = None
        # Batches leave a DataLoader worker through shared memory; in the training process
        # itself they come from buffers recycled once the loop drops them.
        in_worker = torch.utils.data.get_worker_info() is not None
        self.alloc = shared_tensor if in_worker else BufferPool().tensor
        self.fetching: dict[int, Future[Path]] = {}
        self.remote: dict[int, RemoteShard] = {}
        self.sequence: list[int] = []  # shards in the order this process first needs them
        self.cursor, self.downloading = 0, True
        self.refetched: set[int] = set()  # shards whose damaged cached copy was fetched again

    def read_pool(self) -> ThreadPoolExecutor:
        if self._read_pool is None:
            self._read_pool = ThreadPoolExecutor(
                self.ds.read_threads, thread_name_prefix="stoker-read"
            )
        return self._read_pool

    def plan_prefetch(self, samples: np.ndarray) -> None:
        if self.cache is None or len(samples) == 0:
            return
        starts = np.asarray([self.ds.index.first(s) for s in range(len(self.ds.index.shards))])
        shards = np.searchsorted(starts, samples, side="right") - 1
        _, first = np.unique(shards, return_index=True)
        self.sequence = [int(s) for s in shards[np.sort(first)]]
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
        for shard in self.sequence[self.cursor : self.cursor + self.ds.prefetch_shards]:
            if shard not in self.fetching and shard not in self.open:
                self.fetching[shard] = self.pool.submit(self._fetch, shard)

    def batch_readers(self, places: list[tuple[int, int]]) -> dict[int, ShardReader]:
        """A reader for every shard a batch reads, from its (shard, sample) places. Before
        downloads start (the first batch), shards not yet in the cache are read by range
        (RemoteShard: the caller fetches the batch's samples from them at once)."""
        shards = list(dict.fromkeys(shard for shard, _ in places))
        self.keep_open = max(self.keep_open, len(shards))  # every reader stays open for the batch
        for shard in shards:
            self.advance(shard)
        ranged = {s: self.ds.index.shards[s] for s in shards if self._by_range(s)}
        if ranged:
            self.remote.update(open_remote(ranged, self.store, self.io))
        return {s: self.remote[s] if s in self.remote else self.reader(s) for s in shards}

    def _by_range(self, shard: int) -> bool:
        if self.cache is None or self.downloading or shard in self.open or shard in self.remote:
            return False
        info = self.ds.index.shards[shard]
        return not self.cache.has(info.name, info.bytes, info.xxh3)

    def reader(self, shard: int) -> ShardReader:
        if shard in self.open:
            self.open.move_to_end(shard)
            return self.open[shard]
        info = self.ds.index.shards[shard]
        for attempt in range(2):  # the file may be evicted between fetch and open
            path = self._path(shard)
            try:
                reader = ShardReader.open(info.name, path, shuffled=self.ds.shuffle)
                break
            except FileNotFoundError as exc:
                self.fetching.pop(shard, None)
                if self.cache is None:
                    raise StreamError(
                        f"shard {info.name}, listed in {self.ds.remote}/{INDEX}, is missing: "
                        "the dataset is incomplete; write or stage it again"
                    ) from exc
                if attempt:
                    raise
        if self.cache is not None:
            self.cache.touch(path)
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
        info = self.ds.index.shards[shard]
        if self.open.get(shard) is reader:
            del self.open[shard]
        reader.close()
        self.cache.drop(info.name, info.xxh3)
        return self.reader(shard)

    def _path(self, shard: int) -> Path:
        if self.cache is None:
            return Path(self.ds.remote) / self.ds.index.shards[shard].name
        future = self.fetching.pop(shard, None)
        return future.result() if future else self._fetch(shard)

    def _fetch(self, shard: int) -> Path:
        info = self.ds.index.shards[shard]
        assert self.cache is not None

        def fetch(partial: Path) -> None:
            for attempt in range(FETCH_TRIES):
                try:
                    self.io.run(download(self.store, info.name, info.bytes, partial, sync=False))
                    return
                except StokerError as exc:
                    if attempt == FETCH_TRIES - 1:
                        raise StreamError(
                            f"shard {info.name} from {self.store}: {exc} (tried {FETCH_TRIES} "
                            "times); check that the dataset is complete and reachable"
                        ) from exc
                    time.sleep(2**attempt)

        path, hit = self.cache.get(info.name, info.bytes, info.xxh3, fetch)
        if hit:
            self.ds._count(cache_hits=1)
        else:
            self.ds._count(cache_misses=1, bytes_fetched=info.bytes)
        return path


def _mp_context(in_place: bool) -> Any:
    """Workers for remote datasets start from a fork server, not a fork of this process: the
    object store client's runtime (tokio) hangs in a forked child once it has run here."""
    if in_place:
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "stoker.stream"])
    return ctx


def _read_index(store: Any, where: str) -> DatasetIndex:
    io = IOLoop("stoker-stream-index")
    try:
        data = io.run(store.read_all(INDEX))
        if data is None:
            raise StreamError(
                f"{where} has no {INDEX}: write the dataset with stoker.stream.ShardWriter or "
                "`stoker shards write`"
            )
        return DatasetIndex.from_json(data, f"{where}/{INDEX}")
    finally:
        io.run(store.close())
        io.close()
