"""The mixture's shard source: its order (_mixture_order.py) over the sources' concatenated
ids, source ``s``'s sample ``i`` being ``offsets[s] + i``, and the state it is made from (the
seed, the epoch, the counts, and each source's own order settings and fingerprint). It keeps
the shard source's contract (``batches``, ``batches_left``, ``state_dict``, ...), so the
loader and batcher serve a mixture as they serve one dataset."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import StreamError
from ._groups import DataGroup
from ._index import DatasetIndex
from ._mixture_order import apportion, mixture_order
from ._order import batches_per_epoch, epoch_order, rank_batches, worker_batches
from ._sample_reader import SampleReader


@dataclass
class MixedSource:
    """One source as the mixture reads it: its own sample reader (the dataset's, with the
    mixture's counters and a share of the reader threads) and what decides its own order."""

    reader: SampleReader
    seed: int
    shuffle: bool
    block_shards: int

    @property
    def index(self) -> DatasetIndex:
        return self.reader.index

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shuffle": self.shuffle,
            "block_shards": self.block_shards,
            "samples": self.index.samples,
            "dataset": self.index.fingerprint(),
        }


class MixtureSource:
    """The mixture's order and its state: the shard source's contract (``batches``,
    ``batches_left``, ``state_dict``...) over the sources' concatenated ids."""

    def __init__(
        self,
        sources: list[MixedSource],
        *,
        weights: Sequence[float] | None,
        samples: Sequence[int] | None,
        epoch_samples: int | None,
        on_exhausted: str,
        seed: int,
        mp_context: Any,
    ) -> None:
        self.sources = sources
        self.where = [src.reader.remote for src in sources]
        self.weights = None if weights is None else [float(w) for w in weights]
        self.samples, self.epoch_samples = samples, epoch_samples
        self.on_exhausted, self.seed = on_exhausted, seed
        self._epoch = mp_context.Value("q", 0, lock=False)  # (seen by persistent workers)
        self._order: tuple[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None
        self._offsets: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__ | {"_order": None}  # (a worker recomputes it)

    @property
    def sizes(self) -> list[int]:
        return [src.index.samples for src in self.sources]

    @property
    def offsets(self) -> np.ndarray:
        """Where each source's ids start in the mixture's id space (read on first use)."""
        if self._offsets is None:
            self._offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        return self._offsets

    def counts(self) -> list[int]:
        """Samples per source per epoch (before a ``stop`` cut)."""
        if self.samples is not None:
            return [int(n) for n in self.samples]
        assert self.weights is not None
        total = self.epoch_samples if self.epoch_samples is not None else sum(self.sizes)
        return apportion(self.weights, total)

    @property
    def epoch(self) -> int:
        return int(self._epoch.value)

    def set_epoch(self, epoch: int) -> None:
        self._epoch.value = epoch

    def order_by_source(self) -> tuple[np.ndarray, np.ndarray]:
        """This epoch's samples as (source, id within the source), kept for reuse."""
        key = (self.seed, self.epoch)
        if self._order is None or self._order[0] != key:
            sizes = self.sizes

            def source_order(s: int, epoch: int) -> np.ndarray:
                src = self.sources[s]
                return epoch_order(
                    src.index.shard_sizes,
                    seed=src.seed,
                    epoch=epoch,
                    shuffle=src.shuffle,
                    block_shards=src.block_shards,
                )

            order = mixture_order(
                self.counts(),
                sizes,
                source_order,
                seed=self.seed,
                epoch=self.epoch,
                repeat=self.on_exhausted == "repeat",
            )
            self._order = (key, order)
        return self._order[1]

    def order(self) -> np.ndarray:
        """This epoch's mixture ids, in order."""
        source, ids = self.order_by_source()
        return self.offsets[source] + ids

    def batches(
        self,
        group: DataGroup,
        batch_size: int,
        *,
        start: int = 0,
        worker: int = 0,
        workers: int = 1,
    ) -> np.ndarray:
        batches = rank_batches(
            self.order(),
            start=start,
            world_size=group.size,
            rank=group.rank,
            batch_size=batch_size,
            drop_last=True,  # a padded tail would repeat samples and skew the shares
        )
        return worker_batches(batches, worker, workers)

    def batches_left(self, group: DataGroup, batch_size: int, *, start: int = 0) -> int:
        return batches_per_epoch(
            len(self.order_by_source()[0]),
            world_size=group.size,
            batch_size=batch_size,
            drop_last=True,
            start=start,
        )

    def no_batch(self, where: str, group: DataGroup, batch_size: int) -> str:
        return (
            f"the mixture of {where}: data-parallel rank {group.rank} of {group.size} gets no "
            f"batch this epoch: its {len(self.order_by_source()[0])} samples are fewer than one "
            f"global batch ({group.size} x batch_size {batch_size}): lower batch_size, or give "
            "the mixture more samples (epoch_samples=)"
        )

    def positions(self, position: int) -> list[int]:
        """Samples each source has given the epoch by the mixture's ``position``."""
        source, _ = self.order_by_source()
        return np.bincount(source[:position], minlength=len(self.sources)).tolist()

    # ------------------------------------------------------------------ state
    def state_dict(self, position: int = 0) -> dict[str, Any]:
        """The state at the loader's ``position``, with each source's position there."""
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "samples": int(self.offsets[-1]),
            "mixture": {
                "positions": self.positions(position),
                "counts": self.counts(),
                "on_exhausted": self.on_exhausted,
                "sources": [src.state_dict() for src in self.sources],
            },
        }

    def load_state_dict(self, state: dict[str, Any], where: str) -> None:
        """Continue the epoch ``state`` describes; refuses another mixture's state."""
        theirs = state.get("mixture")
        if theirs is None:
            raise StreamError(
                f"the loader state is of one dataset, not of a mixture: resume {where} from a "
                "state its own loader saved"
            )
        ours = self.state_dict()["mixture"]
        if len(theirs["sources"]) != len(ours["sources"]):
            raise StreamError(
                f"the loader state is of a mixture of {len(theirs['sources'])} sources, this "
                f"one has {len(ours['sources'])}: resume with the same sources"
            )
        for s, (src, mine) in enumerate(zip(theirs["sources"], ours["sources"], strict=True)):
            if (src["samples"], src.get("dataset")) != (mine["samples"], mine["dataset"]):
                raise StreamError(
                    f"mixture source {s} ({self.where[s]}) is not the dataset the state was "
                    "saved with (its shards differ): resume with the same sources, in order"
                )
        if (theirs["counts"], theirs["on_exhausted"]) != (ours["counts"], ours["on_exhausted"]):
            raise StreamError(
                f"the loader state is of a mixture with counts {theirs['counts']} "
                f"({theirs['on_exhausted']}); this one has {ours['counts']} "
                f"({ours['on_exhausted']}): resume with the same weights and epoch size"
            )
        for src, saved in zip(self.sources, theirs["sources"], strict=True):
            src.seed, src.shuffle, src.block_shards = (
                saved["seed"],
                saved["shuffle"],
                saved["block_shards"],
            )
        self.seed = state["seed"]
        self.set_epoch(state["epoch"])
