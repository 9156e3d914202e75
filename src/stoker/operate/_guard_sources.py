"""Where ``guard`` reads the GPUs and the training step, each a callable ``read(now)`` that
returns one reading, with the reason when there is no data (never a made-up zero):

- ``nvml_gpus``: this node's GPUs through NVML (``stoker.measure.gpus``, as ``stoker watch``);
- ``metrics``: Prometheus endpoints of stoker's exporter: ``stoker watch`` on each node serves
  ``stoker_gpu_utilization_ratio{Hostname,gpu}``; a training process that serves its ``Ledger``
  (``stoker.measure.exporter.serve(ledger=...)``) serves ``stoker_steps_total``. One guard can
  so watch a whole job from outside the scale set;
- ``step_file``: a file the training loop rewrites with its step number (or just touches);
- ``node_health``: this node's unhealthy marker, which ``stoker-node health`` leaves when a
  health check fails (``stoker.node_markers``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._redact import shown
from .._user_files import read_user_bytes
from ..errors import StokerError
from ..node_markers import unhealthy
from ._guard_evidence import MAX_GPUS, GpuReading, GpuValue, NodeReading, StepReading, text

MAX_SCRAPE_BYTES = 16 << 20  # a node's page is a few KiB; more is not an exporter answering
STEP_FILE_MAX_BYTES = 4096  # a step number, or nothing (touched); more is not a step file


def nvml_gpus(gpus: Any = None) -> Callable[[float], GpuReading]:
    """This node's GPUs; ``gpus`` is a ``stoker.measure.gpus.Gpus`` (made here if None). Each
    GPU NVML counts is announced; each one sampled is reported."""
    if gpus is None:
        from ..measure.gpus import Gpus

        gpus = Gpus()

    def read(now: float) -> GpuReading:
        if gpus.problem:
            return GpuReading(now, None, missing=gpus.problem)
        try:
            samples = gpus.sample()
        except Exception as exc:  # noqa: BLE001 - any NVML failure is missing data, not idle
            return GpuReading(now, None, missing=f"NVML read failed ({type(exc).__name__})")
        if gpus.lost:
            lost = ", ".join(f"GPU {i}: {why}" for i, why in sorted(gpus.lost.items()))
            return GpuReading(now, None, missing=f"GPU(s) not answering ({lost})")
        values = tuple(
            GpuValue(
                str(s.index),
                float(s.utilization),
                memory_used_bytes=s.memory_used,
                memory_total_bytes=s.memory_total,
                power_w=s.power_w,
                name=s.name,
            )
            for s in samples
        )
        announced = tuple(str(i) for i in range(len(gpus.handles)))
        return GpuReading(now, values, announced=announced)

    return read


class Metrics:
    """Prometheus endpoints read once per tick; ``gpus`` and ``steps`` read from that scrape.

    A scrape that takes more than ``timeout_s`` in all (an endpoint that trickles, or never
    ends its last line), answers more than 16 MiB, or ends without a newline (cut off) is
    missing data."""

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

        deadline = time.monotonic() + self.timeout_s
        body = bytearray()
        with httpx.stream("GET", url, timeout=self.timeout_s) as response:
            response.raise_for_status()
            # each read waits at most timeout_s: the deadline bounds the whole answer
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_SCRAPE_BYTES:
                    raise ValueError(f"more than {MAX_SCRAPE_BYTES >> 20} MiB")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no whole answer in {self.timeout_s:g} s")
        return body.decode()

    def _scrape(self, now: float) -> dict[str, list[Any] | str]:
        if self._at == now:
            return self._scrapes
        from prometheus_client.parser import text_string_to_metric_families

        out: dict[str, list[Any] | str] = {}
        for url in self.urls:
            try:
                page = self._get(url)
            except Exception as exc:  # noqa: BLE001 - unreachable or too slow: missing data
                out[url] = f"{shown(url)} did not answer ({type(exc).__name__})"
                continue
            if page and not page.endswith("\n"):
                out[url] = f"{shown(url)} answered a last line without an end (cut off)"
                continue
            try:
                out[url] = [s for fam in text_string_to_metric_families(page) for s in fam.samples]
            except Exception as exc:  # noqa: BLE001 - the parser's errors: not metrics
                why = f"answered what is not Prometheus text ({type(exc).__name__})"
                out[url] = f"{shown(url)} {why}"
        self._at, self._scrapes = now, out
        return out

    def gpus(self, now: float) -> GpuReading:
        """The GPUs of every ``stoker watch`` endpoint: each announces ``stoker_gpus`` of them
        (``Hostname/0`` ...), each reported by its ``stoker_gpu_utilization_ratio``."""
        values: list[GpuValue] = []
        announced: list[str] = []
        for url, samples in self._scrape(now).items():
            if isinstance(samples, str):
                return GpuReading(now, None, missing=samples)
            count = [s for s in samples if s.name == "stoker_gpus"]
            if not count:  # not a `stoker watch` endpoint (a trainer's, say): no GPU source
                continue
            n = count[0].value
            if len(count) > 1 or not math.isfinite(n) or n != int(n) or not 0 <= n <= MAX_GPUS:
                why = f"{shown(url)}: stoker_gpus {n!r} ({len(count)} given) is not a GPU count"
                return GpuReading(now, None, missing=why)
            if n == 0:
                why = f"{shown(url)}: its node has no NVIDIA driver/GPU"
                return GpuReading(now, None, missing=why)
            lost = [
                text(s.labels.get("gpu", "?"))
                for s in samples
                if s.name == "stoker_gpu_lost" and s.value != 0
            ]
            if lost:
                why = f"{shown(url)}: GPU {', '.join(lost)} not answering"
                return GpuReading(now, None, missing=why)
            host = count[0].labels.get("Hostname") or url
            announced += [f"{host}/{i}" for i in range(int(n))]
            values += _gpu_values(samples, host)
        if not announced:
            why = "no endpoint serves stoker_gpus (run `stoker watch` on the nodes)"
            return GpuReading(now, None, missing=why)
        return GpuReading(now, tuple(values), announced=tuple(announced))

    def steps(self, now: float) -> StepReading:
        best: int | None = None
        for url, samples in self._scrape(now).items():
            if isinstance(samples, str):
                return StepReading(now, None, samples)
            count = [
                s.value
                for s in samples
                if s.name in ("stoker_steps_total", "stoker_steps_skipped_total")
            ]
            if len(count) < 2:  # a node's `stoker watch` serves GPUs only: not a step source
                continue
            if not all(math.isfinite(c) and c >= 0 and c == int(c) for c in count):
                return StepReading(now, None, f"{shown(url)}: step counts {count!r} are not counts")
            best = max(best or 0, int(sum(count)))
        if best is None:
            return StepReading(now, None, "no endpoint serves stoker_steps_total (a Ledger)")
        return StepReading(now, best)


def _gpu_values(samples: Sequence[Any], host: str) -> list[GpuValue]:
    """One value per ``stoker_gpu_utilization_ratio`` sample (the guard speaks %), with the
    same GPU's memory and power where served (NaN power: not read)."""

    def key(s: Any) -> str:
        return f"{s.labels.get('Hostname') or host}/{s.labels.get('gpu', '?')}"

    memory = {key(s): s.value for s in samples if s.name == "stoker_gpu_memory_used_bytes"}
    power = {
        key(s): s.value
        for s in samples
        if s.name == "stoker_gpu_power_watts" and not math.isnan(s.value)
    }
    return [
        GpuValue(
            key(s),
            s.value * 100,
            memory_used_bytes=memory.get(key(s)),
            power_w=power.get(key(s)),
            name=s.labels.get("modelName", ""),
        )
        for s in samples
        if s.name == "stoker_gpu_utilization_ratio"
    ]


