"""``StreamingLoader``: torch's DataLoader over a StreamingDataset, with resume and stall metrics.

Workers read and collate whole batches (a ``Batcher`` per epoch, handed to DataLoader with
``batch_size=None``), so a skipped corrupt sample shortens one batch instead of shifting every
later one. The loader holds the position: the global samples the training loop consumed in the
epoch. ``state_dict()`` is that position and the shard source's state, from which any number of
ranks, workers and data-parallel groups can continue. The dataset is never changed to make it
batch: the loader's batch size and collate function live in the Batcher it makes.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch.utils.data

from ..errors import StreamError, StreamWarning
from ._ahead import ahead
from ._batcher import Batcher
from ._dataset import StreamingDataset
from ._metrics import StallMeter, StallMetrics

STATE_VERSION = 1
DATASET_OPTIONS = {"shuffle", "drop_last", "sampler", "batch_sampler", "generator"}


class StreamingLoader:
    def __init__(
        self,
        dataset: StreamingDataset,
        batch_size: int | None = None,
        *,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        prefetch_factor: int | None = None,
        **dataloader_options: Any,
    ) -> None:
        for name in DATASET_OPTIONS.intersection(dataloader_options):
            instead = (
                f"pass {name} to StreamingDataset instead"
                if name in ("shuffle", "drop_last")
                else "StreamingDataset(shuffle=, seed=, drop_last=) set it"
            )
            raise StreamError(
                f"StreamingLoader({name}=...): the order is the dataset's (one global order for "
                f"every rank and worker): {instead}"
            )
        if batch_size is not None and batch_size < 1:
            raise StreamError(f"StreamingLoader batch_size={batch_size}: use 1 or more")
        if dataloader_options.get("persistent_workers"):
            raise StreamError(
                "persistent_workers=True would keep workers at the position they started from "
                "(a resumed state would not reach them); "
                "StreamingLoader restarts them each epoch (they start in well under a second)"
            )
        self.dataset = dataset
        self.batch_size = batch_size or dataset.batch_size
        self.collate = collate_fn or torch.utils.data.default_collate
        options: dict[str, Any] = {"num_workers": num_workers, "pin_memory": pin_memory}
        if num_workers and prefetch_factor:
            options["prefetch_factor"] = prefetch_factor
        if num_workers and "multiprocessing_context" not in dataloader_options:
            options["multiprocessing_context"] = dataset.mp_context
        self.options = options | dataloader_options
        # Without worker processes, a thread reads ahead so the loop does not wait on each read.
        self.read_ahead = 0 if num_workers else (prefetch_factor or 2)
        self.meter = StallMeter()
        # Global samples the loop consumed in epoch `_position_epoch`; another epoch set on the
        # dataset (set_epoch) starts from its beginning.
        self._position, self._position_epoch = 0, dataset.epoch

    @property
    def position(self) -> int:
        """Global samples of the current epoch the training loop has consumed (every rank)."""
        if self.dataset.epoch != self._position_epoch:
            self._position, self._position_epoch = 0, self.dataset.epoch
        return self._position

    def __len__(self) -> int:
        """Batches this rank still gets in the current epoch."""
        ds = self.dataset
        return ds.source.batches_left(ds.group, self.batch_size, start=self.position)

    def __iter__(self) -> Iterator[Any]:
        ds, group, start = self.dataset, self.dataset.group, self.position
        if start == 0 and len(self) == 0:  # here, in the loop's process, at its line
            warnings.warn(
                ds.source.no_batch(ds.remote, group, self.batch_size), StreamWarning, stacklevel=2
            )
        batcher = Batcher(
            ds.source,
            ds.reader,
            group,
            batch_size=self.batch_size,
            collate=self.collate,
            start=start,
        )
        loader = torch.utils.data.DataLoader(batcher, batch_size=None, **self.options)
        step = group.size * self.batch_size  # global samples per step, every group's batch
        asked = time.perf_counter()  # the first batch's wait includes starting the workers
        it = ahead(loader, self.read_ahead) if self.read_ahead else iter(loader)
        returned: float | None = None
        while True:
            if returned is not None:
                asked = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            got = time.perf_counter()
            self.meter.batch(
                wait_s=got - asked, compute_s=None if returned is None else asked - returned
            )
            self._position += step
            returned = time.perf_counter()
            yield batch
            del batch  # free it before the next wait, not inside it
        ds.set_epoch(ds.epoch + 1)

    @property
    def metrics(self) -> StallMetrics:
        """Live figures: waits, compute, accelerator utilization, bytes per tier, cache hits."""
        return self.meter.snapshot(self.dataset)

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, Any]:
        # (the position too: a mixture's source records where each of its sources is)
        state = self.dataset.source.state_dict(position=self.position)
        return {"version": STATE_VERSION, **state, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ds = self.dataset
        if state.get("version") != STATE_VERSION:
            raise StreamError(f"loader state version {state.get('version')!r} is not supported")
        missing = sorted(set(self.state_dict()) - set(state) - {"dataset"})  # (newer field)
        if missing:
            raise StreamError(
                f"the loader state lacks {', '.join(missing)}: pass what state_dict() returned"
            )
        ds.source.load_state_dict(state, ds.remote)
        self._position, self._position_epoch = state["position"], state["epoch"]
