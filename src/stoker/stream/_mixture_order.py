"""A mixture's epoch order: pure functions of the sources' sizes, the counts, the seed and the
epoch (nothing else is state: a resumed or re-sharded job recomputes the same order).

Counts: ``weights`` are turned into whole samples per source by largest remainders, so the
counts sum to the epoch size exactly and each is within one sample of its weight's share.

Interleave: source ``s``'s ``n_s`` samples are placed at ``(k + u_s) / n_s`` for ``k = 0 ..
n_s - 1`` on a line from 0 to 1, ``u_s`` drawn from the seed and epoch, and the epoch reads the
line from left to right. Each source is spread evenly over the epoch, so any stretch of it (a
batch, a data-parallel group's share, the part before a preemption) holds each source within
about one sample of its weight; and which source comes first is random from epoch to epoch.

Which samples of a source: its own epoch order (its seed, shuffle and shard blocks), pass after
pass when it has fewer samples than its count (``repeat``), each pass a different epoch of it.
With ``stop`` the mixture's epoch ends where the first source runs out, every source at its
share up to there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.random import default_rng  # (with the module: see _order.py)

from ..errors import StreamError

EXHAUSTED = ("repeat", "stop")


def apportion(weights: Sequence[float], total: int) -> list[int]:
    """Whole counts summing to ``total`` in the proportions of ``weights`` (largest remainders;
    ties go to the earlier source)."""
    whole = sum(weights)
    exact = [w / whole * total for w in weights]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda s: (counts[s] - exact[s], s))
    for s in by_remainder[: total - sum(counts)]:
        counts[s] += 1
    return counts


def passes(count: int, size: int) -> int:
    """Passes over a source of ``size`` samples that ``count`` samples take."""
    return -(-count // size) if size else 0


def interleave(
    counts: Sequence[int], sizes: Sequence[int], *, seed: int, epoch: int, repeat: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(source, k) of each sample of the epoch, in order: ``k`` counts that source's samples."""
    rng = default_rng([seed, epoch, 0x6D6978])  # "mix": apart from the sources' own
    offsets = rng.random(len(counts))
    ends = [
        (size + offsets[s]) / count
        for s, (count, size) in enumerate(zip(counts, sizes, strict=True))
        if not repeat and count > size
    ]
    cut = min(ends, default=math.inf)  # stop: where the first source runs out
    keys, source, k = [], [], []
    for s, count in enumerate(counts):
        ks = np.arange(count, dtype=np.int64)
        at = (ks + offsets[s]) / max(1, count)
        kept = at < cut
        keys.append(at[kept])
        source.append(np.full(int(kept.sum()), s, dtype=np.int64))
        k.append(ks[kept])
    all_keys = np.concatenate(keys) if keys else np.zeros(0)
    order = np.argsort(all_keys, kind="stable")
    return np.concatenate(source)[order], np.concatenate(k)[order]


def mixture_order(
    counts: Sequence[int],
    sizes: Sequence[int],
    source_order: Callable[[int, int], np.ndarray],
    *,
    seed: int,
    epoch: int,
    repeat: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The epoch's samples as (source, sample id within the source). ``source_order(s, e)``:
    source ``s``'s own order in its epoch ``e``; pass ``j`` of mixture epoch ``epoch`` reads the
    source's epoch ``epoch * passes + j``, so no two passes of any epoch read the same order."""
    for s, (count, size) in enumerate(zip(counts, sizes, strict=True)):
        if count and not size:
            raise StreamError(f"mixture source {s} holds no samples, and its count is {count}")
    source, k = interleave(counts, sizes, seed=seed, epoch=epoch, repeat=repeat)
    ids = np.empty(len(source), dtype=np.int64)
    for s, (count, size) in enumerate(zip(counts, sizes, strict=True)):
        mine = source == s
        if not mine.any():
            continue
        n = passes(count, size) if repeat else 1  # (stop: the cut is within one pass)
        stream = np.concatenate([source_order(s, epoch * n + j) for j in range(n)])
        ids[mine] = stream[k[mine]]
    return source, ids
