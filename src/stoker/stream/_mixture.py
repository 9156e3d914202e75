"""``StreamingMixture``: several shard datasets (any tiers, mixed) read as one, each a set
share of every epoch.

    mix = StreamingMixture([web, code, books], weights=[0.5, 0.3, 0.2], epoch_samples=1_000_000)
    loader = StreamingLoader(mix, 64, num_workers=2)      # or torch's DataLoader(mix, ...)

Shares are given as ``weights`` (with ``epoch_samples``, by default the sources' samples
together) or as ``samples`` (absolute samples per source per epoch). A source with fewer samples
than its share repeats (``on_exhausted="repeat"``, each pass a new epoch of its own order) or
ends the mixture's epoch where it runs out (``"stop"``). The order (_mixture_order.py) is a pure
function of the seed, the epoch and the sources, so a job resumes mid-epoch from the loader's
position, with any number of data-parallel groups and workers.

The mixture is made of the same stages as a dataset: a source of the order (``MixtureSource``,
in a global id space where source ``s``'s sample ``i`` is ``offsets[s] + i``) and a reader
(``MixtureReader``) that hands each source's ids of a batch to that source's own sample reader.
A batch's samples come grouped by source, each group in the mixture's order.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch.utils.data

from ..errors import StreamError
from ._batcher import read_batches, this_worker
from ._counters import Counters
from ._dataset import StreamingDataset, _mp_context
from ._groups import DataGroup, current_group, fixed_group
from ._mixture_order import EXHAUSTED
from ._mixture_reader import MixtureReader
from ._mixture_source import MixedSource, MixtureSource
from ._sample_reader import SampleReader
from ._samples import one_by_one
from ._tensors import PIECE

READ_GROUP = 64  # large samples read at once when iterated sample by sample


class StreamingMixture(torch.utils.data.IterableDataset):
    def __init__(
        self,
        sources: Sequence[StreamingDataset | str | os.PathLike[str]],
        *,
        weights: Sequence[float] | None = None,
        samples: Sequence[int] | None = None,
        epoch_samples: int | None = None,
        on_exhausted: str = "repeat",
        seed: int = 0,
        batch_size: int = 1,
        dp_rank: int | None = None,
        dp_size: int | None = None,
        process_group: Any = None,
        device_mesh: Any = None,
        mesh_dim: Any = None,
    ) -> None:
        if not sources:
            raise StreamError("StreamingMixture: give at least one source dataset")
        datasets = [s if isinstance(s, StreamingDataset) else StreamingDataset(s) for s in sources]
        _check_shares(len(datasets), weights, samples, epoch_samples, on_exhausted)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise StreamError(
                f"StreamingMixture batch_size={batch_size!r}: use a whole number >= 1"
            )
        self.batch_size = batch_size
        self.data_group = fixed_group(dp_rank, dp_size, process_group, device_mesh, mesh_dim)
        self.remote = " + ".join(ds.remote for ds in datasets)
        self.mp_context = _mp_context(all(ds.in_place for ds in datasets))
        given = weights if weights is not None else samples
        self.sources = _sources(datasets, given, self.mp_context)  # type: ignore[arg-type]
        self.source = MixtureSource(
            self.sources,
            weights=weights,
            samples=samples,
            epoch_samples=epoch_samples,
            on_exhausted=on_exhausted,
            seed=seed,
            mp_context=self.mp_context,
        )
        self.reader = MixtureReader([s.reader for s in self.sources], self.source.offsets)

    # ------------------------------------------------------------------ what it is
    @property
    def group(self) -> DataGroup:
        return current_group(self.data_group)

    @property
    def epoch(self) -> int:
        return self.source.epoch

    def set_epoch(self, epoch: int) -> None:
        self.source.set_epoch(epoch)

    @property
    def tier(self) -> str:
        return "+".join(dict.fromkeys(s.reader.tier for s in self.sources))

    def __len__(self) -> int:
        """Samples in the current epoch (all data-parallel groups)."""
        return len(self.source.order())

    def stats(self) -> dict[str, int]:
        """What every source's reader did, together (the sources share one set of counters)."""
        return self.sources[0].reader.counters.snapshot()

    def counts(self) -> list[int]:
        """Samples each source gives the current epoch."""
        source, _ = self.source.order_by_source()
        return np.bincount(source, minlength=len(self.sources)).tolist()

    def source_of(self, sample: int) -> int:
        """Which source a global sample id of the mixture comes from."""
        return int(np.searchsorted(self.source.offsets, sample, side="right") - 1)

    def __getitem__(self, sample: int) -> Any:
        s = self.source_of(sample)
        return self.sources[s].reader.sample(int(sample) - int(self.source.offsets[s]))

    # ------------------------------------------------------------------ reading
    def __iter__(self) -> Iterator[Any]:
        """Sample by sample, this data-parallel group's and worker's share of the epoch, in the
        mixture's order: each source's samples come from that source's own sample-by-sample
        reader (which reads a group ahead on its threads), taken in turn as the order says."""
        worker, workers = this_worker()
        batches = self.source.batches(self.group, self.batch_size, worker=worker, workers=workers)
        ids = batches.reshape(-1)
        if all(0 < r.index.largest_sample < PIECE for r in self.reader.readers):
            yield from one_by_one(self.reader, ids)  # a group across the sources at a time
            return
        offsets = self.source.offsets
        which = np.searchsorted(offsets, ids, side="right") - 1
        each = {
            int(s): _one_by_one(self.reader.readers[s], ids[which == s] - offsets[s])
            for s in np.unique(which)
        }
        for s in which.tolist():
            sample = next(each[s], _SKIPPED)  # (a corrupt sample skipped shortens its source)
            if sample is not _SKIPPED:
                yield sample


