"""How long the training loop waited for data, as MLPerf Storage measures it.

Per batch, ``wait`` is the time ``next()`` took to hand the batch over, and ``compute`` the time
the loop spent between taking one batch and asking for the next. Accelerator utilization is
``compute / (compute + wait)`` with the first batch left out (it carries start-up, as MLPerf
Storage and DLIO leave out the first step). ``serve_metrics`` exposes the same figures to
Prometheus, read live at each scrape.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._dataset import StreamingDataset
    from ._loader import StreamingLoader


@dataclass(frozen=True)
class StallMetrics:
    batches: int
    first_batch_s: float | None  # time to first batch
    wait_s: float  # after the first batch
    compute_s: float
    tier: str
    bytes_read: int
    bytes_fetched: int
    cache_hits: int
    cache_misses: int
    skipped: int
    samples: int

    @property
    def utilization(self) -> float | None:
        """Accelerator utilization (compute / total), the first batch excluded."""
        total = self.wait_s + self.compute_s
        return self.compute_s / total if total > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"utilization": self.utilization}


class StallMeter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches, self.first_batch_s = 0, None
        self.wait_s = self.compute_s = 0.0

    def batch(self, *, wait_s: float, compute_s: float | None) -> None:
        with self._lock:
            self.batches += 1
            if self.first_batch_s is None:
                self.first_batch_s = wait_s
                return
            self.wait_s += wait_s
            self.compute_s += compute_s or 0.0

    def snapshot(self, ds: StreamingDataset) -> StallMetrics:
        stats = ds.stats()
        with self._lock:
            return StallMetrics(
                self.batches,
                self.first_batch_s,
                self.wait_s,
                self.compute_s,
                ds.tier,
                stats["bytes_read"],
                stats["bytes_fetched"],
                stats["cache_hits"],
                stats["cache_misses"],
                stats["skipped"],
                stats["samples"],
            )


def serve_metrics(
    loader: StreamingLoader, port: int = 19401, *, job: str = "", addr: str = "0.0.0.0"
) -> Any:
    """Serve the loader's figures at http://ADDR:PORT/metrics (``stoker_loader_*``), labelled
    by node, GPU, rank and training job; returns the server (``.shutdown()`` stops it). Every
    rank of a node calls this with the same ``port`` and serves on ``port + LOCAL_RANK``
    (torchrun's local rank): 19401-19408 on a node of 8 ranks, beside `stoker watch` on 19400.
    ``port=0`` takes any free port (``.server_port``). The exporter is
    stoker.measure.exporter's, which can serve the step ledger and the checkpointer beside it."""
    from .._dist_env import rank_and_world, torchrun_env
    from ..errors import StreamError
    from ..measure.exporter import serve

    if port:
        port += torchrun_env(error=StreamError).local_rank
    return serve(port, addr=addr, job=job, rank=rank_and_world(error=StreamError)[0], loader=loader)
