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

import inspect
import logging
import socket
from collections.abc import Iterator
from typing import Any

from .._dist_env import rank_and_world, torchrun_env
from ..errors import StokerError
from . import metrics as m
from .gpus import GpuPoller, Gpus

log = logging.getLogger(__name__)

# What each source must have, and what to give instead: a source checked when served, not at
# every scrape (where a missing attribute would be an HTTP 500 for every metric).
SOURCES = {
    "ledger": (("snapshot",), "a stoker Ledger (stoker.measure.ledger)"),
    "loader": (("metrics",), "a StreamingLoader (stoker.stream), whose .metrics it reads"),
    "checkpointer": (("totals", "last_save"), "a stoker Checkpointer"),
    "stage": (("bytes_done", "files_done", "bytes_planned"), "a StageMeter (stage's reporter)"),
}


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
        given = {"ledger": ledger, "loader": loader, "checkpointer": checkpointer, "stage": stage}
        for key, source in given.items():
            needs, what = SOURCES[key]
            # getattr_static: a property is looked up, not read (reading it is the scrape's job)
            missing = [n for n in needs if source is not None and not _has(source, n)]
            if missing:
                raise StokerError(
                    f"serve({key}=...): the {type(source).__name__} given has no .{missing[0]}; "
                    f"give {what}, or leave {key} out"
                )
        if gpus is not None and not isinstance(gpus, Gpus | GpuPoller):
            raise StokerError(
                f"serve(gpus=...): the {type(gpus).__name__} given is not GPUs; give "
                "stoker.measure.gpus.Gpus() or a GpuPoller, or leave gpus out"
            )
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
        self._failed: set[str] = set()  # sources whose last read failed (warned once)

    def collect(self) -> Iterator[Any]:
        reads = (
            ("gpus", lambda: m.gpu_families(self.gpus, self.labels)),
            ("ledger", lambda: m.step_families(self.ledger.snapshot(), self.labels)),
            ("loader", lambda: m.loader_families(self.loader.metrics, self.labels)),
            ("checkpointer", lambda: m.checkpoint_families(self.checkpointer, self.labels)),
            ("stage", lambda: m.stage_families(self.stage, self.labels)),
        )
        for key, read in reads:
            if getattr(self, key) is None:
                continue
            try:  # whole families or none: one source that fails leaves the others served
                families = list(read())
            except Exception as exc:  # noqa: BLE001 - a scrape must answer whatever a source does
                if key not in self._failed:
                    log.warning("stoker exporter: %s left out of /metrics: %r", key, exc)
                self._failed.add(key)
                continue
            self._failed.discard(key)
            yield from families

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.stop()


def _has(source: object, name: str) -> bool:
    return inspect.getattr_static(source, name, _ABSENT) is not _ABSENT


_ABSENT = object()


def serve(port: int = m.DEFAULT_PORT, *, addr: str = "0.0.0.0", **sources: Any) -> Any:
    """Serve /metrics on ``port`` (0: a free one, ``.server_port`` says which); returns the
    server (``.shutdown()`` stops it, and the GPU poller with it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise StokerError(f"port: give a port from 0 to 65535, 0 for a free one (got {port!r})")
    known = {"job", "rank", "gpus", *SOURCES}
    for key in sources:
        if key not in known:
            raise StokerError(f"serve({key}=...): not a source; give {', '.join(sorted(known))}")
    collector = Collector(**sources)
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    try:
        server, _ = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:  # in use, or a privileged port without the right
        collector.close()
        root = "; ports below 1024 need root" if 0 < port < 1024 else ""
        raise StokerError(
            f"cannot serve on port {port} ({exc.strerror or exc}{root}): pick another port "
            f"(--port; 0 picks a free one)"
        ) from exc
    stop = server.shutdown

    def shutdown() -> None:
        stop()
        collector.close()

    server.shutdown = shutdown  # type: ignore[method-assign]
    return server
