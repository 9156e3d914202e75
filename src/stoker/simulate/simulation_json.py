"""The JSON a simulation writes (``Simulation.to_dict()``, ``kind = "stoker.simulation/1"``),
typed for what reads it (``stoker report``). docs/simulate.md describes each field.

``total=False`` throughout: a reader takes documents edited by hand or from older stokers and
asks for each key. Fractions are 0-1, hours are wall-clock hours of the whole job. Each class
mirrors what simulate/_result.py writes (tests/test_report_types.py holds them together).
"""

from __future__ import annotations

from typing import Any, TypedDict


class SpreadJson(TypedDict, total=False):
    """A distribution over the simulated runs; ``plan``: the closed-form plan's figure, where
    it has one."""

    p5: float
    p50: float
    p95: float
    plan: float | None


class TimelineEventJson(TypedDict, total=False):
    """One event of the first run (failure, save, restart, ...)."""

    t_hours: float
    event: str
    detail: str


class PlanMissJson(TypedDict, total=False):
    """An effect the closed-form plan leaves out, and what it costs."""

    effect: str
    goodput_points: float  # percentage points of goodput (positive: the plan is too hopeful)
    detail: str


class SimulationJson(TypedDict, total=False):
    """``stoker simulate --json``."""

    kind: str
    spec: str
    gpus: int
    days: float
    runs: int
    seed: int
    goodput: SpreadJson
    gpu_busy: SpreadJson
    lost_hours: dict[str, SpreadJson]  # cause -> hours lost
    timeline: list[TimelineEventJson]
    plan_misses: list[PlanMissJson]
    events_per_second: float
    failures: SpreadJson
    knobs: dict[str, Any]
    events: int
    simpy_events: int
    seconds: float
    notes: list[str]
