"""The step ledger: phases timed with sleeps add up to the step; a real DDP loop on two CPU ranks
(gloo, under torchrun) records every phase and some exposed communication."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from rich.console import Console

from stoker.errors import StokerError
from stoker.measure._clocks import WallClock
from stoker.measure.ledger import PHASES, Ledger

WORKER = Path(__file__).with_name("measure_worker.py")
TOL = 0.005  # seconds: sleeps overshoot, and this machine is shared


def _slow(n: int, wait: float, sleep: Callable[[float], None] = time.sleep):
    for i in range(n):
        sleep(wait)
        yield i


def _loop(ledger: Ledger, steps: int = 8, sleep: Callable[[float], None] = time.sleep) -> None:
    for _ in ledger.wrap(_slow(steps, 0.004, sleep)):
        with ledger.copy():
            sleep(0.002)
        with ledger.compute():
            sleep(0.008)
        with ledger.checkpoint():
            sleep(0.003)
        sleep(0.001)  # in no phase: "other"


class FakeClock:
    """The wall clock as the ledger reads it, moved only by ``sleep``: what each phase took
    is then exact, however loaded the machine (a real sleep overshoots by a scheduler's whim,
    many milliseconds when the CPUs are busy)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def mark(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_phases_add_up_to_the_step(monkeypatch: pytest.MonkeyPatch):
    clock = FakeClock()
    monkeypatch.setattr(WallClock, "mark", staticmethod(clock.mark))
    ledger = Ledger(device="cpu", skip_first=0)
    _loop(ledger, sleep=clock.sleep)
    s = ledger.summary()
    assert s.steps == 8 and s.skipped == 0 and s.clock == "wall clock"
    p = {name: stats.mean_s for name, stats in s.phases.items()}
    spent = {"data": 0.004, "copy": 0.002, "compute": 0.008, "checkpoint": 0.003, "other": 0.001}
    assert p == pytest.approx({**spent, "exposed_comm": 0.0}, abs=1e-9)
    assert sum(st.total_s for st in s.phases.values()) == pytest.approx(s.step_total_s, abs=1e-9)
    assert sum(st.share for st in s.phases.values()) == pytest.approx(1.0)
    assert s.step_mean_s == pytest.approx(0.018, abs=1e-9)
    assert s.last_step == pytest.approx({**spent, "exposed_comm": 0.0, "step": 0.018}, abs=1e-9)


def test_phases_are_timed_on_the_wall_clock():
    """The same loop on the real clock: each phase took at least what it slept (an upper
    bound is the scheduler's to give, so none is asserted; exact figures are above)."""
    ledger = Ledger(device="cpu", skip_first=0)
    _loop(ledger)
    s = ledger.summary()
    assert s.steps == 8 and s.clock == "wall clock"
    p = {name: stats.mean_s for name, stats in s.phases.items()}
    for name, slept in [
        ("data", 0.004),
        ("copy", 0.002),
        ("compute", 0.008),
        ("checkpoint", 0.003),
    ]:
        assert p[name] >= slept, (name, p)
    assert s.step_mean_s >= 0.018
    assert sum(st.total_s for st in s.phases.values()) == pytest.approx(s.step_total_s, abs=1e-9)


def test_first_steps_are_skipped_and_a_break_ends_the_step():
    ledger = Ledger(device="cpu", skip_first=2)
    for i in ledger.wrap(range(100)):
        with ledger.compute():
            time.sleep(0.001)
        if i == 4:
            break
    s = ledger.summary()
    assert (s.steps, s.skipped) == (3, 2)
    assert s.phases["compute"].mean_s >= 0.001


def test_manual_steps_without_wrap():
    ledger = Ledger(device="cpu", skip_first=0)
    with ledger.checkpoint():  # outside any step: not counted
        time.sleep(0.002)
    for _ in range(3):
        ledger.next_step()
        with ledger.data():
            time.sleep(0.002)
        with ledger.comm():  # a blocking collective of the loop's own
            time.sleep(0.002)
    ledger.end_step()
    s = ledger.summary()
    assert s.steps == 3 and s.phases["checkpoint"].total_s == 0.0
    assert s.phases["exposed_comm"].mean_s >= 0.002 and s.phases["data"].mean_s >= 0.002


def test_phases_do_not_nest():
    ledger = Ledger(device="cpu")
    ledger.next_step()
    with pytest.raises(StokerError, match="compute opened inside copy"), ledger.copy():
        with ledger.compute():
            pass


def test_exposed_comm_is_carved_out_of_compute():
    # Compute 0 -> 10 ms; the last bucket handed over at 6 ms, the last all-reduce done at 9 ms.
    ledger = Ledger(device="cpu", skip_first=0)
    ledger._account((0.0, 0.012, [(2, 0.0, 0.010)], [0.002, 0.006], [0.005, 0.009], 800))
    s = ledger.summary()
    assert s.phases["exposed_comm"].total_s == pytest.approx(0.003)
    assert s.phases["compute"].total_s == pytest.approx(0.007)
    assert s.phases["other"].total_s == pytest.approx(0.002)
    assert (s.comm_buckets, s.comm_bytes) == (2, 800)


def test_snapshot_from_another_thread_while_the_loop_runs():
    ledger = Ledger(device="cpu", skip_first=0)
    seen: list[int] = []
    done = threading.Event()

    def export() -> None:
        while not done.is_set():
            seen.append(ledger.snapshot().steps)
            time.sleep(0.001)

    exporter = threading.Thread(target=export)
    exporter.start()
    _loop(ledger, steps=10)
    done.set()
    exporter.join()
    assert seen == sorted(seen) and seen[-1] <= 10 and ledger.summary().steps == 10


def test_report_is_a_table_of_every_phase():
    ledger = Ledger(device="cpu", skip_first=0)
    _loop(ledger, steps=2)
    console = Console(record=True, width=120)
    ledger.report(console)
    text = console.export_text()
    assert "step ledger: 2 steps (wall clock)" in text
    for name in PHASES:
        assert name.replace("_", " ") in text


def test_attach_wants_ddp():
    with pytest.raises(StokerError, match="DistributedDataParallel"):
        Ledger(device="cpu").attach(torch.nn.Linear(2, 2))


def test_ddp_on_two_cpu_ranks_records_every_phase(tmp_path: Path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
    cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    run = subprocess.run(
        [*cmd, str(WORKER), "ddp", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for rank in (0, 1):
        result = json.loads((tmp_path / f"rank-{rank}.json").read_text())
        s = result["summary"]
        assert result["in_sync"]  # the wrapped hook still averages the gradients
        assert (s["steps"], s["skipped"]) == (11, 1)
        for name in ("data", "copy", "compute", "exposed_comm", "checkpoint"):
            assert s["phases"][name]["total_s"] > 0, (name, s)
        assert s["comm_buckets"] >= 11 and s["comm_bytes"] > 0
        total = sum(p["total_s"] for p in s["phases"].values())
        assert total == pytest.approx(s["step_total_s"], rel=1e-9)


def test_a_phase_on_a_background_thread_does_not_break_the_loops_phases():
    ledger = Ledger("cpu", skip_first=0)
    saving, saved = threading.Event(), threading.Event()

    def background_save() -> None:
        with ledger.checkpoint():
            saving.set()
            saved.wait(5)

    for i in ledger.wrap(range(3)):
        if i == 0:
            t = threading.Thread(target=background_save)
            t.start()
            saving.wait(5)
        with ledger.compute():  # raised "phases do not nest" while the checkpoint was open
            time.sleep(0.002)
        if i == 1:
            saved.set()
            t.join()
    s = ledger.summary()
    assert s.steps == 3 and s.phases["checkpoint"].total_s > 0
    assert s.phases["compute"].total_s >= 3 * 0.002 - TOL


def test_bad_ledger_use_is_refused_early():
    with pytest.raises(StokerError, match=r"skip_first=-2.*>= 0"):
        Ledger("cpu", skip_first=-2)
    if not torch.cuda.is_available():
        with pytest.raises(StokerError, match="no CUDA device here"):
            Ledger("cuda")
    ledger = Ledger("cpu")
    with pytest.raises(StokerError, match=r"next_step\(\) inside ledger.wrap\(\)"):
        for _ in ledger.wrap(range(2)):
            ledger.next_step()
