"""How long the training loop waited for data, as MLPerf Storage measures it.

Per batch, ``wait`` is the time ``next()`` took to hand the batch over, and ``compute`` the time
the loop spent between taking one batch and asking for the next. Accelerator utilization is
``compute / (compute + wait)`` with the first batch left out (it carries start-up, as MLPerf
Storage and DLIO leave out the first step). ``serve_metrics`` exposes the same figures to
Prometheus, read live at each scrape.
"""

from __future__ import annotations

import os
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
    loader: StreamingLoader, port: int = 9400, *, job: str = "", addr: str = "0.0.0.0"
) -> Any:
    """Serve the loader's figures at http://ADDR:PORT/metrics, labelled by rank, node and job.
    Returns the HTTP server (``.shutdown()`` stops it)."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from ._dataset import rank_and_world

    rank, _ = rank_and_world()
    labels = {"rank": str(rank), "node": os.uname().nodename, "job": job}

    class Collector:
        def collect(self) -> Any:
            m = loader.metrics
            names, values = list(labels), list(labels.values())

            def family(cls: Any, name: str, doc: str, value: float) -> Any:
                fam = cls(name, doc, labels=names)
                fam.add_metric(values, value)
                return fam

            yield family(
                CounterMetricFamily, "stoker_loader_batches", "Batches delivered", m.batches
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_wait_seconds",
                "Time the training loop waited for data (first batch excluded)",
                m.wait_s,
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_compute_seconds",
                "Time the training loop spent between batches",
                m.compute_s,
            )
            yield family(
                GaugeMetricFamily,
                "stoker_loader_utilization",
                "Accelerator utilization: compute / (compute + wait)",
                m.utilization if m.utilization is not None else float("nan"),
            )
            yield family(
                CounterMetricFamily, "stoker_loader_read_bytes", "Sample bytes read", m.bytes_read
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_fetched_bytes",
                "Shard bytes downloaded into the node cache",
                m.bytes_fetched,
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_cache_hits",
                "Shard opens served by the node cache",
                m.cache_hits,
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_cache_misses",
                "Shard opens that downloaded",
                m.cache_misses,
            )
            yield family(
                CounterMetricFamily,
                "stoker_loader_skipped_samples",
                "Corrupt samples skipped",
                m.skipped,
            )

    registry = CollectorRegistry()
    registry.register(Collector())  # type: ignore[arg-type]
    server, _ = start_http_server(port, addr=addr, registry=registry)
    return server
