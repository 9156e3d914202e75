"""stoker guard acts on complete, valid evidence only: each invalid or partial reading (a value out
of range, a GPU announced and not reported, one reported and not announced or twice, control
characters in a name, garbage or cut-off text, a source that stops answering or never ends its
line, a gap, a window not yet covered) gives no action, neither the command nor the webhook, and
a reason that names it; the same guard on valid idle readings acts."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import loopback_http
from fake_nvml import FakeNvml
from stoker.measure.gpus import Gpus
from stoker.operate._guard_actions import command_action, webhook_action
from stoker.operate._guard_evidence import GpuValue, gpu_problem
from stoker.operate._guard_sources import Metrics, nvml_gpus
from stoker.operate.guard import GpuReading, Guard, GuardPolicy, Verdict

POLICY = GuardPolicy(idle_for_s=600, util_below=5, interval_s=60)


def page(
    utils: tuple[str, ...] = ("0.01", "0.02"),
    *,
    count: str = "2",
    gpus: tuple[str, ...] = ("0", "1"),
    names: tuple[str, ...] = ("H100", "H100"),
    extra: str = "",
) -> str:
    """A `stoker watch` page of node n1."""
    lines = [f'stoker_gpus{{Hostname="n1"}} {count}']
    for gpu, util, name in zip(gpus, utils, names, strict=True):
        labels = f'gpu="{gpu}",modelName="{name}",Hostname="n1"'
        lines.append(f"stoker_gpu_utilization_ratio{{{labels}}} {util}")
        lines.append(f"stoker_gpu_lost{{{labels}}} 0")
    return "\n".join(lines) + "\n" + extra


INVALID = {
    "-1 %": (page(("-0.01", "0")), "GPU n1/0: utilization -1 % is not a number from 0 to 100"),
    "-Inf": (page(("-Inf", "0")), "GPU n1/0: utilization -inf %"),
    "+Inf": (page(("0", "+Inf")), "GPU n1/1: utilization inf %"),
    "NaN": (page(("NaN", "0")), "GPU n1/0: utilization nan %"),
    "101 %": (page(("0", "1.01")), "GPU n1/1: utilization 101 %"),
    "2 announced, 1 reported": (
        page(("0",), gpus=("0",), names=("H100",)),
        "2 GPU(s) announced, 1 reported: GPU n1/1 missing",
    ),
    "unannounced GPU": (
        page(("0", "0", "0"), gpus=("0", "1", "2"), names=("H100",) * 3),
        "GPU n1/2 reported but not announced (2 announced)",
    ),
    "duplicate GPU": (page(gpus=("0", "0")), "GPU n1/0 reported twice"),
    "control characters in a name": (
        page(names=("H100\x1b[2J\x07", "H100")),
        "GPU n1/0: its name 'H100\\x1b[2J\\x07' holds control characters",
    ),
    "negative memory": (
        page(extra='stoker_gpu_memory_used_bytes{gpu="1",Hostname="n1"} -1\n'),
        "GPU n1/1: memory used -1 bytes is not a size from 0 up",
    ),
    "negative power": (
        page(extra='stoker_gpu_power_watts{gpu="0",Hostname="n1"} -5\n'),
        "GPU n1/0: power -5 W is not a figure from 0 up",
    ),
    "a GPU count that is not one": (page(count="2.5"), "stoker_gpus 2.5 (1 given) is not"),
    "garbage text": ("<html>\x1b[31mno metrics</html>\n", "is not Prometheus text (ValueError)"),
    "a line without an end": (page()[:-3], "a last line without an end (cut off)"),
}


class Actions:
    """The command action (a marker file) and the webhook action (a loopback server) in one."""

    def __init__(self, tmp_path: Path, hook_url: str, posts: list[dict]) -> None:
        self.marker, self.posts = tmp_path / "acted", posts
        script = (
            f'import os; open({str(self.marker)!r}, "w").write(os.environ["STOKER_GUARD_EVIDENCE"])'
        )
        command = command_action(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
        webhook = webhook_action(hook_url)

        def act(verdict: Verdict) -> None:
            command(verdict)
            webhook(verdict)

        self.act = act

    def ran(self) -> bool:
        return self.marker.exists() or bool(self.posts)


@pytest.fixture
def actions(tmp_path: Path) -> Iterator[Actions]:
    with loopback_http.webhook() as (url, posts):
        yield Actions(tmp_path, url, posts)


def watch(
    gpus: Callable[[float], GpuReading],
    act: Callable[[Verdict], Any],
    ticks: int = 30,
    every: Callable[[int], float] = lambda tick: 60.0,
) -> tuple[Verdict | None, list[Verdict]]:
    """A guard on a fake clock: ``every(tick)`` is how long each wait really lasts."""
    clock = SimpleNamespace(t=1_700_000_000.0, ticks=0)
    seen: list[Verdict] = []

    def sleep(s: float) -> None:
        clock.ticks += 1
        clock.t += every(clock.ticks)

    guard = Guard(POLICY, gpus=gpus, action=act, on_verdict=seen.append,
                  clock=lambda: clock.t, sleep=sleep)  # fmt: skip
    return guard.run(max_ticks=ticks), seen


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_readings_never_act(case: str, actions: Actions) -> None:
    text, why = INVALID[case]
    metrics = Metrics(["http://n1:19400/metrics"], get=lambda url: text)
    acted, seen = watch(metrics.gpus, actions.act)
    assert acted is None and not actions.ran()
    assert {v.state for v in seen} == {"unknown"}
    assert why in seen[-1].reason
    assert all(c not in seen[-1].reason for c in "\x1b\x07")  # escaped, never echoed raw


def test_valid_idle_readings_act_with_both_actions(actions: Actions) -> None:
    metrics = Metrics(["http://n1:19400/metrics"], get=lambda url: page())
    acted, _ = watch(metrics.gpus, actions.act)
    assert acted is not None and acted.idle and acted.gpus == ["n1/0", "n1/1"]
    evidence = json.loads(actions.marker.read_text())
    assert evidence["span"]["count"] == 11 and len(evidence["samples"]) == 11
    assert evidence["samples"][0]["util_pct"] == {"n1/0": 1.0, "n1/1": 2.0}
    assert len(actions.posts) == 1 and actions.posts[0]["span"] == evidence["span"]


def test_a_source_that_stops_answering_never_acts(actions: Actions) -> None:
    answers = iter([page()] * 5)  # 4 min of idle readings, then nothing

    def get(url: str) -> str:
        return next(answers)  # StopIteration after five: no answer

    acted, seen = watch(Metrics(["http://n1:19400/metrics"], get=get).gpus, actions.act)
    assert acted is None and not actions.ran()
    assert "did not answer (StopIteration)" in seen[-1].reason


def test_a_gap_in_the_readings_never_acts(actions: Actions) -> None:
    metrics = Metrics(["http://n1:19400/metrics"], get=lambda url: page())
    # every eighth wait is 3 min: 7 min of readings between gaps, never the 10 min window
    acted, seen = watch(metrics.gpus, actions.act, every=lambda t: 180.0 if t % 8 == 0 else 60.0)
    assert acted is None and not actions.ran()
    assert any("no reading for 3 min (from" in v.reason for v in seen)


def test_a_window_shorter_than_the_idle_period_never_acts(actions: Actions) -> None:
    metrics = Metrics(["http://n1:19400/metrics"], get=lambda url: page())
    acted, seen = watch(metrics.gpus, actions.act, ticks=10)  # 9 min of the 10
    assert acted is None and not actions.ran()
    assert "the readings cover 9 min of the 10 min window" in seen[-1].reason


def test_a_source_that_raises_is_missing_data(actions: Actions) -> None:
    def broken(now: float) -> GpuReading:
        raise RuntimeError("driver hiccup")

    acted, seen = watch(broken, actions.act)
    assert acted is None and not actions.ran()
    assert "the source failed (RuntimeError)" in seen[-1].reason


@pytest.mark.parametrize(
    ("nvml", "why"),
    [
        (FakeNvml(2, util={0: 0.0, 1: -1.0}), "GPU 1: utilization -1 %"),
        (FakeNvml(2, util={0: 0.0, 1: 101.0}), "GPU 1: utilization 101 %"),
        (FakeNvml(2, util={0: float("nan"), 1: 0}), "GPU 0: utilization nan %"),
        (FakeNvml(2, util={0: 0, 1: 0}, memory_used={0: 81 << 30}), "is more than its total"),
        (FakeNvml(2, util={0: 0, 1: 0}, names={1: b"H100\x1b]0;owned\x07"}), "\\x1b]0;owned\\x07"),
    ],
)
def test_nvml_values_out_of_range_never_act(nvml: FakeNvml, why: str, actions: Actions) -> None:
    acted, seen = watch(nvml_gpus(Gpus(nvml)), actions.act)
    assert acted is None and not actions.ran() and why in seen[-1].reason
    assert "\x1b" not in seen[-1].reason


def test_nvml_idle_gpus_act_with_memory_and_power_in_range(actions: Actions) -> None:
    acted, _ = watch(nvml_gpus(Gpus(FakeNvml(2, util={0: 0, 1: 3}))), actions.act)
    assert acted is not None and acted.gpus == ["0", "1"] and acted.peak_util == 3
    assert actions.ran()


def test_nvml_gpu_announced_and_not_sampled_is_missing() -> None:
    sample = SimpleNamespace(index=0, utilization=0.0, memory_used=0, memory_total=1,
                             power_w=None, name="H100")  # fmt: skip
    gpus = SimpleNamespace(problem=None, lost={}, handles=[0, 1], sample=lambda: [sample])
    reading = nvml_gpus(gpus)(1.0)
    assert gpu_problem(reading) == "2 GPU(s) announced, 1 reported: GPU 1 missing"


def test_a_reading_that_announces_nothing_or_a_gpu_twice_is_invalid() -> None:
    zero = GpuValue("0", 0.0)
    assert "announced no GPU" in gpu_problem(GpuReading(0.0, (zero,)))
    assert "GPU 0 announced twice" in gpu_problem(GpuReading(0.0, (zero,), announced=("0", "0")))
    assert "GPU 0: utilization '0' %" in gpu_problem(
        GpuReading(0.0, (GpuValue("0", "0"),), announced=("0",))  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------- a real endpoint that stalls


@pytest.fixture
def stalling() -> Iterator[Callable[[bytes, float], str]]:
    """An endpoint that sends ``head`` then a byte every ``every`` s (0: nothing more), and
    never ends its answer."""
    servers = loopback_http.Servers()

    def start(head: bytes, every: float) -> str:
        class Stall(loopback_http.Quiet):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(head)
                self.wfile.flush()
                while not servers.stop.wait(every or 30):
                    self.wfile.write(b"#")
                    self.wfile.flush()

        return servers.url(Stall)

    yield start
    servers.close()


@pytest.mark.parametrize("every", [0.0, 0.05], ids=["silent", "trickling"])
def test_an_endpoint_that_never_ends_its_line_times_out(stalling, every: float) -> None:
    url = stalling(b'stoker_gpus{Hostname="n1"} 2\nstoker_gpu_utilization_ratio{gpu="0"', every)
    began = time.monotonic()
    reading = Metrics([url], timeout_s=0.5).gpus(1.0)
    assert time.monotonic() - began < 2.0  # bounded by the scrape timeout, not the server
    assert reading.values is None and "did not answer" in reading.missing
