"""When each part of the fleet fails next: one clock per GPU and one per VM, drawn in bulk.

A part's time to failure is Weibull with shape ``k`` and a scale that keeps its mean at the
part's MTBF (``k = 1`` is the exponential the plan assumes; ``k < 1`` is infant mortality: new
parts fail sooner). A swapped VM brings new GPUs and a new host, so their clocks start again.
"""

from __future__ import annotations

import math

import numpy as np


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
        self.next_s = self._draw(np.arange(gpus + nodes), 0.0)
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
        part = int(np.argmin(self.next_s))
        return float(self.next_s[part]), part

    def node_of(self, part: int) -> int:
        return part // self.per_node if part < self.gpus else part - self.gpus

    def renew(self, part: int, now: float) -> None:
        """A failure that leaves the VM in place (a restart): that part's clock starts again."""
        self.next_s[part] = now + self.scale[part] * self._unit(1)[0]

    def swap(self, node: int, now: float) -> None:
        """A new VM: its GPUs' clocks and its own start again."""
        first = node * self.per_node
        last = min(first + self.per_node, self.gpus)
        if last > first:
            self.next_s[first:last] = now + self.scale[first:last] * self._unit(last - first)
        self.renew(self.gpus + node, now)
