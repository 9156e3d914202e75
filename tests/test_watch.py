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


class LosingNvml(FakeNvml):
    """GPU 1 fell off the bus; every GPM sample allocated is counted until freed."""

    def __init__(self) -> None:
        self.live_samples = 0

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        if h == 1:
            raise RuntimeError("GPU is lost")  # pynvml's NVMLError_GpuIsLost
        return super().nvmlDeviceGetUtilizationRates(h)

    def nvmlGpmSampleAlloc(self) -> object:
        self.live_samples += 1
        return object()

    def nvmlGpmSampleFree(self, sample: object) -> None:
        self.live_samples -= 1


def _scrape(**sources: object) -> dict[str, str]:
    server = serve(0, addr="127.0.0.1", job="j", rank=0, **sources)
    try:
        assert server.server_port != 0  # port 0: the one the system picked is known
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        text = urllib.request.urlopen(url).read().decode()
    finally:
        server.shutdown()
    return {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith("stoker_")
    }


def test_a_lost_gpu_is_reported_and_the_others_still_read() -> None:
    nvml = LosingNvml()
    gpus = Gpus(nvml)
    (only,) = gpus.sample(gpm_interval_s=0)
    assert only.index == 0 and only.sm_active == 71.5
    assert list(gpus.lost) == [1] and "GPU is lost" in gpus.lost[1]
    lines = _scrape(gpus=gpus)
    assert any(k.startswith("stoker_gpu_lost{") and 'gpu="1"' in k for k in lines)
    assert any(k.startswith("stoker_gpu_utilization_percent{") and 'gpu="0"' in k for k in lines)


def test_gpm_samples_are_freed() -> None:
    nvml = LosingNvml()
    gpus = Gpus(nvml)
    for _ in range(3):
        gpus.sample(gpm_interval_s=0)
    assert nvml.live_samples == 0


def test_the_ledgers_per_phase_figures_are_exported() -> None:
    from stoker.measure.ledger import Ledger

    ledger = Ledger("cpu", skip_first=0)
    for _ in ledger.wrap(range(3)):
        with ledger.compute():
            pass
    lines = _scrape(ledger=ledger)
    names = {k.split("{")[0] for k in lines}
    assert {"stoker_step_phases_compute_share", "stoker_step_phases_data_total_s"} <= names
    assert "stoker_step_last_step_step" in names


def test_watch_refuses_bad_options_in_one_line() -> None:
    for args in (
        ["--port", "70000"],
        ["--port", "-1"],
        ["--interval", "-1"],
        ["--interval", "nan"],
        ["--interval", "0"],
        ["--json"],
    ):
        out = runner.invoke(app, ["watch", *args])
        assert out.exit_code == 2, (args, out.output)
        assert out.exception is None or isinstance(out.exception, SystemExit), args
    assert "add --once" in runner.invoke(app, ["watch", "--json"]).output


def test_watch_on_a_port_in_use_says_so() -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        out = runner.invoke(app, ["watch", "--port", str(port)])
    assert out.exit_code == 2 and out.exception is None or isinstance(out.exception, SystemExit)
    assert f"cannot serve on port {port}" in out.output and "pick another --port" in out.output
