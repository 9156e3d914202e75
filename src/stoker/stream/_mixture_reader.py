"""A mixture's sample reader: a batch of mixture ids, split by source, each part read by that
source's own ``SampleReader`` (its tier, cache, threads, checks and counters), the parts joined
in source order. What the batcher asks of a reader (``access``, ``samples``, ``tensor_batch``,
``reads_into_tensors``) it answers by asking each source's."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._sample_reader import SampleReader
from ._tensors import BatchPart, read_rows

Located = list[tuple[int, list[tuple[int, int]], list[int]]]  # see MixtureReader.locate_runs


class MixtureReader:
    def __init__(self, readers: list[SampleReader], offsets: np.ndarray) -> None:
        self.readers, self._offsets = readers, offsets
        self._access: _MixtureAccess | None = None
        self._shards: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

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
        index in the shard) of each of its samples, their positions in the run) for each source
        the run draws on, in source order, each in the order of ``ids``. Found by one search of
        every source's shards for all the runs: a numpy call between a batch's reads costs
        several us (see ``located_runs``), and a batch's own split and search per source made
        ~30 of them."""
        starts, source, number = self.shard_table()
        at = np.searchsorted(starts, ids, side="right") - 1
        sources = len(self.readers)
        key = np.arange(len(ids)) // size * sources + source[at]  # (run, source)
        order = np.argsort(key, kind="stable")
        at = at[order]
        places = list(zip(number[at].tolist(), (ids[order] - starts[at]).tolist(), strict=True))
        positions = (order % size).tolist()
        counts = np.bincount(key, minlength=-(-len(ids) // size) * sources).tolist()
        runs: list[Located] = []
        a = 0
        for run in range(0, len(counts), sources):
            located = []
            for s, n in enumerate(counts[run : run + sources]):
                if n:
                    located.append((s, places[a : a + n], positions[a : a + n]))
                    a += n
            runs.append(located)
        return runs

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
            s, places, _ = located[0]
            return self.readers[s].tensor_batch(batch - self._offsets[s], places)
        access = self.access()
        parts = [BatchPart.at(self.readers[s], access.sources[s], at) for s, at, _ in located]
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
        return self.__dict__ | {"_access": None, "_shards": None}


class _MixtureAccess:
    """Each source's open shards in this process; prefetch plans and advice go to the source
    whose ids they name."""

    def __init__(self, reader: MixtureReader) -> None:
        self.reader, self.pid = reader, os.getpid()
        self.sources = [r.access() for r in reader.readers]

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
