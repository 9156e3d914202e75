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
import select
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch.utils.data

from ..errors import StreamError, StreamWarning
from ..store import PosixStore, open_store
from ..store._loop import IOLoop
from ..units import parse_bytes
from ._format import CorruptSample, ShardReader
from ._index import INDEX, DatasetIndex
from ._order import epoch_order, rank_batches, worker_batches
from ._remote import RemoteShard, fetch_samples
from ._shard_access import ShardAccess
from ._tensors import as_dtype, read_batch, sample_shape

COUNTERS = ("bytes_fetched", "bytes_read", "cache_hits", "cache_misses", "skipped", "samples")


def rank_and_world() -> tuple[int, int]:
    """torch.distributed's rank and world size when initialized, else RANK / WORLD_SIZE."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank, world = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    if not (rank.isdigit() and world.isdigit() and int(rank) < int(world)):
        raise StreamError(
            f"RANK={rank}, WORLD_SIZE={world}: a rank is a whole number from 0 to WORLD_SIZE - 1; "
            "launch with torchrun, which sets both, or start torch.distributed first"
        )
    return int(rank), int(world)


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
        self.collate: Callable[[list[Any]], Any] | None = None  # set by StreamingLoader
        store = open_store(self.remote)
        self.in_place = isinstance(store, PosixStore)
        self.tier = "posix" if self.in_place else self.remote.split("://", 1)[0]
        self.index = _read_index(store, self.remote)
        if limit is not None and not self.in_place:
            self.prefetch_shards = self._ahead_within(limit)
        self.sample_shape = sample_shape(self.index, dtype, self.remote) if dtype else (-1,)
        if local is None and not self.in_place:
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            # Named by where the dataset is, not by the credentials in its URL: a SAS rotated
            # when it expires must not fetch the whole dataset again into a new folder.
            tag = hashlib.blake2b(str(store).encode(), digest_size=8).hexdigest()
            local = cache / "stoker" / "stream" / tag
        self.local = Path(local) if local is not None else None
        self.mp_context = _mp_context(self.in_place)
        self.counters = self.mp_context.Array("q", len(COUNTERS))
        # In shared memory: torch's persistent workers keep the dataset they started with, and
        # must still read the epoch that set_epoch names.
        self._epoch = self.mp_context.Value("q", 0, lock=False)
        self.epoch, self.position = 0, 0  # position: global samples consumed in this epoch
        self._proc: ShardAccess | None = None
        self._home = os.getpid()  # the process whose store client this dataset may use

    def _ahead_within(self, limit: int) -> int:
        """Shards to download ahead under a cache limit. Every process on the node reads the
        same block of shards at about the same time (each its own samples of it), so what one
        downloads ahead must not evict the block another has yet to open: with 2 workers and
        room for 12 of a 16-shard run, a third of the shards were fetched twice."""
        largest = max((s.bytes for s in self.index.shards), default=0)
        fits = limit // max(1, largest)
        if fits < self.block_shards + 1:
            warnings.warn(
                StreamWarning(
                    f"{self.remote}: cache_limit={limit:,} B holds {fits} of its shards (up "
                    f"to {largest:,} B each), fewer than a block of {self.block_shards} and one "
                    "ahead: processes sharing the cache (DataLoader workers, ranks of a node) "
                    "will fetch shards more than once. Raise cache_limit to at least "
                    f"{(self.block_shards + 1) * largest:,} B or lower block_shards"
                ),
                stacklevel=3,
            )
        return max(1, min(self.prefetch_shards, fits - self.block_shards))

    # ------------------------------------------------------------------ sizes and state
    def __len__(self) -> int:
        return self.index.samples

    @property
    def epoch(self) -> int:
        return int(self._epoch.value)

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch.value = epoch

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
        if not len(batches) and self.position == 0 and worker == 0 and self.collate is None:
            # (StreamingLoader warns itself, in the training process, not in a worker)
            warnings.warn(self.no_batch(rank, world), StreamWarning, stacklevel=3)
        return worker_batches(batches, worker, workers)

    def no_batch(self, rank: int, world: int) -> str:
        if not self.index.samples:
            return f"{self.remote} holds no samples: this epoch reads nothing"
        return (
            f"{self.remote}: rank {rank} of {world} gets no batch this epoch: the dataset's "
            f"{self.index.samples} samples are fewer than one global batch ({world} x batch_size "
            f"{self.batch_size}), and drop_last drops a partial batch: lower batch_size, or "
            "pass drop_last=False"
        )

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        if info is not None:
            exit_with_training_process()
        batches = self.my_batches(worker, workers)
        proc = self._process()
        proc.plan_prefetch(batches.reshape(-1))
        fast = self._reads_into_batches()
        for k, batch in enumerate(batches):
            # The next batch is asked of the disk as this one is read (the second, with the
            # third); not the first, which the loop is waiting for alone.
            if k:
                proc.advise(batches[1 if k == 1 else k + 1 : k + 2])
            out = read_batch(self, proc, batch) if fast else self._read_samples(proc, batch)
            # Whole-shard downloads start once the first batch is read by range: started
            # earlier, they take the store's bandwidth from the batch the loop waits for.
            proc.start_downloads()
            if self.collate is None:
                yield from out
            else:
                yield out if fast else self.collate(out)

    def _read_samples(self, proc: ShardAccess, batch: np.ndarray) -> list[Any]:
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
        proc: ShardAccess,
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

    def _process(self) -> ShardAccess:
        # Stores, threads and maps do not survive fork: each process makes its own.
        if self._proc is None or self._proc.pid != os.getpid():
            if not self.in_place and self._home != os.getpid():
                raise StreamError(
                    f"{self.remote}: this process is a fork of one that used the object store's "
                    "client, which hangs in a fork (torch's DataLoader forks its workers): pass "
                    "DataLoader(..., multiprocessing_context=ds.mp_context), a fork server, or "
                    "use StreamingLoader, which does"
                )
            self._proc = ShardAccess(self)
        return self._proc

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_proc": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__ |= state | {"_home": os.getpid()}  # a fresh process: its own client


_WATCHING: list[int] = []  # the training process this worker watches, once watched


def exit_with_training_process() -> None:
    """End this DataLoader worker as soon as the training process that started it is gone.
    torch's own check is not enough: it watches the worker's parent, which for a worker
    started by a fork server is the fork server, kept alive by the workers themselves; and a
    forked worker whose queue is full waits forever at exit for a reader that is dead. After a
    kill -9 of the training process (the OOM killer, a preempted node) the workers lived on,
    holding memory and cached shards, a set per restart."""
    parent = multiprocessing.parent_process()  # the process that started us, by any method
    if parent is None or _WATCHING:
        return
    _WATCHING.append(parent.pid)
    try:
        pidfd = os.pidfd_open(parent.pid)  # readable once that very process exits
    except ProcessLookupError:
        os._exit(1)
    except OSError:  # a kernel before 5.3: torch's check alone, as before
        return

    def watch() -> None:
        select.select([pidfd], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="stoker-exit-with-training", daemon=True).start()


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
            raise StreamError(f"{where} has no {INDEX}{io.run(_what_is_there(store))}")
        return DatasetIndex.from_json(data, f"{where}/{INDEX}")
    finally:
        io.run(store.close())
        io.close()


async def _what_is_there(store: Any) -> str:
    """Why a dataset has no index: what its place holds instead, and what to do. (Listing a
    missing container raises NoContainerError, which names it.)"""
    write = "write the dataset with stoker.stream.ShardWriter or `stoker shards write`"
    async for batch in store.list():
        keys = [o.key for o in batch]
        below = [k.removesuffix(f"/{INDEX}") for k in keys if k.endswith(f"/{INDEX}")]
        if below:
            return f"; datasets below it: {', '.join(below[:3])}: point at one of those"
        if keys:
            return f"; it holds other files ({keys[0]!r}, ...): {write} from them"
    return f"; nothing is there: {write}"
