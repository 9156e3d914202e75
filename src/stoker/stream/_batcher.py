"""The batcher: one epoch's batches for this rank and worker, from a position.

The shard source says which global ids each batch holds; the sample reader reads them; the
batcher turns each batch into what the loop takes: collated samples (``collate_fn``), one
tensor read straight into place (``dtype=``, see _tensors.py), or, for a dataset iterated
sample by sample, the samples one at a time. ``Batcher`` is what ``StreamingLoader`` hands
torch's DataLoader: a new one per epoch, holding the position the loader holds, so the dataset
itself is never changed to make it batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch.utils.data

from ._groups import DataGroup
from ._sample_reader import SampleReader
from ._shard_source import ShardSource
from ._worker_exit import exit_with_training_process
from ._worker_memory import freeze_inherited_objects


def this_worker() -> tuple[int, int]:
    """(worker, workers) of the DataLoader process this runs in; (0, 1) outside one."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return 0, 1
    exit_with_training_process()
    freeze_inherited_objects()
    return info.id, info.num_workers


LOCATE_RUNS = 64  # batches (or groups) located at once


def located_runs(
    locate: Callable[[np.ndarray, int], list], ids: np.ndarray, size: int
) -> Iterator[Any]:
    """``locate`` (a reader's ``locate_runs`` or ``locate_in_order``) of each run of ``size`` of
    ``ids``, found ``LOCATE_RUNS`` runs at a time. A batch's own search was numpy calls between
    its reads, and each cost several us there (its code out of the CPU's caches, likely);
    located a window at a time, a batch costs less CPU (docs/stream.md, "Mixtures"). A window,
    not the epoch: an epoch's places as Python ints would not fit in memory for billions of
    samples."""
    step = size * LOCATE_RUNS
    for a in range(0, len(ids), step):
        yield from locate(ids[a : a + step], size)


def read_batches(
    reader: SampleReader,
    batches: np.ndarray,
    collate: Callable[[list[Any]], Any] | None,
) -> Iterator[Any]:
    """Each of ``batches`` read: collated (or read straight into one tensor when ``collate``
    is torch's default and the dataset has a ``dtype``); without ``collate``, a list."""
    access = reader.access()
    access.plan_prefetch(batches.reshape(-1))
    fast = reader.reads_into_tensors(collate)
    where = (
        located_runs(reader.locate_runs, batches.reshape(-1), batches.shape[1]) if fast else None
    )
    for k, batch in enumerate(batches):
        # The next batch is asked of the disk as this one is read (the second, with the
        # third); not the first, which the loop is waiting for alone.
        if k:
            access.advise(batches[1 if k == 1 else k + 1 : k + 2])
        out = reader.tensor_batch(batch, next(where)) if where else reader.samples(batch)
        # Whole-shard downloads start once the first batch is read by range: started
        # earlier, they take the store's bandwidth from the batch the loop waits for.
        access.start_downloads()
        yield out if fast or collate is None else collate(out)


class Batcher(torch.utils.data.IterableDataset):
    """This rank's batches of the source's current epoch from global position ``start``."""

    def __init__(
        self,
        source: ShardSource,
        reader: SampleReader,
        group: DataGroup,
        *,
        batch_size: int,
        collate: Callable[[list[Any]], Any],
        start: int,
    ) -> None:
        self.source, self.reader, self.group = source, reader, group
        self.batch_size, self.collate, self.start = batch_size, collate, start

    def __iter__(self) -> Iterator[Any]:
        worker, workers = this_worker()
        batches = self.source.batches(
            self.group, self.batch_size, start=self.start, worker=worker, workers=workers
        )
        return read_batches(self.reader, batches, self.collate)
