"""``StreamingLoader``: torch's DataLoader over a StreamingDataset, with resume and stall metrics.

Workers collate whole batches (the dataset yields them, ``batch_size=None`` for DataLoader), so
a skipped corrupt sample shortens one batch instead of shifting every later one. The loader
counts what the training loop consumed; ``state_dict()`` is that position in the global order,
which any number of ranks and workers can continue from.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch.utils.data

from ..errors import StreamError, StreamWarning
from ._ahead import ahead
from ._dataset import StreamingDataset, rank_and_world
from ._metrics import StallMeter, StallMetrics
from ._order import batches_per_epoch

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
        dataset.batch_size = batch_size or dataset.batch_size
        dataset.collate = collate_fn or torch.utils.data.default_collate
        options: dict[str, Any] = {"num_workers": num_workers, "pin_memory": pin_memory}
        if num_workers and prefetch_factor:
            options["prefetch_factor"] = prefetch_factor
        if num_workers and "multiprocessing_context" not in dataloader_options:
            options["multiprocessing_context"] = dataset.mp_context
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, **options, **dataloader_options
        )
        # Without worker processes, a thread reads ahead so the loop does not wait on each read.
        self.read_ahead = 0 if num_workers else (prefetch_factor or 2)
        self.meter = StallMeter()

    @property
    def batch_size(self) -> int:
        return self.dataset.batch_size

    def __len__(self) -> int:
        """Batches this rank still gets in the current epoch."""
        _, world = rank_and_world()
        ds = self.dataset
        return batches_per_epoch(
            ds.index.samples,
            world_size=world,
            batch_size=ds.batch_size,
            drop_last=ds.drop_last,
            start=ds.position,
        )

    def __iter__(self) -> Iterator[Any]:
        ds, (rank, world) = self.dataset, rank_and_world()
        if ds.position == 0 and len(self) == 0:  # here, in the loop's process, at its line
            warnings.warn(ds.no_batch(rank, world), StreamWarning, stacklevel=2)
        asked = time.perf_counter()  # the first batch's wait includes starting the workers
        it = ahead(self.loader, self.read_ahead) if self.read_ahead else iter(self.loader)
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
            ds.position += world * ds.batch_size
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
        ds = self.dataset
        return {
            "version": STATE_VERSION,
            "epoch": ds.epoch,
            "position": ds.position,
            "seed": ds.seed,
            "shuffle": ds.shuffle,
            "block_shards": ds.block_shards,
            "samples": ds.index.samples,
            "dataset": ds.index.fingerprint(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        ds = self.dataset
        if state.get("version") != STATE_VERSION:
            raise StreamError(f"loader state version {state.get('version')!r} is not supported")
        missing = sorted(set(self.state_dict()) - set(state) - {"dataset"})  # (newer field)
        if missing:
            raise StreamError(
                f"the loader state lacks {', '.join(missing)}: pass what state_dict() returned"
            )
        if state["samples"] != ds.index.samples:
            raise StreamError(
                f"the loader state is for a dataset of {state['samples']} samples, this one has "
                f"{ds.index.samples}: resume on the same dataset"
            )
        if state.get("dataset", ds.index.fingerprint()) != ds.index.fingerprint():
            raise StreamError(
                f"the loader state is for another dataset than {ds.remote} (its shards differ): "
                "resume on the dataset the state was saved with"
            )
        ds.seed, ds.shuffle, ds.block_shards = (
            state["seed"],
            state["shuffle"],
            state["block_shards"],
        )
        ds.epoch, ds.position = state["epoch"], state["position"]
