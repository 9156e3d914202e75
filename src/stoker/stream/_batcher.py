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
    for k, batch in enumerate(batches):
        # The next batch is asked of the disk as this one is read (the second, with the
        # third); not the first, which the loop is waiting for alone.
        if k:
            access.advise(batches[1 if k == 1 else k + 1 : k + 2])
        out = reader.tensor_batch(batch) if fast else reader.samples(batch)
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
