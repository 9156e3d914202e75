"""GPU figures from NVML (nvidia-ml-py): utilization, memory, power, temperature, and where
the driver has GPM (Hopper and later) SM activity and DRAM bandwidth utilization.

nvidia-smi's "utilization" only says a kernel was running during the sample period; SM
activity says how much of the GPU did work, which is why GPM figures are read when available.
No driver or no GPU is a state to report ("no NVIDIA driver"), never an error; nor is a GPU
that stops answering (``GpuIsLost``): ``lost`` names it and the other GPUs are still read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class GpuSample:
    index: int
    name: str
    utilization: float  # % of the period a kernel ran (nvidia-smi's figure)
    memory_utilization: float  # % of the period memory was read or written
    memory_used: int
    memory_total: int
    power_w: float | None
    temperature_c: float | None
    sm_active: float | None = None  # %, GPM only
    dram_bandwidth: float | None = None  # % of peak, GPM only

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Gpus:
    """The node's GPUs through NVML; ``problem`` says why there are none."""

    def __init__(self, nvml: Any = None) -> None:
        self.problem: str | None = None
        self.handles: list[Any] = []
        self.lost: dict[int, str] = {}  # GPU index -> the NVML error of the latest sample
        try:
            if nvml is None:
                import pynvml as nvml
            nvml.nvmlInit()
            self.handles = [
                nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())
            ]
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.problem = (
                f"no NVIDIA driver or GPU here ({type(exc).__name__}): GPU figures are off"
            )
        self.nvml = nvml
        if not self.handles and self.problem is None:
            self.problem = "NVML found no GPU: GPU figures are off"
        self._gpm = [self._gpm_supported(h) for h in self.handles]

    def uuids(self) -> dict[int, str]:
        """Each GPU's UUID (``GPU-...``, dcgm-exporter's ``UUID`` label), read once."""
        if getattr(self, "_uuids", None) is None:
            found = {}
            for i, h in enumerate(self.handles):
                with contextlib.suppress(Exception):  # a lost GPU keeps its index alone
                    uuid = self.nvml.nvmlDeviceGetUUID(h)
                    found[i] = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            self._uuids = found
        return self._uuids

    def _gpm_supported(self, handle: Any) -> bool:
        try:
            return bool(self.nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
        except Exception:  # noqa: BLE001 - older drivers and GPUs have no GPM
            return False

    def sample(self, gpm_interval_s: float = 0.1) -> list[GpuSample]:
        """One sample per GPU that answers; the others are in ``lost``."""
        out, lost = [], {}
        for i, h in enumerate(self.handles):
            try:
                sample = self._read(i, h)
            except Exception as exc:  # noqa: BLE001 - GpuIsLost, Unknown...: one GPU, not all
                lost[i] = f"{type(exc).__name__}: {exc}"
                continue
            if self._gpm[i]:
                sample.sm_active, sample.dram_bandwidth = self._gpm_pair(h, gpm_interval_s)
            out.append(sample)
        self.lost = lost
        return out

    def _read(self, i: int, h: Any) -> GpuSample:
        nv = self.nvml
        util, mem = nv.nvmlDeviceGetUtilizationRates(h), nv.nvmlDeviceGetMemoryInfo(h)
        name = nv.nvmlDeviceGetName(h)
        return GpuSample(
            index=i,
            name=name.decode() if isinstance(name, bytes) else str(name),
            utilization=float(util.gpu),
            memory_utilization=float(util.memory),
            memory_used=int(mem.used),
            memory_total=int(mem.total),
            power_w=_try(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000),
            temperature_c=_try(lambda: float(nv.nvmlDeviceGetTemperature(h, 0))),
        )

    def _gpm_pair(self, handle: Any, interval_s: float) -> tuple[float | None, float | None]:
        """SM activity and DRAM bandwidth over ``interval_s`` (GPM needs two samples)."""
        nv, samples = self.nvml, []
        try:
            samples.append(nv.nvmlGpmSampleAlloc())
            samples.append(nv.nvmlGpmSampleAlloc())
            first, second = samples
            nv.nvmlGpmSampleGet(handle, first)
            time.sleep(interval_s)
            nv.nvmlGpmSampleGet(handle, second)
            request = nv.c_nvmlGpmMetricsGet_t()
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = 2
            request.sample1, request.sample2 = first, second
            request.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
            request.metrics[1].metricId = nv.NVML_GPM_METRIC_DRAM_BW_UTIL
            nv.nvmlGpmMetricsGet(request)
            return float(request.metrics[0].value), float(request.metrics[1].value)
        except Exception:  # noqa: BLE001 - a driver without these metrics: leave them out
            return None, None
        finally:  # the driver's memory: a sample per scrape would leak otherwise
            for allocated in samples:
                with contextlib.suppress(Exception):
                    nv.nvmlGpmSampleFree(allocated)


def _try(read: Any) -> float | None:
    try:
        return float(read())
    except Exception:  # noqa: BLE001 - not every GPU reports power or temperature
        return None


class GpuPoller:
    """Samples the GPUs every ``interval_s`` on a thread of its own, so a scrape reads the
    latest sample and never waits for NVML (dcgm-exporter works the same way). The first
    sample is taken on the first read."""

    def __init__(self, gpus: Gpus, interval_s: float = 1.0) -> None:
        self.gpus, self.handles, self.interval_s = gpus, gpus.handles, interval_s
        self._lock = threading.Lock()
        self._latest: tuple[list[GpuSample], dict[int, str]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> tuple[list[GpuSample], dict[int, str]]:
        samples = self.gpus.sample()
        taken = (samples, dict(self.gpus.lost))
        with self._lock:
            self._latest = taken
        return taken

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def latest(self) -> tuple[list[GpuSample], dict[int, str], dict[int, str]]:
        """(samples, lost GPUs, UUID per index) as of the latest poll."""
        with self._lock:
            taken = self._latest
        if taken is None:
            taken = self._take()
            if self.handles and self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="gpu-poll")
                self._thread.start()
        return (*taken, self.gpus.uuids())

    def stop(self) -> None:
        self._stop.set()
