"""Where ``guard`` reads the GPUs and the training step, each a callable ``read(now)`` that
returns one reading, with the reason when there is no data (never a made-up zero):

- ``nvml_gpus``: this node's GPUs through NVML (``stoker.measure.gpus``, as ``stoker watch``);
- ``metrics``: Prometheus endpoints of stoker's exporter: ``stoker watch`` on each node serves
  ``stoker_gpu_utilization_ratio{Hostname,gpu}``; a training process that serves its ``Ledger``
  (``stoker.measure.exporter.serve(ledger=...)``) serves ``stoker_steps_total``. One guard can
  so watch a whole job from outside the scale set;
- ``step_file``: a file the training loop rewrites with its step number (or just touches).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._redact import shown
from .guard import GpuReading, StepReading


def nvml_gpus(gpus: Any = None) -> Callable[[float], GpuReading]:
    """This node's GPUs; ``gpus`` is a ``stoker.measure.gpus.Gpus`` (made here if None)."""
    if gpus is None:
        from ..measure.gpus import Gpus

        gpus = Gpus()

    def read(now: float) -> GpuReading:
        if gpus.problem:
            return GpuReading(now, None, gpus.problem)
        try:
            samples = gpus.sample()
        except Exception as exc:  # noqa: BLE001 - any NVML failure is missing data, not idle
            return GpuReading(now, None, f"NVML read failed ({type(exc).__name__}: {exc})")
        if gpus.lost:
            lost = ", ".join(f"GPU {i}: {why}" for i, why in sorted(gpus.lost.items()))
            return GpuReading(now, None, f"GPU(s) not answering ({lost})")
        return GpuReading(now, {str(s.index): float(s.utilization) for s in samples})

    return read


class Metrics:
    """Prometheus endpoints read once per tick; ``gpus`` and ``steps`` read from that scrape."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout_s: float = 5.0,
        get: Callable[[str], str] | None = None,
    ) -> None:
        self.urls, self.timeout_s = list(urls), timeout_s
        self._get = get or self._http_get
        self._at: float | None = None
        self._scrapes: dict[str, list[Any] | str] = {}  # url -> samples, or why none

    def _http_get(self, url: str) -> str:
        import httpx

        response = httpx.get(url, timeout=self.timeout_s)
        response.raise_for_status()
        return response.text

    def _scrape(self, now: float) -> dict[str, list[Any] | str]:
        if self._at == now:
            return self._scrapes
        from prometheus_client.parser import text_string_to_metric_families

        out: dict[str, list[Any] | str] = {}
        for url in self.urls:
            try:
                text = self._get(url)
                out[url] = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
            except Exception as exc:  # noqa: BLE001 - unreachable or unreadable: missing data
                out[url] = f"{shown(url)} did not answer ({type(exc).__name__})"
        self._at, self._scrapes = now, out
        return out

    def gpus(self, now: float) -> GpuReading:
        util: dict[str, float] = {}
        for url, samples in self._scrape(now).items():
            if isinstance(samples, str):
                return GpuReading(now, None, samples)
            count = [s.value for s in samples if s.name == "stoker_gpus"]
            if count and count[0] == 0:
                return GpuReading(now, None, f"{shown(url)}: its node has no NVIDIA driver/GPU")
            lost = [
                s.labels.get("gpu", "?")
                for s in samples
                if s.name == "stoker_gpu_lost" and s.value == 1
            ]
            if lost:
                return GpuReading(now, None, f"{shown(url)}: GPU {', '.join(lost)} not answering")
            found = [s for s in samples if s.name == "stoker_gpu_utilization_ratio"]
            if not count:  # not a `stoker watch` endpoint (a trainer's, say): no GPU source
                continue
            for s in found:
                if math.isnan(s.value):
                    return GpuReading(now, None, f"{shown(url)}: GPU {s.labels.get('gpu')} NaN")
                where = s.labels.get("Hostname", url)
                util[f"{where}/{s.labels.get('gpu', '?')}"] = s.value * 100  # guard speaks %
        if not util:
            why = "no endpoint serves stoker_gpu_utilization_ratio (run `stoker watch` on nodes)"
            return GpuReading(now, None, why)
        return GpuReading(now, util)

    def steps(self, now: float) -> StepReading:
        best: int | None = None
        for samples in self._scrape(now).values():
            if isinstance(samples, str):
                return StepReading(now, None, samples)
            count = [
                s.value
                for s in samples
                if s.name in ("stoker_steps_total", "stoker_steps_skipped_total")
            ]
            if len(count) < 2:  # a node's `stoker watch` serves GPUs only: not a step source
                continue
            best = max(best or 0, int(sum(count)))
        if best is None:
            return StepReading(now, None, "no endpoint serves stoker_steps_total (a Ledger)")
        return StepReading(now, best)


def step_file(path: str | Path) -> Callable[[float], StepReading]:
    """A file the training loop writes its step number into (or touches, each step); a file
    that is not there yet is missing data."""
    path = Path(path)

    def read(now: float) -> StepReading:
        try:
            text = path.read_text().strip()
            mtime = os.stat(path).st_mtime_ns
        except OSError as exc:
            return StepReading(now, None, f"{path}: {exc.strerror or exc}")
        return StepReading(now, int(text) if text.isdigit() else mtime)

    return read
