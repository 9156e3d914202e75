"""Alpha-beta cost of collectives, and busbw as nccl-tests defines it. Pure functions.

``size`` is bytes per rank, ``bw`` the bytes/s one rank can send (and receive) at once,
``alpha`` the latency of one hop in seconds.

    ring all-reduce   T = 2(p-1) a + 2(p-1)/p * N/B
    tree all-reduce   T = 2 log2(p) a + 2 N/B          (NCCL's double binary tree)
    in-network (SHARP) T = 2 a + N/B                   (each byte goes up once and comes down once)
    reduce-scatter / all-gather   T = (p-1) a + (p-1)/p * N/B

nccl-tests (doc/PERFORMANCE.md): algbw = N/t; busbw = algbw * 2(p-1)/p for all-reduce and
(p-1)/p for reduce-scatter, all-gather and all-to-all.
"""

from __future__ import annotations

import math
from typing import Literal

Collective = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]


def ring_allreduce_time(size: float, ranks: int, bw: float, alpha: float) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * size / bw


def tree_allreduce_time(size: float, ranks: int, bw: float, alpha: float) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * math.log2(ranks) * alpha + 2 * size / bw


def sharp_allreduce_time(size: float, ranks: int, bw: float, alpha: float) -> float:
    if ranks <= 1:
        return 0.0
    return 2 * alpha + size / bw


def scatter_gather_time(size: float, ranks: int, bw: float, alpha: float) -> float:
    """One reduce-scatter or one all-gather (ring)."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * alpha + (ranks - 1) / ranks * size / bw


def bus_factor(collective: Collective, ranks: int) -> float:
    if ranks <= 1:
        return 0.0
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    return (ranks - 1) / ranks


def algbw(size: float, seconds: float) -> float:
    return size / seconds if seconds > 0 else math.inf


def busbw(collective: Collective, size: float, ranks: int, seconds: float) -> float:
    return algbw(size, seconds) * bus_factor(collective, ranks)
