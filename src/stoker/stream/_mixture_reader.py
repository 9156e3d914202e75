"""A mixture's sample reader: a batch of mixture ids, split by source, each part read by that
source's own ``SampleReader`` (its tier, cache, threads, checks and counters), the parts joined
in source order. What the batcher asks of a reader (``access``, ``samples``, ``tensor_batch``,
``reads_into_tensors``) it answers by asking each source's."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from ..errors import StreamError
from ._format import ShardReader
from ._sample_reader import SampleReader
from ._tensors import BatchPart, read_rows

Located = list[tuple[int, list[tuple[int, int]]]]  # see MixtureReader.locate_runs


class MixtureReader:
    def __init__(self, readers: list[SampleReader], offsets: np.ndarray) -> None:
        self.readers, self._offsets = readers, offsets
        self._access: _MixtureAccess | None = None
        self._shards: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._rows: tuple[list[int], list[int]] | None = None  # the table's source, number
        self._alike: bool | None = None  # whether every source decodes as the first does
        # The sources count into one set of counters (_mixture._sources): a group of all of
        # theirs is one add.
        self.counters = readers[0].counters if readers else None
        self.read_threads = sum(r.read_threads for r in readers)  # (each has its share)

    def shard_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every source's shards as one table, made on first use (the indexes are read then):
        where each starts among the mixture's ids, its source, its number in that source."""
        if self._shards is None:
            starts, source, number = [], [], []
            for s, reader in enumerate(self.readers):
                sizes = np.asarray(reader.index.shard_sizes, dtype=np.int64)
                starts.append(self._offsets[s] + np.cumsum(sizes) - sizes)
                source.append(np.full(len(sizes), s))
                number.append(np.arange(len(sizes)))
            self._shards = (np.concatenate(starts), np.concatenate(source), np.concatenate(number))
        return self._shards

    def locate_runs(self, ids: np.ndarray, size: int) -> list[Located]:
        """For each run of ``size`` of ``ids`` (the last may be shorter): (source, the (shard,
        index in the shard) of each of its samples) for each source the run draws on, in
        source order, each in the order of ``ids`` (a batch read as tensors, each source's part
        into its rows). Found by one search of every source's shards for all the runs: a numpy
        call between a batch's reads costs several us (see ``located_runs``), and a batch's own
        split and search per source made ~30 of them."""
        starts, source, number = self.shard_table()
        at = np.searchsorted(starts, ids, side="right") - 1
        sources = len(self.readers)
        key = np.arange(len(ids)) // size * sources + source[at]  # (run, source)
        order = np.argsort(key, kind="stable")
        at = at[order]
        places = list(zip(number[at].tolist(), (ids[order] - starts[at]).tolist(), strict=True))
        counts = np.bincount(key, minlength=-(-len(ids) // size) * sources).tolist()
        runs: list[Located] = []
        a = 0
        for run in range(0, len(counts), sources):
            located = []
            for s, n in enumerate(counts[run : run + sources]):
                if n:
                    located.append((s, places[a : a + n]))
                    a += n
            runs.append(located)
        return runs

    def locate_in_order(self, ids: np.ndarray, size: int) -> list[list[tuple[int, int]]]:
        """For each run of ``size`` of ``ids``: the (row, index in the shard) of each, in the
        order of ``ids``, a row being a shard of ``shard_table`` (any source's). The sample by
        sample path reads a group so, in the mixture's order: a group split by source, read
        part by part and put back in order, costs more CPU a sample (docs/stream.md)."""
        starts = self.shard_table()[0]
        at = np.searchsorted(starts, ids, side="right") - 1
        places = list(zip(at.tolist(), (ids - starts[at]).tolist(), strict=True))
        return [places[a : a + size] for a in range(0, len(places), size)]

    def rows(self) -> tuple[list[int], list[int]]:
        """Each row's source and its shard's number there (``shard_table``'s, as lists)."""
        if self._rows is None:
            _, source, number = self.shard_table()
            self._rows = source.tolist(), number.tolist()
        return self._rows

    def group_readers(self, places: list[tuple[int, int]]) -> dict[int, ShardReader]:
        """A reader for every row ``places`` (row, index) read, each opened by its source."""
        source, number = self.rows()
        mine: dict[int, list[int]] = {}
        for row in dict.fromkeys(row for row, _ in places):
            mine.setdefault(source[row], []).append(row)
        readers: dict[int, ShardReader] = {}
        sources = self.access().sources
        for s, rows in mine.items():
            theirs = sources[s].shard_readers([number[r] for r in rows])
            readers.update(zip(rows, theirs, strict=True))
        return readers

    def read_at(
        self, access: _MixtureAccess, readers: dict[int, ShardReader], row: int, i: int
    ) -> bytes | None:
        """``SampleReader.read_at`` of the source that holds ``row``."""
        source, number = self.rows()
        s, shard = source[row], number[row]
        theirs = {shard: readers[row]}
        try:
            return self.readers[s].read_at(access.sources[s], theirs, shard, i)
        finally:
            readers[row] = theirs[shard]  # (a damaged copy's fresh reader, if fetched again)

    @property
    def as_stored(self) -> bool:
        return all(r.as_stored for r in self.readers)

    def decode_run(self, places: list[tuple[int, int]], data: list[bytes]) -> list[Any]:
        """The samples ``data`` read at ``places`` (row, index), each decoded by its source.
        Where every source decodes alike, by the first (a look-up a sample saved); an error
        is then raised again by the sample's own source, so that it names the right one."""
        if self._alike is None:
            self._alike = all(_decodes_alike(self.readers[0], r) for r in self.readers[1:])
        if self._alike:
            decode = self.readers[0].decode
            try:
                return [decode(d) for d in data]
            except StreamError:
                pass
        source = self.rows()[0]
        return [
            self.readers[source[row]].decode(d) for (row, _), d in zip(places, data, strict=True)
        ]

    def split(self, ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(source, its own ids) for each source ``ids`` draws on, in source order."""
        offsets = self._offsets
        sources = np.searchsorted(offsets, ids, side="right") - 1
        if not len(sources):
            return []
        if (sources == sources[0]).all():  # one source: no sort to do
            s = int(sources[0])
            return [(s, ids - offsets[s])]
        # One stable sort and slices of it, not a mask per source (np.unique and three masks
        # cost ~40 us a batch: a 2 KiB sample's read is ~6 us)
        local = (ids - offsets[sources])[np.argsort(sources, kind="stable")]
        return [(s, local[a:b]) for s, a, b in _runs(sources)]

    def access(self) -> _MixtureAccess:
        # Per process, as each source's own: a forked DataLoader worker makes its own.
        if self._access is None or self._access.pid != os.getpid():
            self._access = _MixtureAccess(self)
        return self._access

    def reads_into_tensors(self, collate: Callable[[list[Any]], Any] | None) -> bool:
        shapes = {(r.dtype, r.sample_shape) for r in self.readers if r.dtype is not None}
        return len(shapes) == 1 and all(r.reads_into_tensors(collate) for r in self.readers)

    def samples(self, batch: np.ndarray) -> list[Any]:
        out: list[Any] = []
        for s, ids in self.split(batch):
            out += self.readers[s].samples(ids)
        return out

    def tensor_batch(self, batch: np.ndarray, located: Located) -> Any:
        """The samples of ``batch`` (``located``: its run of ``locate_runs``) read straight
        into one tensor, each source's together."""
        if len(located) == 1:
            s, places = located[0]
            return self.readers[s].tensor_batch(batch - self._offsets[s], places)
        access = self.access()
        parts = [BatchPart.at(self.readers[s], access.sources[s], at) for s, at in located]
        sizes = {size for part in parts for *_, size in part.samples}
        if len(sizes) != 1 or 0 in sizes:  # samples of own sizes: each source's, then joined
            return _joined([self.readers[s].tensor_batch(ids) for s, ids in self.split(batch)])
        # Every source's samples read straight into their rows of one batch buffer, in one
        # read: joining the parts afterwards was a copy of every batch.
        row = sizes.pop()
        flat = parts[0].proc.alloc(row * len(batch))
        got = read_rows(parts, flat, row)
        if got is None or sum(len(g) for g in got) == len(batch):
            reader = self.readers[located[0][0]]
            return flat.view(reader.dtype).view(len(batch), *reader.sample_shape)  # type: ignore[arg-type]
        return _joined(got)  # a source skipped a corrupt sample

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_access": None, "_shards": None, "_rows": None}


class _MixtureAccess:
    """Each source's open shards in this process; prefetch plans and advice go to the source
    whose ids they name."""

    def __init__(self, reader: MixtureReader) -> None:
        self.reader, self.pid = reader, os.getpid()
        self.sources = [r.access() for r in reader.readers]
        self._read_pool: ThreadPoolExecutor | None = None

    def read_pool(self) -> ThreadPoolExecutor:
        """The reader threads of a group across the sources (their shares together)."""
        if self._read_pool is None:
            self._read_pool = ThreadPoolExecutor(
                self.reader.read_threads, thread_name_prefix="stoker-read"
            )
        return self._read_pool

    def plan_prefetch(self, samples: np.ndarray) -> None:
        # Only sources that download shards plan: a split is a sort of the worker's whole
        # epoch (~6 ms for 80,000 ids, before its first batch), for nothing in place.
        if all(access.cache is None for access in self.sources):
            return
        for s, ids in self.reader.split(samples):
            self.sources[s].plan_prefetch(ids)

    def advise(self, samples: np.ndarray) -> None:
        if all(access.reads_warm for access in self.sources):  # (no split for nothing)
            return
        for s, ids in self.reader.split(np.asarray(samples).reshape(-1)):
            self.sources[s].advise(ids)

    def start_downloads(self) -> None:
        for access in self.sources:
            access.start_downloads()


def _decodes_alike(a: SampleReader, b: SampleReader) -> bool:
    """Whether ``a.decode`` turns any sample of ``b`` into what ``b.decode`` would."""
    if a.dtype is not None or b.dtype is not None:
        same = a.dtype == b.dtype and a.sample_shape == b.sample_shape
    else:
        same = a.index.codec == b.index.codec and a.index.array == b.index.array
    return same and a.transform is b.transform


def _runs(sources: np.ndarray) -> list[tuple[int, int, int]]:
    """(source, start, end) of each source's run in ``sources`` once sorted (stably)."""
    ends = np.cumsum(np.bincount(sources)).tolist()
    return [(s, a, b) for s, (a, b) in enumerate(zip([0, *ends[:-1]], ends, strict=True)) if b > a]


def _joined(parts: list[Any]) -> Any:
    """Each source's part of a batch as one: a tensor, or a list where samples differ in size.
    (NumPy's copy: torch.cat's threads waited for a busy machine's cores.)"""
    if any(isinstance(p, list) for p in parts):
        return [t for p in parts for t in p]
    joined = np.concatenate([p.numpy() for p in parts])
    return torch.from_numpy(joined)
