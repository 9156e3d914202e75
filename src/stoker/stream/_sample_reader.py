"""The sample reader: samples by global id, checked and decoded, from any tier.

It holds how a dataset is read (where, through which cache, how many threads, what to do
with a corrupt sample, how to decode) and, per process, the open shards (``ShardAccess``:
stores, threads and maps do not survive fork, so each process makes its own). It knows
nothing of order or position: the shard source says which ids, the batcher groups them.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import StreamWarning
from ..store import parse_url, store_environment
from ._counters import Counters
from ._format import CorruptSample, ShardReader
from ._index import DatasetIndex
from ._lazy_index import LazyIndex, refuse_fork
from ._remote import RemoteShard, fetch_samples
from ._shard_access import ShardAccess
from ._tensors import as_dtype, read_batch, sample_shape


class SampleReader:
    def __init__(
        self,
        index: LazyIndex,
        *,
        local: str | os.PathLike[str] | None,
        cache_limit: int | None,
        prefetch_shards: int | None,
        block_shards: int,
        shuffled: bool,
        on_corrupt: str,
        transform: Callable[[Any], Any] | None,
        dtype: torch.dtype | None,
        read_threads: int,
        counters: Counters,
    ) -> None:
        self._index = index
        self.remote = index.remote
        loc = parse_url(self.remote)  # (no network: the store opens on the first read)
        self.store_env = store_environment()  # for workers: see store/_env.py
        self.in_place = not loc.is_remote
        self.tier = "posix" if self.in_place else self.remote.split("://", 1)[0]
        if local is None and not self.in_place:
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            # Named by where the dataset is, not by the credentials in its URL: a SAS rotated
            # when it expires must not fetch the whole dataset again into a new folder.
            tag = hashlib.blake2b(str(loc).encode(), digest_size=8).hexdigest()
            local = cache / "stoker" / "stream" / tag
        self.local = Path(local) if local is not None else None
        self.cache_limit, self.block_shards, self.shuffled = cache_limit, block_shards, shuffled
        self._prefetch = prefetch_shards or block_shards  # a whole block ahead: a batch reads all
        self._prefetch_checked = cache_limit is None or self.in_place
        self.on_corrupt, self.transform, self.dtype = on_corrupt, transform, dtype
        self.read_threads, self.counters = read_threads, counters
        self._shape: tuple[int, ...] | None = None
        self._access: ShardAccess | None = None
        self._home = os.getpid()  # the process whose store client this reader may use

    @property
    def index(self) -> DatasetIndex:
        index = self._index.get()
        if self._shape is None and self.dtype is not None:  # a dtype the codec refuses: now
            self._shape = sample_shape(index, self.dtype, self.remote)
        return index

    @property
    def sample_shape(self) -> tuple[int, ...]:
        if self._shape is None:
            index, dtype = self.index, self.dtype
            self._shape = sample_shape(index, dtype, self.remote) if dtype else (-1,)
        return self._shape

    @property
    def prefetch_shards(self) -> int:
        """Shards each process downloads ahead: a block, or what a cache limit leaves room for."""
        if not self._prefetch_checked:
            self._prefetch = self._ahead_within(self.cache_limit)  # type: ignore[arg-type]
            self._prefetch_checked = True
        return self._prefetch

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
                stacklevel=4,
            )
        return max(1, min(self._prefetch, fits - self.block_shards))

    # ------------------------------------------------------------------ reading
    def sample(self, sample: int) -> Any:
        """Global sample ``sample``, decoded; a corrupt one raises whatever ``on_corrupt``."""
        shard, i = self.index.locate(int(sample))
        access = self.access()
        readers = {shard: access.reader(shard)}
        data = self.read_at(access, readers, shard, i, skip=False)
        assert data is not None
        self.counters.add(bytes_read=len(data), samples=1)
        return self.decode(data)

    def samples(self, batch: np.ndarray) -> list[Any]:
        """The samples of ``batch`` (global ids), decoded; corrupt ones skipped or raised."""
        access = self.access()
        places = [self.index.locate(int(g)) for g in batch]
        readers = access.batch_readers(places)
        fetch_samples([(r, i) for s, i in places if isinstance(r := readers[s], RemoteShard)])
        raw = [self.read_at(access, readers, shard, i) for shard, i in places]
        kept = [data for data in raw if data is not None]
        # one update of the shared counters per batch: a lock per sample costs CPU
        self.counters.add(
            bytes_read=sum(map(len, kept)), samples=len(kept), skipped=len(raw) - len(kept)
        )
        return [self.decode(data) for data in kept]

    def locate_runs(self, ids: np.ndarray, size: int) -> list[list[tuple[int, int]]]:
        """The (shard, index in the shard) of each of ``ids``, in runs of ``size`` (the last
        may be shorter): one search for many batches (see ``located_runs``)."""
        shards, within = self.index.locate_all(ids)
        places = list(zip(shards.tolist(), within.tolist(), strict=True))
        return [places[a : a + size] for a in range(0, len(places), size)]

    locate_in_order = locate_runs  # (a mixture's differ: see MixtureReader)

    def group_readers(self, places: list[tuple[int, int]]) -> dict[int, ShardReader]:
        """A reader for every shard ``places`` (shard, index) read."""
        return self.access().batch_readers(places)

    def decode_run(self, places: list[tuple[int, int]], data: list[bytes]) -> list[Any]:
        """The samples ``data`` (read at ``places``) decoded."""
        decode = self.decode
        return [decode(d) for d in data]

    def tensor_batch(self, batch: np.ndarray, places: list[tuple[int, int]] | None = None) -> Any:
        """The samples of ``batch`` read straight into one tensor (see _tensors.py); ``places``:
        where they lie, when already located."""
        return read_batch(self, self.access(), batch, places)

    def reads_into_tensors(self, collate: Callable[[list[Any]], Any] | None) -> bool:
        """Whether batches collated by ``collate`` can be read straight into one tensor."""
        return (
            self.dtype is not None
            and self.transform is None
            and self.index.compression is None
            and collate is torch.utils.data.default_collate
        )

    @property
    def as_stored(self) -> bool:
        """Whether a sample is handed over as the bytes read (no decoding at all)."""
        return self.dtype is None and self.transform is None and self.index.codec == "bytes"

    def decode(self, data: bytes) -> Any:
        if self.dtype is not None:
            shape = self.sample_shape  # (first: it refuses a codec whose bytes are no values)
            value = as_dtype(data, self.dtype, self.remote).view(shape)
        else:
            value = self.index.decode(data)
        return self.transform(value) if self.transform else value

    def read_at(
        self,
        access: ShardAccess,
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
            fresh = access.refetch_damaged(shard, readers[shard])
            if fresh is not None:
                readers[shard] = fresh
                return self.read_at(access, readers, shard, i, skip=skip)
            if self.on_corrupt == "raise" or not skip:
                raise
            return None

    def access(self) -> ShardAccess:
        """This process's open shards (made on first use in each process)."""
        if self._access is None or self._access.pid != os.getpid():
            refuse_fork(self.remote, self._home)
            self._access = ShardAccess(self)
        return self._access

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_access": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__ |= state | {"_home": os.getpid()}  # a fresh process: its own client
