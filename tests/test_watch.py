"""GPU figures through a fake NVML, the exporter over HTTP, and stoker watch without a GPU."""

from __future__ import annotations

import json
import socket
import urllib.request
from types import SimpleNamespace

from typer.testing import CliRunner

from stoker.cli import app
from stoker.measure.exporter import serve
from stoker.measure.gpus import Gpus

runner = CliRunner()


class FakeNvml:
    """Two H100s; GPM on the first only."""

    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL = 1, 2, 3

    def nvmlInit(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=97 - h, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=60 << 30, total=80 << 30)

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


def test_gpu_samples_with_and_without_gpm() -> None:
    gpus = Gpus(FakeNvml())
    first, second = gpus.sample(gpm_interval_s=0)
    assert gpus.problem is None and first.name == "NVIDIA H100 80GB HBM3"
    assert (first.utilization, first.sm_active, first.dram_bandwidth) == (97.0, 71.5, 38.0)
    assert (second.sm_active, second.dram_bandwidth, second.temperature_c) == (None, None, None)
    assert first.power_w == 650.0


def test_no_driver_is_a_state_not_an_error() -> None:
    class Missing:
        def nvmlInit(self) -> None:
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    gpus = Gpus(Missing())
    assert gpus.sample() == [] and "no NVIDIA driver" in (gpus.problem or "")
    out = runner.invoke(app, ["watch", "--once", "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["gpus"] == []


def test_exporter_serves_gpus_and_a_ledger_snapshot_with_labels() -> None:
    class Ledger:
        def snapshot(self) -> dict:
            return {"steps": 12, "data_wait_s": 0.5, "phases": {"compute_s": 9.5}, "ok": True}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve(
        port, addr="127.0.0.1", job="pretrain", rank=3, gpus=Gpus(FakeNvml()), ledger=Ledger()
    )
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    finally:
        server.shutdown()
    lines = {
        line.split(" ")[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith("stoker_")
    }
    key = next(k for k in lines if k.startswith("stoker_gpu_sm_active_percent{") and 'gpu="0"' in k)
    assert 'rank="3"' in key and 'job="pretrain"' in key and lines[key] == "71.5"
    assert any(k.startswith("stoker_gpu_sm_active_percent{") and lines[k] == "NaN" for k in lines)
    assert (
        next(v for k, v in lines.items() if k.startswith("stoker_step_phases_compute_s{")) == "9.5"
    )
    assert next(v for k, v in lines.items() if k.startswith("stoker_gpus{")) == "2.0"
