"""``stoker guard`` through typer's CliRunner, with short real durations: a stalled step file
acts once; no NVML watches until --timeout without acting; a `stoker watch` endpoint at 0 %
runs the command with the evidence; teardown from a GPU node is refused."""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import loopback_http
from stoker.cli import app
from stoker.operate import _guard_sources
from stoker.operate.guard import GpuReading

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


# ------------------------------------------- invalid or partial evidence: exit 3, no action


def watch_page(utils=("0", "0.02"), gpus=("0", "1"), count="2", names=("H100", "H100")) -> bytes:
    lines = [f'stoker_gpus{{Hostname="n1"}} {count}']
    for gpu, util, name in zip(gpus, utils, names, strict=True):
        labels = f'gpu="{gpu}",modelName="{name}",Hostname="n1"'
        lines.append(f"stoker_gpu_utilization_ratio{{{labels}}} {util}")
    return ("\n".join(lines) + "\n").encode()


OK = watch_page()
TRICKLE = "trickle"  # headers, half a line, then a byte now and then: no read ever times out
SILENT = "silent"  # headers, then nothing

# name: (what the n-th answer is, or (seconds late, answer)), the reason shown, extra options
CASES = {
    "-1 %": (lambda n: watch_page(("-0.01", "0")), "GPU n1/0: utilization -1 %", []),
    "-Inf": (lambda n: watch_page(("-Inf", "0")), "GPU n1/0: utilization -inf %", []),
    "+Inf": (lambda n: watch_page(("0", "+Inf")), "GPU n1/1: utilization inf %", []),
    "NaN": (lambda n: watch_page(("NaN", "0")), "GPU n1/0: utilization nan %", []),
    "101 %": (lambda n: watch_page(("0", "1.01")), "GPU n1/1: utilization 101 %", []),
    "2 announced, 1 reported": (
        lambda n: watch_page(("0",), ("0",), names=("H100",)),
        "2 GPU(s) announced, 1 reported: GPU n1/1 missing",
        [],
    ),
    "an unannounced GPU": (
        lambda n: watch_page(("0", "0"), count="1"),
        "GPU n1/1 reported but not announced (1 announced)",
        [],
    ),
    "a duplicate GPU": (lambda n: watch_page(gpus=("0", "0")), "GPU n1/0 reported twice", []),
    "control characters in a name": (
        lambda n: watch_page(names=("H100", "\x1b[2J\x1b]0;pwned\x07")),
        "GPU n1/1: its name '\\x1b[2J\\x1b]0;pwned\\x07' holds control characters",
        [],
    ),
    "garbage text": (lambda n: b"\x00\x1b[31mnot metrics\n", "is not Prometheus text", []),
    "a line without an end": (lambda n: OK[:-4], "a last line without an end (cut off)", []),
    "a line that never ends": (lambda n: TRICKLE, "did not answer (TimeoutError)", []),
    "a source that stops answering": (
        lambda n: OK if n < 3 else SILENT,
        "did not answer (ReadTimeout)",
        [],
    ),
    "a gap in the window": (
        lambda n: (0.7, OK) if n % 4 == 3 else OK,
        "no reading for",
        [],
    ),
    "a window shorter than the idle period": (
        lambda n: OK,
        "of the 5 s window",
        ["--idle-for", "5s"],
    ),
}


@pytest.fixture
def endpoint() -> Iterator[Callable[[Callable[[int], Any]], str]]:
    servers = loopback_http.Servers()
    stop = servers.stop

    def start(answer: Callable[[int], Any]) -> str:
        asked = [0]

        class Page(loopback_http.Quiet):
            def do_GET(self) -> None:  # noqa: N802
                n, asked[0] = asked[0], asked[0] + 1
                body = answer(n)
                late, body = body if isinstance(body, tuple) else (0.0, body)
                if stop.wait(late):
                    return
                self.send_response(200)
                size = len(body) if isinstance(body, bytes) else 1000
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if body == SILENT:
                    stop.wait(30)
                elif body == TRICKLE:  # a line begun and never finished
                    self.wfile.write(b'stoker_gpus{Hostname="n1"} ')
                    self.wfile.flush()
                    while not stop.wait(0.05):
                        self.wfile.write(b"2")
                        self.wfile.flush()
                else:
                    self.wfile.write(body)

        return servers.url(Page)

    yield start
    servers.close()


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict]]]:
    with loopback_http.webhook() as hook:
        yield hook


def guard_args(url: str, action: str, marker: Path, hook: str, extra: list[str]) -> list[str]:
    act = (
        ["--action", "command", "--command", f"touch {shlex.quote(str(marker))}"]
        if action == "command"
        else ["--action", "webhook", "--webhook", hook]
    )
    return ["guard", "--metrics", url, *FAST, "--scrape-timeout", "1s", *act, *extra]


