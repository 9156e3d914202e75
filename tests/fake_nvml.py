"""A fake NVML (the calls stoker.measure.gpus makes) for tests and the exporter bench."""

from __future__ import annotations

from types import SimpleNamespace


class FakeNvml:
    """``count`` H100s (two by default); GPM on the first only. ``util``, ``names`` and
    ``memory_used`` (by GPU index) stand in for what a driver could report, sane or not."""

    def __init__(
        self,
        count: int = 2,
        *,
        util: dict[int, float] | None = None,
        names: dict[int, bytes] | None = None,
        memory_used: dict[int, int] | None = None,
    ) -> None:
        self.count = count
        self.util, self.names, self.memory_used = util or {}, names or {}, memory_used or {}

    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL = 1, 2, 3

    def nvmlInit(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-00000000-0000-0000-0000-{h:012d}"

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return self.names.get(h, b"NVIDIA H100 80GB HBM3")

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.util.get(h, 97 - h), memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=self.memory_used.get(h, 60 << 30), total=80 << 30)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 650_000

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        raise RuntimeError("not supported")

    def nvmlGpmQueryDeviceSupport(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(isSupportedDevice=h == 0)

    def nvmlGpmSampleAlloc(self) -> object:
        return object()

    def nvmlGpmSampleGet(self, h: int, sample: object) -> None: ...
    def c_nvmlGpmMetricsGet_t(self) -> SimpleNamespace:
        return SimpleNamespace(metrics=[SimpleNamespace(metricId=0, value=0.0) for _ in range(2)])

    def nvmlGpmMetricsGet(self, request: SimpleNamespace) -> None:
        for m in request.metrics:
            m.value = {2: 71.5, 3: 38.0}[m.metricId]