def step_file(path: str | Path) -> Callable[[float], StepReading]:
    """A file the training loop writes its step number into (or touches, each step, leaving it
    empty); a file that is not there yet, or holds anything else, is missing data."""
    path = Path(path)

    def read(now: float) -> StepReading:
        try:  # a FIFO or /dev/zero given as the file is missing data, not a read that hangs
            mtime = os.stat(path).st_mtime_ns
            data = read_user_bytes(path, "step", max_bytes=STEP_FILE_MAX_BYTES)
            content = data.decode("utf-8", errors="replace").strip()
        except StokerError as exc:
            return StepReading(now, None, str(exc))
        except OSError as exc:
            return StepReading(now, None, f"{text(str(path))}: {exc.strerror or exc}")
        if not content:
            return StepReading(now, mtime)
        if content.isascii() and content.isdigit():
            return StepReading(now, int(content))
        return StepReading(now, None, f"{path}: {text(content[:40])!r} is not a step number")

    return read


def node_health(run_dir: str | Path | None = None) -> Callable[[float], NodeReading]:
    """The unhealthy marker of the node the guard runs on, in ``run_dir`` (default
    ``$STOKER_RUN``, else ``/run/stoker``; on a VM stoker did not set up there is none). A guard
    that watches other nodes through ``--metrics`` sees only its own node's marker."""

    def read(now: float) -> NodeReading:
        found = unhealthy(run_dir)
        return NodeReading(now, "" if found is None else text(str(found)))

    return read
