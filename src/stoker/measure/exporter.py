"""One Prometheus exporter for what stoker measures while a job runs: the GPUs (NVML), the step
ledger's split and the loader's stalls, labelled by rank, node and job, read at each scrape.

    from stoker.measure.exporter import serve
    server = serve(port=9400, job="pretrain", ledger=ledger, loader=loader)

``stoker watch`` serves the GPUs of a node (and shows them live in the terminal); a training
process serves its own ledger and loader the same way, on a port per rank.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

from ..errors import StokerError
from .gpus import Gpus


def _labels(job: str, rank: int | None) -> dict[str, str]:
    if rank is None:
        rank = int(os.environ.get("RANK", 0))
    return {"rank": str(rank), "node": os.uname().nodename, "job": job}


class Collector:
    def __init__(
        self,
        *,
        job: str = "",
        rank: int | None = None,
        gpus: Gpus | None = None,
        ledger: Any = None,
        loader: Any = None,
    ) -> None:
        self.labels = _labels(job, rank)
        self.gpus, self.ledger, self.loader = gpus, ledger, loader

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        names, values = list(self.labels), list(self.labels.values())

        def gauge(
            name: str, doc: str, value: float | None, extra: dict[str, str] | None = None
        ) -> Any:
            fam = GaugeMetricFamily(name, doc, labels=names + list(extra or {}))
            fam.add_metric(
                values + list((extra or {}).values()), math.nan if value is None else value
            )
            return fam

        if self.gpus is not None:
            yield gauge(
                "stoker_gpus", "GPUs NVML sees (0 without a driver)", len(self.gpus.handles)
            )
            for s in self.gpus.sample():
                gpu = {"gpu": str(s.index)}
                yield gauge(
                    "stoker_gpu_utilization_percent",
                    "Share of time a kernel ran (nvidia-smi)",
                    s.utilization,
                    gpu,
                )
                yield gauge("stoker_gpu_memory_used_bytes", "GPU memory in use", s.memory_used, gpu)
                yield gauge("stoker_gpu_power_watts", "Board power", s.power_w, gpu)
                yield gauge(
                    "stoker_gpu_sm_active_percent",
                    "SM activity (GPM; NaN where unsupported)",
                    s.sm_active,
                    gpu,
                )
                yield gauge(
                    "stoker_gpu_dram_bandwidth_percent",
                    "DRAM bandwidth use (GPM)",
                    s.dram_bandwidth,
                    gpu,
                )
            for index in self.gpus.lost:
                yield gauge(
                    "stoker_gpu_lost", "1: NVML could not read this GPU", 1, {"gpu": str(index)}
                )
        if self.ledger is not None:
            for key, value in _numbers(self.ledger.snapshot()).items():
                yield gauge(f"stoker_step_{key}", f"step ledger: {key}", value)
        if self.loader is not None:
            for key, value in _numbers(self.loader.metrics).items():
                yield gauge(f"stoker_loader_{key}", f"loader: {key}", value)


def _numbers(obj: Any, prefix: str = "") -> dict[str, float]:
    """The numeric fields of a snapshot (dataclass or dict), nested dicts flattened with ``_``
    (the ledger's ``phases.compute.share`` is ``phases_compute_share``)."""
    data = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    out: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            out[f"{prefix}{key}"] = float(value)
        elif isinstance(value, dict):
            out |= _numbers(value, f"{prefix}{key}_")
    return out


def serve(port: int = 9400, *, addr: str = "0.0.0.0", **sources: Any) -> Any:
    """Serve /metrics on ``port`` (0: a free one, ``.server_port`` says which); returns the
    server (``.shutdown()`` stops it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    registry.register(Collector(**sources))  # type: ignore[arg-type]
    try:
        server, _ = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:  # in use, or a privileged port without the right
        raise StokerError(
            f"cannot serve on port {port} ({exc.strerror or exc}): pick another --port"
        ) from exc
    return server
