"""What ``simulate()`` refuses before it runs: arguments of the wrong type or range, and a
simulation too large to finish (a wall clock of centuries, millions of failures), each as one
SpecError that names the argument (the CLI's option of the same name) and what to give."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

from ..errors import SpecError
from ..units import format_duration
from ._inputs import Inputs

RUNS_MAX = 100_000
DAYS_MAX = 3650
# A failure costs a few SimPy events and a look-up in the fleet's clocks (~20-50 us); a run
# costs a fresh clock per GPU and VM. Past these the simulation would take many minutes.
FAILURES_MAX = 2_000_000
CLOCKS_MAX = 200_000_000


def check_arguments(runs: Any, seed: Any, days: Any) -> None:
    # bool is an int to Python; True runs or days is a slip, not a number
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= RUNS_MAX:
        raise SpecError(
            f"runs: give a whole number of runs from 1 to {RUNS_MAX:,} (got {runs!r}); "
            "100 is plenty for P5 and P95"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SpecError(f"seed: give a whole number, 0 or more (got {seed!r})")
    if days is None:
        return
    if isinstance(days, bool) or not isinstance(days, Real) or not 0 < days <= DAYS_MAX:
        raise SpecError(
            f"days: give the wall clock to simulate, over 0 and at most {DAYS_MAX} (got {days!r})"
        )


def check_knobs(knobs: Any) -> None:
    if knobs is not None and not isinstance(knobs, dict):
        raise SpecError(
            f"knobs: give a dict of [simulate] knobs, e.g. {{'stragglers': 'none'}} "
            f"(got {type(knobs).__name__})"
        )


def check_duration(source: str, duration_s: float, given: bool) -> None:
    """The plan's own wall clock can be absurd (a job whose MTBF is shorter than a restart
    never finishes): simulate at most DAYS_MAX of it, and say how to simulate less."""
    if not given and not duration_s <= DAYS_MAX * 86400:
        raise SpecError(
            f"{source}: the plan's run lasts {duration_s / 86400:,.0f} days, more than "
            f"{DAYS_MAX} to simulate; give days (--days) for a part of it, or check [run]"
        )


def check_size(source: str, inp: Inputs, runs: int, given: bool) -> None:
    """Refuse a simulation too short to hold a step, or too large to finish soon."""
    days = "days (--days)" if given else "days (--days) or a shorter [run]"
    if inp.duration_s < inp.base_step_s:
        raise SpecError(
            f"{source}: {format_duration(inp.duration_s)} of wall clock is shorter than one "
            f"step ({format_duration(inp.base_step_s)}); give more {days}"
        )
    rate = _failures_per_s(inp)
    failures = runs * inp.duration_s * rate
    if failures > FAILURES_MAX:
        raise SpecError(
            f"{source}: about {failures:,.0f} failures in all ({inp.duration_s * rate:,.0f} a "
            f"run, one every {format_duration(1 / rate)}, x {runs:,} runs), too many to "
            f"simulate (at most {FAILURES_MAX:,}); give fewer runs (--runs) or {days}"
        )
    clocks = runs * (inp.gpus + inp.nodes)
    if clocks > CLOCKS_MAX:
        raise SpecError(
            f"{source}: {runs:,} runs of {inp.gpus:,} GPUs draw {clocks:,} failure clocks, "
            f"too many to simulate (at most {CLOCKS_MAX:,}); give fewer runs (--runs)"
        )


def _failures_per_s(inp: Inputs) -> float:
    rate = 0.0
    for parts, mtbf in ((inp.gpus, inp.gpu_part_mtbf_s), (inp.nodes, inp.node_part_mtbf_s)):
        if math.isfinite(mtbf) and mtbf > 0:
            rate += parts / mtbf
    return rate
