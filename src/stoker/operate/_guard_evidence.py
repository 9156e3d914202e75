"""What ``guard`` counts as evidence: one reading of the GPUs (or of the training step), whether
it is complete and valid, and the window of readings a verdict rests on.

A GPU reading is valid only when every GPU its source announces is reported, once, and no other;
each utilization is a finite 0-100 %; memory and power, where read, are finite, non-negative and
no more than the total the source gives; names hold no control characters. A reading that is not
is missing data: the reason says which GPU and which value, with any text the source gave
escaped (``printable``), never echoed raw. A step reading is valid when it is a whole number
from 0 up.

``walk`` takes the readings back from the newest to the start of the window, and stops at the
first one it cannot use (invalid, a gap longer than the policy allows, times that do not
increase), so a verdict rests on an unbroken run of valid readings or on none.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._redact import printable


@dataclass(frozen=True)
class GpuValue:
    """One GPU in one reading; memory and power are ``None`` where the source does not read
    them."""

    gpu: str  # "0", or "node/0" from a node's `stoker watch`
    util_pct: float
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_w: float | None = None
    name: str = ""  # the model, as the source gives it


@dataclass(frozen=True)
class GpuReading:
    """One reading of the GPUs watched: a value per GPU reported, and the GPUs the source says
    it has (``announced``); ``values`` is ``None`` with why there is no data."""

    at: float
    values: tuple[GpuValue, ...] | None
    missing: str = ""
    announced: tuple[str, ...] = ()

    @classmethod
    def of(cls, at: float, util: dict[str, float]) -> GpuReading:
        """A reading that announces exactly the GPUs in ``util`` (percent by GPU)."""
        return cls(at, tuple(GpuValue(g, u) for g, u in util.items()), announced=tuple(util))

    @property
    def util(self) -> dict[str, float]:
        return {v.gpu: v.util_pct for v in self.values or ()}


@dataclass(frozen=True)
class StepReading:
    """One reading of the training step count; ``None`` with why there is none."""

    at: float
    step: int | None
    missing: str = ""


@dataclass(frozen=True)
class NodeReading:
    """One look at the node's health marker (``stoker.node_markers``): ``unhealthy`` holds the
    reason (and since when) while the node set-up marks it unhealthy, "" while it does not."""

    at: float
    unhealthy: str = ""


MAX_GPUS = 4096  # more announced than any job has is a garbled count, not a cluster


def text(value: Any) -> str:
    """Source-provided text as the guard shows it: on one line, control characters escaped."""
    return printable(str(value), lines=False)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _n(value: Any) -> str:
    """A value as a reason shows it: -1, 101, inf, nan; anything else as its repr, escaped."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return text(repr(value))


def _value_problem(v: GpuValue) -> str:
    if text(v.name) != v.name:
        return f"its name '{text(v.name)}' holds control characters"
    if not _number(v.util_pct) or not 0 <= v.util_pct <= 100:
        return f"utilization {_n(v.util_pct)} % is not a number from 0 to 100"
    total = v.memory_total_bytes
    if total is not None and (not _number(total) or total <= 0):
        return f"memory total {_n(total)} bytes is not a size above 0"
    used = v.memory_used_bytes
    if used is not None and (not _number(used) or used < 0):
        return f"memory used {_n(used)} bytes is not a size from 0 up"
    if used is not None and total is not None and used > total:
        return f"memory used {used:.0f} bytes is more than its total {total:.0f}"
    if v.power_w is not None and (not _number(v.power_w) or v.power_w < 0):
        return f"power {_n(v.power_w)} W is not a figure from 0 up"
    return ""


def gpu_problem(r: GpuReading) -> str:
    """Why ``r`` is not complete, valid evidence; "" when it is."""
    if r.values is None:
        return f"no GPU data: {text(r.missing or 'unknown why')}"
    if not r.announced:
        return "no GPU data: the source announced no GPU"
    announced = Counter(r.announced)
    twice = [g for g, n in announced.items() if n > 1]
    if twice:
        return f"GPU {text(twice[0])} announced twice"
    reported = Counter(v.gpu for v in r.values)
    twice = [g for g, n in reported.items() if n > 1]
    if twice:
        return f"GPU {text(twice[0])} reported twice"
    extra = [g for g in reported if g not in announced]
    if extra:
        return f"GPU {text(extra[0])} reported but not announced ({len(announced)} announced)"
    absent = [g for g in r.announced if g not in reported]
    if absent:
        names = ", ".join(text(g) for g in absent[:4]) + (", ..." if len(absent) > 4 else "")
        return f"{len(announced)} GPU(s) announced, {len(reported)} reported: GPU {names} missing"
    for v in r.values:
        if text(v.gpu) != v.gpu:
            return f"GPU '{text(v.gpu)}': its name holds control characters"
        bad = _value_problem(v)
        if bad:
            return f"GPU {text(v.gpu)}: {bad}"
    return ""


def step_problem(r: StepReading) -> str:
    if r.step is None:
        return f"no step data: {text(r.missing or 'unknown why')}"
    if not isinstance(r.step, int) or isinstance(r.step, bool) or r.step < 0:
        return f"step {text(repr(r.step))} is not a whole number from 0 up"
    return ""


def walk(
    readings: Sequence[Any],
    problem: Callable[[Any], str],
    stop: Callable[[Any], bool],
    *,
    gap_s: float,
    start: float,
    now: float,
) -> tuple[list[Any], Any | None, str]:
    """The valid readings from the newest back to the first at or before ``start`` (newest
    first), the reading ``stop`` picked (a busy one) if the walk met one first, and why the
    walk ended short of ``start`` ("" when it ran out of readings or met ``stop``)."""
    run: list[Any] = []
    newer: Any = None
    for r in reversed(readings):
        if newer is not None:
            if newer.at <= start:
                break
            if not (_number(r.at) and r.at < newer.at):
                return run, None, f"the reading times do not increase ({r.at!r}, then {newer.at!r})"
            if newer.at - r.at > gap_s:
                return (
                    run,
                    None,
                    (
                        f"no reading for {_dur(newer.at - r.at)} "
                        f"(from {_dur(now - r.at)} to {_dur(now - newer.at)} ago)"
                    ),
                )
        bad = problem(r)
        if bad:
            return run, None, f"{bad} ({_dur(now - r.at)} ago)"
        if stop(r):
            return run, r, ""
        run.append(r)
        newer = r
    return run, None, ""


def gpu_samples(run: Sequence[GpuReading]) -> list[dict[str, Any]]:
    """The readings a verdict rests on (oldest first): time and utilization % per GPU."""
    return [{"at": r.at, "util_pct": r.util} for r in run]


def summary(run: Sequence[Any]) -> dict[str, Any]:
    """Count and span of the readings a verdict rests on (oldest first), and the largest gap."""
    if not run:
        return {"count": 0}
    gaps = [b.at - a.at for a, b in zip(run, run[1:], strict=False)]
    return {
        "count": len(run),
        "first_at": run[0].at,
        "last_at": run[-1].at,
        "span_s": run[-1].at - run[0].at,
        "max_gap_s": max(gaps, default=0.0),
    }


def _dur(seconds: float) -> str:
    from ..units import format_duration

    return format_duration(seconds)