@pytest.mark.parametrize("action", ["command", "webhook"])
@pytest.mark.parametrize("case", list(CASES))
def test_invalid_or_partial_evidence_never_acts(
    case: str, action: str, endpoint, webhook, tmp_path: Path
) -> None:
    answer, why, extra = CASES[case]
    hook, posts = webhook
    marker = tmp_path / "acted"
    args = guard_args(endpoint(answer), action, marker, hook, [*extra, "--timeout", "1.5s"])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert not marker.exists() and not posts  # neither the command nor the webhook ran
    assert why in result.stderr and "no action" in result.stderr
    assert "1.5s passed without acting (unknown: " in result.stderr
    assert "\x1b" not in result.output and "\x07" not in result.output  # escaped, never raw
    assert "IDLE" not in result.stdout


def test_invalid_evidence_in_json_is_unknown_with_the_reason(endpoint, tmp_path: Path) -> None:
    url = endpoint(lambda n: watch_page(("0", "-Inf")))
    args = ["guard", "--metrics", url, *FAST, "--timeout", "1s", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {"event": "verdict", "state": "unknown", "reason": lines[0]["reason"]}
    ]  # one line: the same reason is not repeated, and no idle event
    assert lines[0]["reason"].startswith("GPU n1/1: utilization -inf % is not a number")


@pytest.mark.parametrize("action", ["command", "webhook"])
def test_valid_idle_evidence_acts_with_its_readings(
    action: str, endpoint, webhook, tmp_path: Path
) -> None:
    hook, posts = webhook
    marker = tmp_path / "acted"
    args = guard_args(endpoint(lambda n: OK), action, marker, hook, ["--timeout", "10s"])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert marker.exists() if action == "command" else len(posts) == 1
    assert "IDLE on" in result.stdout and "GPUs n1/0, n1/1, peak 2 %" in result.stdout
    assert re.search(r"; \d+ readings over [\d.]+ m?s \(largest gap [\d.]+ ms\)", result.stdout)
    if action == "webhook":
        sent = posts[0]
        # at least the two ends and one between: how many more fit the window depends on the load
        assert sent["span"]["count"] == len(sent["samples"]) >= 3
        assert sent["samples"][-1]["util_pct"] == {"n1/0": 0.0, "n1/1": 2.0}
        assert sent["span"]["span_s"] >= 0.6 and sent["span"]["max_gap_s"] <= 0.45


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> Path:
    """A provision folder for the 64-VM example: its record is the bill guard prices idling by."""
    import stoker

    out = tmp_path_factory.mktemp("guard-cost") / "deploy"
    stoker.provision("examples/pretrain-64vm.toml", out)
    return out


def test_evidence_prices_the_idle_time_from_the_deployments_bill(
    endpoint, webhook, tmp_path: Path, deployed: Path
) -> None:
    hook, posts = webhook
    bill = json.loads((deployed / "stoker-deployment.json").read_text("utf-8"))
    args = guard_args(endpoint(lambda n: OK), "webhook", tmp_path / "m", hook, [])
    result = CliRunner().invoke(app, [*args, "--deployment", str(deployed), "--timeout", "10s"])
    assert result.exit_code == 0, result.output
    sent = posts[0]
    cost, hour = sent["cost"], bill["cost_per_hour_usd"]
    assert cost["per_hour_usd"] == hour > 0
    assert cost["idle_so_far_usd"] == pytest.approx(hour * sent["idle_s"] / 3600, abs=0.01)
    saved = hour - bill["storage_only_per_hour_usd"]
    assert cost["saved_per_hour_by_deallocating_usd"] == pytest.approx(saved, abs=0.01)
    assert cost["unpriced"] == bill["unpriced"]  # the priced part is said to be one
    assert cost["sources"] and all(" from " in s for s in cost["sources"])
    assert re.search(r"\$[\d,.]+ idle so far at \$[\d,.]+/h", result.stdout)


def test_no_deployment_no_cost_and_a_damaged_bill_is_one_line(
    endpoint, tmp_path: Path, deployed: Path
) -> None:
    args = ["guard", "--metrics", endpoint(lambda n: OK), *FAST, "--timeout", "10s", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["cost"] == {}
    damaged = tmp_path / "deploy"
    damaged.mkdir()
    record = json.loads((deployed / "stoker-deployment.json").read_text("utf-8"))
    (damaged / "stoker-deployment.json").write_text(json.dumps(record | {"cost_per_hour_usd": "9"}))
    marker = tmp_path / "acted"
    args = guard_args(endpoint(lambda n: OK), "command", marker, "", ["--deployment", str(damaged)])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and not marker.exists()
    assert "stoker-deployment.json: cost_per_hour_usd must be a price in USD" in result.output
