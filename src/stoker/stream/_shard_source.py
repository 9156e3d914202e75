"""The shard source: a dataset's epoch order and the state it is made from.

The source owns what decides the order (seed, shuffle, block size, the epoch) and answers
which global sample ids a data-parallel group, and a worker of it, reads from a position on
(the pure functions of _order.py do the arithmetic). It holds no position of its own: the
loader holds where the training loop is, and asks from there. Its state is five scalars and
the dataset's fingerprint; everything else is recomputed from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import StreamError
from ._groups import DataGroup
from ._index import DatasetIndex
from ._lazy_index import LazyIndex
from ._order import batches_per_epoch, epoch_order, rank_batches, worker_batches


class ShardSource:
    def __init__(
        self,
        index: LazyIndex,
        *,
        seed: int,
        shuffle: bool,
        block_shards: int,
        drop_last: bool,
        mp_context: Any,
    ) -> None:
        self._index = index
        self.seed, self.shuffle, self.block_shards, self.drop_last = (
            seed,
            shuffle,
            block_shards,
            drop_last,
        )
        # In shared memory: torch's persistent workers keep the source they started with, and
        # must still read the epoch that set_epoch names.
        self._epoch = mp_context.Value("q", 0, lock=False)
        self._order: tuple[tuple[Any, ...], np.ndarray] | None = None

    @property
    def index(self) -> DatasetIndex:
        return self._index.get()

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_order": None}  # (a worker recomputes it: no 8 B per sample sent)

    @property
    def epoch(self) -> int:
        return int(self._epoch.value)

    def set_epoch(self, epoch: int) -> None:
        self._epoch.value = epoch

    def order(self) -> np.ndarray:
        """Global sample ids of this epoch, in the order they are consumed (kept for reuse:
        every worker and every epoch's length asks for it)."""
        key = (self.seed, self.epoch, self.shuffle, self.block_shards)
        if self._order is None or self._order[0] != key:
            order = epoch_order(
                self.index.shard_sizes,
                seed=self.seed,
                epoch=self.epoch,
                shuffle=self.shuffle,
                block_shards=self.block_shards,
            )
            self._order = (key, order)
        return self._order[1]

    def batches(
        self,
        group: DataGroup,
        batch_size: int,
        *,
        start: int = 0,
        worker: int = 0,
        workers: int = 1,
    ) -> np.ndarray:
        """The global sample ids that data-parallel rank ``group.rank`` (every rank of its
        replica alike) reads from global position ``start``, as batches; those of ``worker``
        of ``workers``."""
        batches = rank_batches(
            self.order(),
            start=start,
            world_size=group.size,
            rank=group.rank,
            batch_size=batch_size,
            drop_last=self.drop_last,
        )
        return worker_batches(batches, worker, workers)

    def batches_left(self, group: DataGroup, batch_size: int, *, start: int = 0) -> int:
        return batches_per_epoch(
            self.index.samples,
            world_size=group.size,
            batch_size=batch_size,
            drop_last=self.drop_last,
            start=start,
        )

    def no_batch(self, where: str, group: DataGroup, batch_size: int) -> str:
        """Why an epoch gives this group no batch."""
        if not self.index.samples:
            return f"{where} holds no samples: this epoch reads nothing"
        return (
            f"{where}: data-parallel rank {group.rank} of {group.size} gets no batch this "
            f"epoch: the dataset's {self.index.samples} samples are fewer than one global batch "
            f"({group.size} x batch_size {batch_size}), and drop_last drops a partial batch: "
            "lower batch_size, or pass drop_last=False"
        )

    # ------------------------------------------------------------------ state
    def state_dict(self, position: int = 0) -> dict[str, Any]:
        """The state; ``position`` (the loader's) is for a mixture's source (_mixture.py),
        which records each of its sources' positions: one dataset needs nothing of it."""
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "block_shards": self.block_shards,
            "samples": self.index.samples,
            "dataset": self.index.fingerprint(),
        }

    def load_state_dict(self, state: dict[str, Any], where: str) -> None:
        """Continue the order ``state`` describes; refuses a state of another dataset."""
        index = self.index
        if state["samples"] != index.samples:
            raise StreamError(
                f"the loader state is for a dataset of {state['samples']} samples, this one has "
                f"{index.samples}: resume on the same dataset"
            )
        if state.get("dataset", index.fingerprint()) != index.fingerprint():
            raise StreamError(
                f"the loader state is for another dataset than {where} (its shards differ): "
                "resume on the dataset the state was saved with"
            )
        self.seed, self.shuffle, self.block_shards = (
            state["seed"],
            state["shuffle"],
            state["block_shards"],
        )
        self.set_epoch(state["epoch"])