_SKIPPED = object()


def _sources(
    datasets: list[StreamingDataset], given: Sequence[float], mp_context: Any
) -> list[MixedSource]:
    """The datasets as the mixture's sources; the datasets themselves are left as they were.
    They count into one set of counters, made anew in the mixture's process context (a dataset
    on a POSIX tier made its own for forked workers; the mixture of it and a remote one starts
    its workers from a fork server, which cannot take them): one add, one lock, a batch for
    all the sources (a lock per source cost a batch of small samples ~3 us each). Each gets its
    share of the reader threads: a
    mixture's batch is each source's part of it, read one after the other, and with each
    source's full complement a batch of small samples paid three sets of thread hand-offs
    (~40 vs ~18 CPU us a sample)."""
    whole = sum(given) or 1.0
    counters, out = Counters(mp_context), []
    for ds, part in zip(datasets, given, strict=True):
        reader = copy.copy(ds.reader)  # (the same index and node cache)
        reader.counters = counters
        reader.read_threads = max(2, round(ds.reader.read_threads * part / whole))
        out.append(MixedSource(reader, ds.seed, ds.shuffle, ds.block_shards))
    return out


def _one_by_one(reader: SampleReader, ids: np.ndarray) -> Iterator[Any]:
    """A source's samples of ``ids`` in order, read as its dataset reads them one by one."""
    if 0 < reader.index.largest_sample < PIECE:
        yield from one_by_one(reader, ids)
        return
    groups = [ids[k : k + READ_GROUP] for k in range(0, len(ids), READ_GROUP)]
    for group in groups:  # (large samples: each read in pieces on every thread)
        for samples in read_batches(reader, group.reshape(1, -1), None):
            yield from samples


def _check_shares(
    n: int,
    weights: Sequence[float] | None,
    samples: Sequence[int] | None,
    epoch_samples: int | None,
    on_exhausted: str,
) -> None:
    if on_exhausted not in EXHAUSTED:
        raise StreamError(f"StreamingMixture on_exhausted={on_exhausted!r}: use 'repeat' or 'stop'")
    if (weights is None) == (samples is None):
        raise StreamError(
            "StreamingMixture: give weights= (shares of the epoch) or samples= (samples per "
            "source per epoch), one of them"
        )
    given, name = (weights, "weights") if weights is not None else (samples, "samples")
    if len(given) != n:  # type: ignore[arg-type]
        raise StreamError(
            f"StreamingMixture {name}={list(given)!r}: give one per source ({n})"  # type: ignore[arg-type]
        )
    if weights is not None:
        if not all(isinstance(w, int | float) and w >= 0 and np.isfinite(w) for w in weights):
            raise StreamError(
                f"StreamingMixture weights={list(weights)!r}: use numbers >= 0 "
                "(e.g. [0.5, 0.3, 0.2])"
            )
        if not sum(weights):
            raise StreamError("StreamingMixture weights: at least one must be above 0")
    if samples is not None:
        if epoch_samples is not None:
            raise StreamError(
                "StreamingMixture: samples= sets the epoch's size already; leave epoch_samples out"
            )
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in samples):
            raise StreamError(f"StreamingMixture samples={list(samples)!r}: use whole numbers >= 0")
    if epoch_samples is not None and (not isinstance(epoch_samples, int) or epoch_samples < 0):
        raise StreamError(
            f"StreamingMixture epoch_samples={epoch_samples!r}: use a whole number >= 0"
        )
