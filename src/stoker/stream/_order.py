"""The global sample order, and each rank's and worker's share of it.

The order of an epoch depends only on the seed, the epoch and the shard sizes: never on how
many nodes, ranks or workers read it. That is what lets a job resume on another number of ranks
and continue the same sequence with nothing repeated or skipped.

Shuffle (shard blocks): shards are permuted, cut into blocks of ``block_shards`` consecutive
shards, and the samples of each block are shuffled together. The block is the in-memory
shuffle buffer: a reader needs at most one block's shards at a time (plus what it downloads
ahead), and a batch draws from every shard of its block. Quality is measured as distinct shards
per batch (bench/stream_bench.py).

Split: the epoch is read in global batches of ``world_size x batch_size`` samples from position
``start``. Rank ``r`` takes slice ``r`` of each global batch; worker ``w`` of ``W`` takes the
rank's batches ``w, w + W, ...``, which is the order in which torch's DataLoader hands its
workers' batches back, so the rank sees its batches in order. The tail that does not fill a
global batch is dropped, or padded from the head of the epoch (``drop_last=False``), so every
rank gets the same number of batches.
"""

from __future__ import annotations

import numpy as np

# Imported with this module, not at first use: a DataLoader worker forked after it would
# import numpy.random itself (~10 ms in each, before its first batch).
from numpy.random import default_rng


def epoch_order(
    shard_sizes: list[int], *, seed: int, epoch: int, shuffle: bool, block_shards: int
) -> np.ndarray:
    """Global sample ids of one epoch, in the order they are consumed."""
    starts = np.concatenate([[0], np.cumsum(shard_sizes, dtype=np.int64)])
    if not shuffle:
        return np.arange(starts[-1], dtype=np.int64)
    rng = default_rng([seed, epoch])
    shards = rng.permutation(len(shard_sizes))
    parts = []
    for b in range(0, len(shards), max(1, block_shards)):
        block = np.concatenate(
            [np.arange(starts[s], starts[s + 1]) for s in shards[b : b + block_shards]]
        )
        parts.append(rng.permutation(block))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def rank_batches(
    order: np.ndarray, *, start: int, world_size: int, rank: int, batch_size: int, drop_last: bool
) -> np.ndarray:
    """This rank's batches from global position ``start``: an array (batches, batch_size)."""
    rest = order[start:]
    global_batch = world_size * batch_size
    if drop_last or len(order) == 0:
        rest = rest[: len(rest) // global_batch * global_batch]
    else:
        short = -len(rest) % global_batch
        rest = np.concatenate([rest, np.resize(order, short)])
    batches = rest.reshape(-1, world_size, batch_size)
    return batches[:, rank, :]


def worker_batches(batches: np.ndarray, worker: int, workers: int) -> np.ndarray:
    return batches[worker::workers]


def batches_per_epoch(
    samples: int, *, world_size: int, batch_size: int, drop_last: bool, start: int = 0
) -> int:
    global_batch = world_size * batch_size
    rest = max(0, samples - start)
    return rest // global_batch if drop_last else -(-rest // global_batch)
