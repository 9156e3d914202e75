"""What the step ledger costs a training loop (target: under 1 % of a 10 ms step).

Two figures, both with the wall clock (CPU): the ledger's calls alone (empty steps: ``wrap``'s
``next()`` plus copy, compute and checkpoint blocks, per step, against a bare loop), and the
median step of a loop whose compute busy-waits 10 ms, with and without the ledger, in alternating
rounds so that load from other processes falls on both alike. A busy wait, not a sleep: a sleep
wakes late by tens of microseconds at random, more than what is measured here.

    python bench/ledger_overhead.py [--write BENCHMARKS.md]

Saves ``bench/results/ledger.json``; ``bench/_render_ledger.py`` writes the section.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from _machine import cpu_mark, load_since
from _markdown import publish
from _results import save
from render import render

STEP_S = 0.010


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _bare_steps(n: int, work: float) -> list[float]:
    marks = []
    for _ in range(n):
        marks.append(time.perf_counter())
        _busy(work)
    marks.append(time.perf_counter())
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def _ledger_steps(n: int, work: float) -> tuple[list[float], float]:
    from stoker.measure.ledger import Ledger

    ledger = Ledger(device="cpu", skip_first=0)
    marks = []
    for _ in ledger.wrap(range(n)):
        marks.append(time.perf_counter())
        with ledger.copy():
            pass
        with ledger.compute():
            _busy(work)
        with ledger.checkpoint():
            pass
    marks.append(time.perf_counter())
    return [b - a for a, b in zip(marks, marks[1:], strict=False)], ledger.summary().step_mean_s


CALLS_STEPS, CALLS_RUNS = 20000, 5


def _calls_alone_s(n: int = CALLS_STEPS, runs: int = CALLS_RUNS) -> float:
    """Per-step cost of the ledger's calls on empty steps, median of ``runs``."""
    costs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        _bare_steps(n, 0.0)
        bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        _ledger_steps(n, 0.0)
        costs.append((time.perf_counter() - t0 - bare) / n)
    return statistics.median(costs)


def measure(rounds: int = 6, steps: int = 100) -> dict[str, float]:
    mark = cpu_mark()
    calls_s = _calls_alone_s()
    bare: list[float] = []
    with_ledger: list[float] = []
    reported: list[float] = []  # the ledger's own mean step, per round
    for _ in range(rounds):
        bare += _bare_steps(steps, STEP_S)
        times, mean = _ledger_steps(steps, STEP_S)
        with_ledger += times
        reported.append(mean)
    bare_s, ledger_s = statistics.median(bare), statistics.median(with_ledger)
    return {
        "calls_alone_s": calls_s,
        "bare_step_s": bare_s,
        "ledger_step_s": ledger_s,
        "overhead_s": ledger_s - bare_s,
        "overhead_share": (ledger_s - bare_s) / bare_s,
        "ledger_reported_mean_s": statistics.mean(reported),
        "outside_mean_s": statistics.mean(with_ledger),
        "steps": rounds * steps,
        "round_steps": steps,
        "step_s": STEP_S,
        "calls_steps": CALLS_STEPS,
        "calls_runs": CALLS_RUNS,
        "target_share": 0.01,
        **load_since(mark),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    args = parser.parse_args()
    result = measure()
    print(json.dumps(result, indent=2))
    save("ledger", result)
    publish(render("ledger"), args.write)


if __name__ == "__main__":
    main()
