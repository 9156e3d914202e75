"""stoker guard: the idle decision on synthetic readings (idle, busy, missing data never idle),
the loop that acts once, the NVML and Prometheus sources, and the actions."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import loopback_http
from stoker.errors import StokerError
from stoker.operate._guard_actions import command_action, print_action, webhook_action
from stoker.operate._guard_evidence import gpu_problem
from stoker.operate._guard_sources import Metrics, nvml_gpus, step_file
from stoker.operate.guard import GpuReading, Guard, GuardPolicy, StepReading, decide

POLICY = GuardPolicy(idle_for_s=600, util_below=5, interval_s=60)


def gpu_series(utils: list[float | None], gpus: int = 8, start: float = 0.0, every: float = 60):
    return [
        GpuReading(start + i * every, None, missing="no NVIDIA driver")
        if u is None
        else GpuReading.of(start + i * every, {str(g): u for g in range(gpus)})
        for i, u in enumerate(utils)
    ]


def test_gpus_under_the_threshold_for_the_whole_window_are_idle() -> None:
    readings = gpu_series([90, 80] + [1.0] * 11)  # busy at 0-60 s, idle from 120 s to 720 s
    verdict = decide(readings, [], POLICY, now=720)
    assert verdict.idle and verdict.idle_s == 600
    assert verdict.gpus == [str(g) for g in range(8)] and verdict.peak_util == 1.0
    assert "8 GPU(s) under 5 % for 10 min" in verdict.reason
    # the evidence: each reading from the window's start to now, and their count and span
    assert [s["at"] for s in verdict.samples] == [120 + 60 * i for i in range(11)]
    assert verdict.samples[0]["util_pct"] == {str(g): 1.0 for g in range(8)}
    assert verdict.span == {
        "count": 11, "first_at": 120, "last_at": 720, "span_s": 600, "max_gap_s": 60
    }  # fmt: skip


def test_not_yet_idle_long_enough_is_busy() -> None:
    verdict = decide(gpu_series([90] + [1.0] * 9), [], POLICY, now=540)
    assert verdict.state == "busy" and verdict.idle_s == 480


def test_one_busy_gpu_keeps_the_node_busy() -> None:
    readings = gpu_series([1.0] * 12)
    readings[-3] = GpuReading.of(readings[-3].at, {**readings[-3].util, "7": 60.0})
    verdict = decide(readings, [], POLICY, now=660)
    assert verdict.state == "busy" and verdict.idle_s == 60  # idle from the reading after it


@pytest.mark.parametrize(
    ("readings", "why"),
    [
        (gpu_series([None] * 20), "no GPU data: no NVIDIA driver"),
        (gpu_series([1.0] * 19 + [None]), "no GPU data"),
        ([], "no GPU reading yet"),
    ],
)
def test_missing_data_is_never_idle(readings: list[GpuReading], why: str) -> None:
    verdict = decide(readings, [], POLICY, now=1140)
    assert verdict.state == "unknown" and why in verdict.reason


def test_a_gap_in_the_readings_is_unknown_and_says_where() -> None:
    before = gpu_series([1.0] * 6)  # 0-300 s
    after = gpu_series([1.0] * 6, start=900)  # 900-1200 s: 600 s without a reading between
    verdict = decide(before + after, [], POLICY, now=1200)
    assert verdict.state == "unknown" and verdict.idle_s == 300
    assert "no reading for 10 min (from 15 min to 5 min ago)" in verdict.reason
    assert decide(before, [], POLICY, now=700).state == "unknown"  # the source went quiet
    # 2 x the interval and a little is no gap; a little more is
    spaced = gpu_series([1.0] * 6, every=126)
    assert decide(spaced, [], POLICY, now=630).idle
    spaced = gpu_series([1.0] * 6, every=127)
    assert decide(spaced, [], POLICY, now=635).state == "unknown"


def test_a_window_shorter_than_the_idle_period_is_unknown() -> None:
    verdict = decide(gpu_series([1.0] * 10), [], POLICY, now=540)
    assert verdict.state == "unknown" and verdict.idle_s == 540
    assert "the readings cover 9 min of the 10 min window" in verdict.reason


def test_times_that_do_not_increase_are_unknown() -> None:
    readings = gpu_series([1.0] * 12)
    readings[4] = GpuReading.of(readings[6].at, readings[4].util)  # 360 s among 240 s's peers
    assert "times do not increase" in decide(readings, [], POLICY, now=660).reason
    readings[4] = GpuReading.of(float("nan"), readings[4].util)
    assert decide(readings, [], POLICY, now=660).state == "unknown"
    assert decide(gpu_series([1.0] * 12), [], POLICY, now=float("inf")).state == "unknown"
    assert decide(gpu_series([1.0] * 12), [], POLICY, now=600).state == "unknown"  # future


def test_a_gpu_that_disappears_is_unknown_until_the_window_refills() -> None:
    readings = gpu_series([1.0] * 12)
    readings[5] = GpuReading.of(readings[5].at, {"0": 1.0})  # a source that lost seven GPUs
    verdict = decide(readings, [], POLICY, now=660)
    assert verdict.state == "unknown" and verdict.idle_s == 300  # counted from 360 s
    assert "GPUs announced changed (1, now 8)" in verdict.reason


def steps(values: list[int | None], every: float = 60) -> list[StepReading]:
    return [StepReading(i * every, v, "" if v is not None else "endpoint down")
            for i, v in enumerate(values)]  # fmt: skip


def test_no_training_step_for_the_window_is_idle_with_the_last_step() -> None:
    policy = GuardPolicy(idle_for_s=600, interval_s=60, watch_gpus=False)
    verdict = decide([], steps([10, 11, 12] + [12] * 10), policy, now=720)
    assert verdict.idle and verdict.last_step == 12 and verdict.last_step_age_s == 600
    assert decide([], steps([10, 11, 12] + [12] * 9), policy, now=660).state == "busy"
    assert decide([], steps([12] * 12 + [None]), policy, now=720).state == "unknown"


def test_busy_gpus_but_stalled_steps_act_and_idle_gpus_carry_the_last_step() -> None:
    stalled = steps([5] * 12)
    verdict = decide(gpu_series([95] * 12), stalled, POLICY, now=660)
    assert verdict.idle and "no training step" in verdict.reason
    verdict = decide(gpu_series([1] * 12), steps(list(range(12))), POLICY, now=660)
    assert verdict.idle and verdict.last_step == 11 and verdict.gpus


def test_guard_acts_once_with_the_evidence() -> None:
    clock = SimpleNamespace(t=0.0)
    utils = iter([90.0, 80.0] + [0.0] * 100)
    acted: list[dict] = []
    guard = Guard(
        POLICY,
        gpus=lambda now: GpuReading.of(now, {"0": next(utils), "1": 0.0}),
        action=print_action(acted.append),
        clock=lambda: clock.t,
        sleep=lambda s: setattr(clock, "t", clock.t + s),
    )
    verdict = guard.run()
    assert verdict is not None and verdict.idle and clock.t == 720
    assert len(acted) == 1 and acted[0]["gpus"] == ["0", "1"] and acted[0]["idle_s"] == 600
    assert acted[0]["span"]["count"] == 11 and acted[0]["samples"][-1]["at"] == 720
    assert guard.run() is verdict and len(acted) == 1  # never twice


def test_guard_without_nvml_never_acts_and_says_why() -> None:
    clock = SimpleNamespace(t=0.0)
    no_gpus = nvml_gpus(SimpleNamespace(problem="no NVIDIA driver or GPU here", lost={}))
    seen, acted = [], []
    guard = Guard(
        POLICY,
        gpus=no_gpus,
        action=acted.append,
        on_verdict=seen.append,
        clock=lambda: clock.t,
        sleep=lambda s: setattr(clock, "t", s + clock.t),
    )
    assert guard.run(max_ticks=100) is None and not acted
    assert {v.state for v in seen} == {"unknown"} and "no NVIDIA driver" in seen[-1].reason


def test_nvml_lost_gpu_is_missing_data() -> None:
    sample = SimpleNamespace(index=0, utilization=0.0)
    gpus = SimpleNamespace(problem=None, lost={3: "GpuIsLost"}, sample=lambda: [sample])
    reading = nvml_gpus(gpus)(1.0)
    assert reading.values is None and "GPU 3: GpuIsLost" in reading.missing


WATCH = """# TYPE stoker_gpus gauge
stoker_gpus{Hostname="n1"} 2
# TYPE stoker_gpu_utilization_ratio gauge
stoker_gpu_utilization_ratio{gpu="0",UUID="GPU-a",modelName="H100",Hostname="n1"} 0.03
stoker_gpu_utilization_ratio{gpu="1",UUID="GPU-b",modelName="H100",Hostname="n1"} 0.01
# TYPE stoker_gpu_lost gauge
stoker_gpu_lost{gpu="0",UUID="GPU-a",modelName="H100",Hostname="n1"} 0
stoker_gpu_lost{gpu="1",UUID="GPU-b",modelName="H100",Hostname="n1"} 0
"""
TRAINER = """# TYPE stoker_steps counter
stoker_steps_total{Hostname="n1",gpu="0",UUID="",rank="0",training_job="j"} 40
# TYPE stoker_steps_skipped counter
stoker_steps_skipped_total{Hostname="n1",gpu="0",UUID="",rank="0",training_job="j"} 1
"""


def test_metrics_source_reads_watch_and_ledger_endpoints() -> None:
    pages = {"http://n1:9400/metrics": WATCH, "http://n1:9401/metrics": TRAINER}
    m = Metrics(list(pages), get=pages.__getitem__)
    reading = m.gpus(1.0)
    assert reading.util == {"n1/0": 3.0, "n1/1": 1.0}  # the ratio, as the guard's %
    assert reading.announced == ("n1/0", "n1/1") and not gpu_problem(reading)
    assert m.steps(1.0).step == 41

    def down(url: str) -> str:
        raise ConnectionError("refused")

    m = Metrics(["http://n1:9400/metrics?token=secret123456"], get=down)
    reading = m.gpus(2.0)
    assert reading.values is None and "did not answer" in reading.missing
    assert "secret123456" not in reading.missing


def test_step_file(tmp_path: Path) -> None:
    read = step_file(tmp_path / "step")
    assert read(0).step is None and "No such file" in read(0).missing
    (tmp_path / "step").write_text("17\n")
    assert read(1).step == 17
    (tmp_path / "step").write_text("")  # touched each step: its time is the count
    assert read(2).step == (tmp_path / "step").stat().st_mtime_ns
    (tmp_path / "step").write_text("17\x1b[2J junk")
    reading = read(3)
    assert reading.step is None and "\\x1b[2J junk' is not a step number" in reading.missing


def verdict_now():
    return decide(gpu_series([0.0] * 12), [], POLICY, now=660)


def test_command_action_gets_the_evidence(tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    script = f'import os; open({str(out)!r}, "w").write(os.environ["STOKER_GUARD_EVIDENCE"])'
    command_action(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")(verdict_now())
    evidence = json.loads(out.read_text())
    assert evidence["idle_s"] == 600 and evidence["span"]["count"] == 11
    with pytest.raises(StokerError, match="exited 3"):
        command_action("exit 3")(verdict_now())


def test_webhook_action_posts_json() -> None:
    with loopback_http.webhook() as (url, got):
        webhook_action(f"{url}?sig=abcdefgh123")(verdict_now())
        assert got[0]["event"] == "idle" and got[0]["gpus"]
        with pytest.raises(StokerError) as info:
            webhook_action("http://127.0.0.1:9/hook?sig=abcdefgh123")(verdict_now())
        assert "abcdefgh123" not in str(info.value)
