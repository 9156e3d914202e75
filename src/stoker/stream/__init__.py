"""Streaming datasets: a shard format and writer, a PyTorch dataset that reads any stoker store
at the tier's speed, a global order that survives any change of ranks or workers, and the
stall figures of the training loop. See docs/stream.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# Loaded on first use: a conversion process (write_shards' workers) needs the writer, not torch,
# whose import costs it seconds.
_WHERE = {
    "DatasetIndex": "_index",
    "ShardInfo": "_index",
    "ShardWriter": "_writer",
    "StallMetrics": "_metrics",
    "StreamingDataset": "_dataset",
    "StreamingLoader": "_loader",
    "StreamingMixture": "_mixture",
    "serve_metrics": "_metrics",
    "write_shards": "_convert",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_names(__name__, _WHERE)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers: the names above, from where they live
    from ._convert import write_shards as write_shards
    from ._dataset import StreamingDataset as StreamingDataset
    from ._index import DatasetIndex as DatasetIndex
    from ._index import ShardInfo as ShardInfo
    from ._loader import StreamingLoader as StreamingLoader
    from ._metrics import StallMetrics as StallMetrics
    from ._metrics import serve_metrics as serve_metrics
    from ._mixture import StreamingMixture as StreamingMixture
    from ._writer import ShardWriter as ShardWriter
