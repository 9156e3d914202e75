"""GPU figures through a fake NVML, the exporter over HTTP, and stoker watch without a GPU."""

from __future__ import annotations

import json
import socket
import urllib.request
from types import SimpleNamespace

from typer.testing import CliRunner

from fake_nvml import FakeNvml
from stoker.cli import app
from stoker.measure.exporter import serve
from stoker.measure.gpus import Gpus

runner = CliRunner()


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


def test_exporter_serves_gpus_with_dcgm_exporters_labels() -> None:
    lines = _scrape(gpus=Gpus(FakeNvml()))
    key = next(k for k in lines if k.startswith("stoker_gpu_sm_active_ratio{") and 'gpu="0"' in k)
    assert 'UUID="GPU-00000000-0000-0000-0000-000000000000"' in key
    assert (
        'modelName="NVIDIA H100 80GB HBM3"' in key and f'Hostname="{socket.gethostname()}"' in key
    )
    assert lines[key] == "0.715"  # a ratio, 0-1: NVML's 71.5 %
    assert any(k.startswith("stoker_gpu_sm_active_ratio{") and lines[k] == "NaN" for k in lines)
    util = next(
        k for k in lines if k.startswith("stoker_gpu_utilization_ratio{") and 'gpu="1"' in k
    )
    assert lines[util] == "0.96"
    assert next(v for k, v in lines.items() if k.startswith("stoker_gpus{")) == "2.0"


class LosingNvml(FakeNvml):
    """GPU 1 fell off the bus; every GPM sample allocated is counted until freed."""

    def __init__(self) -> None:
        super().__init__()
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
    lost = {k: v for k, v in lines.items() if k.startswith("stoker_gpu_lost{")}
    assert [v for k, v in lost.items() if 'gpu="1"' in k] == ["1.0"]
    assert [v for k, v in lost.items() if 'gpu="0"' in k] == ["0.0"]
    assert any(k.startswith("stoker_gpu_utilization_ratio{") and 'gpu="0"' in k for k in lines)


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
    ledger.summary()  # the loop's thread reads the steps ended; a scrape then sees them
    lines = _scrape(ledger=ledger)
    names = {k.split("{")[0] for k in lines}
    assert {"stoker_step_phase_ratio", "stoker_step_phase_seconds_total"} <= names
    assert next(v for k, v in lines.items() if k.startswith("stoker_steps_total{")) == "3.0"
    shares = [k for k in lines if k.startswith("stoker_step_phase_ratio{")]
    assert any('phase="compute"' in k for k in shares) and 'rank="0"' in shares[0]
    assert 'training_job="j"' in shares[0]


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
    assert out.exit_code == 2, out.output
    assert f"cannot serve on port {port}" in out.output
    assert "pick another port (--port" in out.output


def test_checkpoint_counters_keep_counting_past_what_saves_remembers(tmp_path) -> None:
    """Counters never go down: ``Checkpointer.saves`` forgets its oldest (maxlen), the running
    totals do not."""
    from collections import deque

    import torch

    import stoker

    ckpt = stoker.Checkpointer(tmp_path / "fast")
    ckpt.saves = deque(maxlen=1)
    try:
        for step in (1, 2, 3):
            ckpt.save(step, {"w": torch.zeros(8)})
            ckpt.wait()
        lines = _scrape(checkpointer=ckpt)
    finally:
        ckpt.close()
    assert (
        next(v for k, v in lines.items() if k.startswith("stoker_checkpoint_saves_total")) == "3.0"
    )
    last = next(v for k, v in lines.items() if k.startswith("stoker_checkpoint_last_step"))
    assert last == "3.0"
