"""Streaming datasets: a shard format and writer, a PyTorch dataset that reads any stoker store
at the tier's speed, a global order that survives any change of ranks or workers, and the
stall figures of the training loop. See docs/stream.md."""

from __future__ import annotations

from ._dataset import StreamingDataset
from ._index import DatasetIndex, ShardInfo
from ._loader import StreamingLoader
from ._metrics import StallMetrics, serve_metrics
from ._sources import write_shards
from ._writer import ShardWriter

__all__ = [
    "DatasetIndex",
    "ShardInfo",
    "ShardWriter",
    "StallMetrics",
    "StreamingDataset",
    "StreamingLoader",
    "serve_metrics",
    "write_shards",
]
