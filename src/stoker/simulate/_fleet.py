"""When each part of the fleet fails next: one clock per GPU and one per VM, drawn in bulk.

A part's time to failure is Weibull with shape ``k`` and a scale that keeps its mean at the
part's MTBF (``k = 1`` is the exponential the plan assumes; ``k < 1`` is infant mortality: new
parts fail sooner). A swapped VM brings new GPUs and a new host, so their clocks start again.

The next failure is found through each block's earliest clock (blocks of BLOCK parts), so a
failure costs two short argmins and a block's min, not a scan of a million GPUs' clocks.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK = 1024


class Fleet:
    def __init__(
        self,
        gpus: int,
        nodes: int,
        gpu_mtbf_s: float,
        node_mtbf_s: float,
        shape: float,
        rng: np.random.Generator,
    ) -> None:
        self.gpus, self.nodes, self.shape, self.rng = gpus, nodes, shape, rng
        self.per_node = max(1, math.ceil(gpus / nodes))
        mean_factor = math.gamma(1 + 1 / shape)
        self.scale = np.concatenate(
            [np.full(gpus, gpu_mtbf_s / mean_factor), np.full(nodes, node_mtbf_s / mean_factor)]
        )
        parts = gpus + nodes
        blocks = -(-parts // BLOCK)
        self._clocks = np.full(blocks * BLOCK, math.inf)  # the tail past the parts never fails
        self.next_s = self._clocks[:parts]
        self.next_s[:] = self._draw(np.arange(parts), 0.0)
        self._blocks = self._clocks.reshape(blocks, BLOCK)
        self._block_min = self._blocks.min(axis=1)
        self._pool = np.empty(0)
        self._pool_at = 0

    def _draw(self, parts: np.ndarray, now: float) -> np.ndarray:
        scale = self.scale[parts]
        finite = np.isfinite(scale)
        out = np.full(len(parts), math.inf)
        out[finite] = now + scale[finite] * self.rng.weibull(self.shape, int(finite.sum()))
        return out

    def _unit(self, n: int) -> np.ndarray:
        """``n`` standard Weibull draws from a pool drawn in bulk (a swap needs a handful)."""
        if self._pool_at + n > len(self._pool):
            self._pool = self.rng.weibull(self.shape, max(4096, n))
            self._pool_at = 0
        out = self._pool[self._pool_at : self._pool_at + n]
        self._pool_at += n
        return out

    def next_failure(self) -> tuple[float, int]:
        """(when, which part): a part below ``gpus`` is a GPU, the rest are VMs."""
        block = int(np.argmin(self._block_min))
        part = block * BLOCK + int(np.argmin(self._blocks[block]))
        return float(self.next_s[part]), part

    def _changed(self, first: int, last: int) -> None:
        """Parts first..last-1 have new clocks: their blocks' earliest again."""
        lo, hi = first // BLOCK, (last - 1) // BLOCK + 1
        self._block_min[lo:hi] = self._blocks[lo:hi].min(axis=1)

    def node_of(self, part: int) -> int:
        return part // self.per_node if part < self.gpus else part - self.gpus

    def renew(self, part: int, now: float) -> None:
        """A failure that leaves the VM in place (a restart): that part's clock starts again."""
        self.next_s[part] = now + self.scale[part] * self._unit(1)[0]
        self._changed(part, part + 1)

    def swap(self, node: int, now: float) -> None:
        """A new VM: its GPUs' clocks and its own start again."""
        first = node * self.per_node
        last = min(first + self.per_node, self.gpus)
        if last > first:
            self.next_s[first:last] = now + self.scale[first:last] * self._unit(last - first)
            self._changed(first, last)
        self.renew(self.gpus + node, now)
