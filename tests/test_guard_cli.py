"""``stoker guard`` through typer's CliRunner, with short real durations: a stalled step file
acts once; no NVML watches until --timeout without acting; a `stoker watch` endpoint at 0 %
runs the command with the evidence; teardown from a GPU node is refused."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.provision import _guard_sources
from stoker.provision.guard import GpuReading

FAST = ["--idle-for", "0.6s", "--interval", "0.1s"]


def test_stalled_step_file_acts_once(tmp_path: Path) -> None:
    (tmp_path / "step").write_text("41\n")
    args = ["guard", "--no-gpus", "--step-file", str(tmp_path / "step"), *FAST, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    acted = [e for e in lines if e["event"] == "idle"]
    assert len(acted) == 1 and acted[0]["last_step"] == 41 and acted[0]["idle_s"] >= 0.6
    # the first readings do not yet cover the window: unknown, not idle
    assert lines[0] == {"event": "verdict", "state": "unknown", "reason": lines[0]["reason"]}
    assert "the readings cover" in lines[0]["reason"]
    assert "of the 600 ms window" in lines[0]["reason"]


def test_no_nvml_never_acts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    why = "no NVIDIA driver or GPU here (NVMLError_LibraryNotFound): GPU figures are off"
    monkeypatch.setattr(_guard_sources, "nvml_gpus", lambda: lambda now: GpuReading(now, None, why))
    marker = tmp_path / "acted"
    args = ["guard", *FAST, "--timeout", "1.2s", "--action", "command",
            "--command", f"touch {shlex.quote(str(marker))}"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3
    assert "unknown: no GPU data: no NVIDIA driver" in result.stderr
    assert "invalid data is not idle: no action" in result.stderr
    assert "1.2s passed without acting" in result.stderr
    assert not marker.exists()


@pytest.fixture
def watch_endpoint() -> Iterator[str]:
    page = (
        b'stoker_gpus{Hostname="n1"} 2\n'
        b'stoker_gpu_utilization_ratio{gpu="0",UUID="GPU-a",Hostname="n1"} 0\n'
        b'stoker_gpu_utilization_ratio{gpu="1",UUID="GPU-b",Hostname="n1"} 0.02\n'
    )

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()
    server.server_close()


def test_idle_watch_endpoint_runs_the_command(watch_endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    script = f'import os; open({str(out)!r}, "w").write(os.environ["STOKER_GUARD_EVIDENCE"])'
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
    args = ["guard", "--metrics", watch_endpoint, *FAST, "--action", "command", "--command", cmd]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    evidence = json.loads(out.read_text())
    assert evidence["gpus"] == ["n1/0", "n1/1"] and evidence["peak_util"] == 2.0
    assert "IDLE on" in result.stdout and "GPUs n1/0, n1/1" in result.stdout


def test_teardown_from_this_nodes_gpus_is_refused() -> None:
    result = CliRunner().invoke(app, ["guard", "--action", "teardown", "--deployment", "rg"])
    assert result.exit_code == 2 and "deallocate its own VM" in result.stderr
