"""One Prometheus exporter for what stoker measures while a job runs: the node's GPUs (NVML),
a rank's step ledger and loader stalls, checkpoint blocking and staging throughput. Names and
labels are in :mod:`stoker.measure.metrics`; values are read from each source at scrape time,
except the GPUs, which a poller samples off the scrape path (GPM needs a 100 ms window per
GPU: eight GPUs read inside a scrape would take most of a second).

    from stoker.measure.exporter import serve
    server = serve(job="pretrain", ledger=ledger, loader=loader, checkpointer=ckpt)

``stoker watch`` serves a node's GPUs on :data:`~stoker.measure.metrics.DEFAULT_PORT`; a
training process serves its own figures on the next port per local rank. The exposition is
Prometheus text or OpenMetrics, as the scraper asks (prometheus-client negotiates it).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

from .._dist_env import rank_and_world, torchrun_env
from ..errors import StokerError
from . import metrics as m
from .gpus import GpuPoller, Gpus


def process_labels(job: str, rank: int | None, gpus: Gpus | None = None) -> dict[str, str]:
    """A rank's labels: the node, its GPU (torchrun's local rank, with the GPU's UUID where NVML
    answers), its global rank and the training job."""
    local = torchrun_env(error=StokerError).local_rank
    if rank is None:
        rank = rank_and_world(error=StokerError)[0]
    uuid = gpus.uuids().get(local, "") if gpus is not None else ""
    return {
        "Hostname": socket.gethostname(),
        "gpu": str(local),
        "UUID": uuid,
        "rank": str(rank),
        "training_job": job,
    }


class Collector:
    def __init__(
        self,
        *,
        job: str = "",
        rank: int | None = None,
        gpus: Gpus | GpuPoller | None = None,
        ledger: Any = None,
        loader: Any = None,
        checkpointer: Any = None,
        stage: Any = None,
    ) -> None:
        if isinstance(gpus, Gpus):
            gpus = GpuPoller(gpus)
        self.gpus = gpus
        self.labels = process_labels(job, rank, gpus.gpus if gpus is not None else None)
        self.ledger, self.loader, self.checkpointer, self.stage = (
            ledger,
            loader,
            checkpointer,
            stage,
        )

    def collect(self) -> Iterator[Any]:
        if self.gpus is not None:
            yield from m.gpu_families(self.gpus, self.labels)
        if self.ledger is not None:
            yield from m.step_families(self.ledger.snapshot(), self.labels)
        if self.loader is not None:
            yield from m.loader_families(self.loader.metrics, self.labels)
        if self.checkpointer is not None:
            yield from m.checkpoint_families(self.checkpointer, self.labels)
        if self.stage is not None:
            yield from m.stage_families(self.stage, self.labels)

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.stop()


def serve(port: int = m.DEFAULT_PORT, *, addr: str = "0.0.0.0", **sources: Any) -> Any:
    """Serve /metrics on ``port`` (0: a free one, ``.server_port`` says which); returns the
    server (``.shutdown()`` stops it, and the GPU poller with it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    collector = Collector(**sources)
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    try:
        server, _ = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:  # in use, or a privileged port without the right
        collector.close()
        raise StokerError(
            f"cannot serve on port {port} ({exc.strerror or exc}): pick another --port"
        ) from exc
    stop = server.shutdown

    def shutdown() -> None:
        stop()
        collector.close()

    server.shutdown = shutdown  # type: ignore[method-assign]
    return server
