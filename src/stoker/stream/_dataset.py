"""``StreamingDataset``: samples from a shard dataset on any stoker store, at the tier's speed.

Shards on a POSIX tier (Lustre, NVMe, a mount) are read in place, one pread per sample. Remote
shards (Blob, S3, GCS) are fetched whole into the node cache (_cache.py), ahead of need, in the
order this worker will read them. Every sample is checked against its checksum when read.

The dataset is a torch ``IterableDataset`` (each data-parallel group and worker reads its share
of the global order) and also answers ``ds[i]`` for any global sample id. It is made of stages,
each its own file: the shard source (_shard_source.py: the order and its state), the sample
reader (_sample_reader.py: ids to checked, decoded samples), the batcher (_batcher.py) and the
data-parallel group (_groups.py); counters (_counters.py) are one object in shared memory, so
that DataLoader workers' reads add up. Making a dataset reads no network: the index is read on
first use (_lazy_index.py).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch.utils.data

from .._dist_env import rank_and_world as _rank_and_world
from ..errors import StreamError, StreamWarning
from ..store import parse_url
from ..units import parse_bytes
from ._batcher import read_batches, this_worker
from ._counters import Counters
from ._groups import DataGroup, current_group, fixed_group
from ._index import DatasetIndex
from ._lazy_index import LazyIndex
from ._sample_reader import SampleReader
from ._samples import one_by_one
from ._shard_source import ShardSource
from ._tensors import PIECE


def rank_and_world() -> tuple[int, int]:
    """torch.distributed's rank and world size when running, else torchrun's (checked)."""
    return _rank_and_world(error=StreamError)


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
        dp_rank: int | None = None,
        dp_size: int | None = None,
        process_group: Any = None,
        device_mesh: Any = None,
        mesh_dim: str | int | Sequence[str | int] | None = None,
    ) -> None:
        if on_corrupt not in ("raise", "skip"):
            raise StreamError(f"on_corrupt={on_corrupt!r}: use 'raise' or 'skip'")
        for name, value in (("batch_size", batch_size), ("block_shards", block_shards)):
            if not isinstance(value, int) or value < 1:
                raise StreamError(f"StreamingDataset {name}={value!r}: use a whole number >= 1")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise StreamError(f"StreamingDataset dtype={dtype!r}: use a torch dtype (torch.int32)")
        self.remote = str(remote)
        self.batch_size = batch_size
        # Which batches this rank reads: resolved now, to two integers that workers inherit.
        self.data_group = fixed_group(dp_rank, dp_size, process_group, device_mesh, mesh_dim)
        self.mp_context = _mp_context(not parse_url(self.remote).is_remote)
        self.counters = Counters(self.mp_context)
        index = LazyIndex(self.remote)  # read on first use: the constructor reads no network
        self.source = ShardSource(
            index,
            seed=seed,
            shuffle=shuffle,
            block_shards=block_shards,
            drop_last=drop_last,
            mp_context=self.mp_context,
        )
        limit = int(parse_bytes(cache_limit)) if isinstance(cache_limit, str) else cache_limit
        self.reader = SampleReader(
            index,
            local=local,
            cache_limit=limit,
            prefetch_shards=prefetch_shards,
            block_shards=block_shards,
            shuffled=shuffle,
            on_corrupt=on_corrupt,
            transform=transform,
            dtype=dtype,
            read_threads=max(1, read_threads),
            counters=self.counters,
        )

    # ------------------------------------------------------------------ what it is
    @property
    def index(self) -> DatasetIndex:
        """The dataset's index.json (read from the store on first use)."""
        return self.reader.index

    @property
    def group(self) -> DataGroup:
        """This rank's data-parallel group: as given, else every rank its own."""
        return current_group(self.data_group)

    in_place = property(lambda self: self.reader.in_place, doc="Shards read where they are.")
    tier = property(lambda self: self.reader.tier, doc="'posix', or the remote's scheme.")
    local = property(lambda self: self.reader.local, doc="The node cache's folder.")
    dtype = property(lambda self: self.reader.dtype)
    transform = property(lambda self: self.reader.transform)
    on_corrupt = property(lambda self: self.reader.on_corrupt)
    sample_shape = property(lambda self: self.reader.sample_shape)
    prefetch_shards = property(lambda self: self.reader.prefetch_shards)
    seed = property(lambda self: self.source.seed)
    shuffle = property(lambda self: self.source.shuffle)
    block_shards = property(lambda self: self.source.block_shards)
    drop_last = property(lambda self: self.source.drop_last)

    def __len__(self) -> int:
        return self.index.samples

    @property
    def epoch(self) -> int:
        return self.source.epoch

    def set_epoch(self, epoch: int) -> None:
        """Read ``epoch`` next. A StreamingLoader goes on with an epoch a resumed state left
        under way when ``epoch`` is that one, as torch's ``set_epoch`` idiom expects after
        ``load_state_dict``, and starts any other from its start."""
        self.source.set_epoch(epoch)

    def stats(self) -> dict[str, int]:
        return self.counters.snapshot()

    # ------------------------------------------------------------------ reading
    def __getitem__(self, sample: int) -> Any:
        return self.reader.sample(sample)

    def my_batches(self, worker: int = 0, workers: int = 1) -> np.ndarray:
        """The global sample ids this rank's ``worker`` reads this epoch, batch by batch."""
        return self.source.batches(self.group, self.batch_size, worker=worker, workers=workers)

    def __iter__(self) -> Iterator[Any]:
        """Sample by sample, this rank's and worker's share of the epoch (torch's DataLoader
        batches them; StreamingLoader reads whole batches instead, see _batcher.py). Not a
        generator: the iterator returned hands samples over without a Python frame of its own
        per sample (see ``one_by_one``); what to read is worked out here, at ``iter()``."""
        worker, workers = this_worker()
        group = self.group
        batches = self.source.batches(group, self.batch_size, worker=worker, workers=workers)
        if not len(batches) and worker == 0:
            message = self.source.no_batch(self.remote, group, self.batch_size)
            warnings.warn(message, StreamWarning, stacklevel=2)
        if 0 < self.reader.index.largest_sample < PIECE:
            # torch's DataLoader batches: samples are read a group at a time (_samples.py)
            return one_by_one(self.reader, batches.reshape(-1))
        return chain.from_iterable(read_batches(self.reader, batches, None))

    def __getstate__(self) -> dict[str, Any]:
        # A worker started afresh (a fork server) has no process group: it takes this rank's
        # data-parallel group as numbers, not torchrun's RANK, which a group need not match.
        state = self.__dict__.copy()
        if state["data_group"] is None and _dist_running():
            state["data_group"] = self.group
        return state


def _dist_running() -> bool:
    dist = sys.modules.get("torch.distributed")  # (imported by whoever started a group)
    return bool(dist and dist.is_available() and dist.is_initialized())


def _mp_context(in_place: bool) -> Any:
    """Workers for remote datasets start from a fork server, not a fork of this process: the
    object store client's runtime (tokio) hangs in a forked child once it has run here."""
    if in_place:
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "stoker.stream"])
    return ctx
