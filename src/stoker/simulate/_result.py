"""The simulation's result: distributions over runs, time lost by cause, what the plan misses.

``Simulation.to_dict()`` is the JSON schema ``stoker.simulation/1`` (docs/simulate.md).
Fractions are 0-1; hours are wall-clock hours of the whole job; ``goodput_points`` are
percentage points of goodput, the mean over runs (positive: the plan is that much too hopeful).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..units import format_duration
from ._engine import CAUSES, Tally
from ._inputs import Inputs

KIND = "stoker.simulation/1"
# Smaller differences from the plan are noise at 100 runs, not an effect.
MISS_POINTS = 0.05


def spread(values: list[float]) -> dict[str, float]:
    p5, p50, p95 = np.percentile(np.asarray(values, dtype=float), [5, 50, 95])
    return {"p5": float(p5), "p50": float(p50), "p95": float(p95)}


@dataclass
class Simulation:
    spec: str
    gpus: int
    days: float
    runs: int
    seed: int
    goodput: dict[str, float]
    gpu_busy: dict[str, float]
    lost_hours: dict[str, dict[str, float]]
    timeline: list[dict[str, Any]]
    plan_misses: list[dict[str, Any]]
    events_per_second: float
    failures: dict[str, float]
    knobs: dict[str, Any]
    events: int = 0
    simpy_events: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def save(self, path: str | Path) -> None:
        """Write ``to_dict()`` to ``path`` as JSON, whole or not at all (``--out``)."""
        from ._save import write_json

        write_json(path, self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "spec": self.spec,
            "gpus": self.gpus,
            "days": self.days,
            "runs": self.runs,
            "seed": self.seed,
            "goodput": self.goodput,
            "gpu_busy": self.gpu_busy,
            "lost_hours": self.lost_hours,
            "timeline": self.timeline,
            "plan_misses": self.plan_misses,
            "events_per_second": self.events_per_second,
            "failures": self.failures,
            "knobs": self.knobs,
            "events": self.events,
            "simpy_events": self.simpy_events,
            "seconds": self.seconds,
            "notes": self.notes,
        }


def summarize(
    name: str, inp: Inputs, tallies: list[Tally], seed: int, seconds: float, stragglers_s: float
) -> Simulation:
    wall = inp.duration_s
    goodput = [t.useful_s / wall for t in tallies]
    busy = [t.useful_s / inp.base_step_s * inp.compute_s / wall for t in tallies]
    events = sum(t.events for t in tallies)
    expected = wall / inp.job_mtbf_s
    return Simulation(
        spec=name,
        gpus=inp.gpus,
        days=wall / 86400,
        runs=len(tallies),
        seed=seed,
        goodput={**spread(goodput), "plan": inp.plan_goodput},
        gpu_busy={**spread(busy), "plan": inp.plan_gpu_busy},
        lost_hours={c: spread([t.lost_s[c] / 3600 for t in tallies]) for c in CAUSES},
        timeline=tallies[0].timeline or [],
        plan_misses=_misses(inp, tallies, expected, stragglers_s),
        events_per_second=events / seconds if seconds > 0 else 0.0,
        failures={**spread([float(t.failures) for t in tallies]), "plan": expected},
        knobs=inp.knobs.model_dump(),
        events=events,
        simpy_events=sum(t.simpy_events for t in tallies),
        seconds=seconds,
        notes=inp.notes,
    )


def _share(tallies: list[Tally], wall: float, *causes: str) -> float:
    """The mean share of the wall clock lost to ``causes``: an expectation, as the plan's terms
    are (a median of a rare failure's cost is 0)."""
    return float(np.mean([sum(t.lost_s[c] for c in causes) / wall for t in tallies]))


def _misses(inp: Inputs, tallies: list[Tally], expected: float, stragglers_s: float) -> list[dict]:
    k, wall = inp.knobs, inp.duration_s
    fails = float(np.mean([t.failures for t in tallies]))
    shape = (
        f"Weibull shape {k.failure_shape:g}: new parts fail sooner"
        if k.failure_shape != 1
        else "exponential, as the plan; failures during restarts, and stretches too short to "
        "finish a save, are what the first-order formula leaves out"
    )
    details = {
        "failures": (
            ("rework", "restart"),
            inp.plan_failure_share,
            f"{fails:.0f} failures a run against the plan's {expected:.0f} ({shape})",
        ),
        "checkpoint_blocking": (
            ("checkpoint",),
            inp.plan_checkpoint_share,
            f"a save every {format_duration(inp.interval_s)} of training, blocking "
            f"{format_duration(inp.blocking_s)}",
        ),
        "stragglers": (
            ("stragglers",),
            0.0,
            f"each step waits for the slowest of {inp.gpus:,} ranks ({k.stragglers}, spread "
            f"{k.straggler_cv:.1%} of compute): {format_duration(stragglers_s)} a step",
        ),
        "restart_contention": (
            ("restart_contention",),
            0.0,
            f"every VM loads the checkpoint at once: +{format_duration(inp.restart_contention_s)} "
            "a restart",
        ),
        "restaging": (
            ("restaging",),
            0.0,
            "a swapped VM stages its shard of the data onto its NVMe before training resumes",
        ),
        "upload_contention": (
            ("upload_contention",),
            0.0,
            f"a save's write and upload share a limit with the data reads: "
            f"{format_duration(inp.upload_stall_per_cycle_s)} of stall a save",
        ),
        "hsm_first_reads": (
            ("hsm_first_reads",),
            0.0,
            "the first epoch reads through Lustre's HSM from Blob",
        ),
    }
    out = []
    for effect, (causes, planned, detail) in details.items():
        points = (_share(tallies, wall, *causes) - planned) * 100
        if abs(points) >= MISS_POINTS:
            out.append({"effect": effect, "goodput_points": points, "detail": detail})
    return sorted(out, key=lambda m: -m["goodput_points"])
