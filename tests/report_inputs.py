"""Inputs for the report tests, made by stoker itself: the 2,048-VM example's plan, its
simulation (tests/fixtures/simulation_2048vm.json is the output of ``stoker simulate
examples/llama3-405b-2048vm.toml --json``, seed 0, kept because a run takes 15 s), and measured
records from a real Ledger and a real Checkpointer running a short loop."""

from __future__ import annotations

import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC_2048 = ROOT / "examples" / "llama3-405b-2048vm.toml"
SIMULATION = ROOT / "tests" / "fixtures" / "simulation_2048vm.json"


def plan_json(folder: Path) -> Path:
    from stoker import plan_job

    path = folder / "plan.json"
    path.write_text(json.dumps(plan_job(SPEC_2048).to_dict()))
    return path


def ledger_record(folder: Path, steps: int = 40) -> Path:
    """A loop whose data wait grows halfway through, timed by the Ledger on the wall clock."""
    from stoker import Ledger

    ledger = Ledger("cpu")
    ledger._history.every_s = 0.02  # many points from a short loop
    for i in ledger.wrap(_slow_after(range(steps), steps // 2)):
        with ledger.compute():
            time.sleep(0.004)
        del i
    return ledger.save_json(folder / "ledger.json", "toy loop")


def _slow_after(items, n):  # type: ignore[no-untyped-def]
    for i, x in enumerate(items):
        time.sleep(0.001 if i < n else 0.006)
        yield x


def checkpoint_record(folder: Path, saves: int = 3) -> Path:
    import torch

    from stoker import Checkpointer

    state = {"w": torch.ones(64, 64)}
    with Checkpointer(folder / "fast", folder / "durable", keep_last=2) as ckpt:
        for step in range(1, saves + 1):
            ckpt.save(step, state)
            ckpt.wait()
        return ckpt.save_json(folder / "ckpt.json", "toy checkpoints")
