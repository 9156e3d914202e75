"""The report's inputs, read and checked: a plan (a job spec, plan JSON, a Plan or its dict), a
simulation (``stoker.simulation/1``) and measured records (``stoker.measured/1``). Each bad input
is one ReportError line naming the file and the key."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from .._user_files import load_user_json
from ..errors import ReportError
from ..measure.measured import Measured, parse_measured, read_measured

if TYPE_CHECKING:  # (stoker.plan and stoker.simulate take a while to import: only types here)
    from ..plan import Plan, PlanJson
    from ..simulate import Simulation, SimulationJson

PLAN_SCHEMA = "stoker.plan/1"
SIMULATION_KIND = "stoker.simulation/1"

PathLike: TypeAlias = "str | os.PathLike[str]"
PlanInput: TypeAlias = "PathLike | Plan | Mapping[str, Any]"
"""A job spec (``.toml``), ``stoker plan --json`` output (a path), a Plan, or its dict."""
SimulationInput: TypeAlias = "PathLike | Simulation | Mapping[str, Any]"
"""``stoker simulate --json`` output (a path), a Simulation, or its dict."""
MeasuredInput: TypeAlias = "PathLike | Measured | Mapping[str, Any]"
"""A ``stoker.measured/1`` record: a path, a Measured, or its dict."""
MeasuredInputs: TypeAlias = "MeasuredInput | Sequence[MeasuredInput]"


def load_plan(plan: PlanInput) -> PlanJson:
    """A plan's JSON dict from a job spec (``.toml``), ``stoker plan --json`` output, a Plan, or
    its dict."""
    if not isinstance(plan, str | os.PathLike | Mapping):  # a Plan (or its like)
        plan = plan.to_dict()
    if isinstance(plan, Mapping):
        return _check_plan(dict(plan), "the plan")
    p = Path(plan)
    if p.suffix.lower() == ".toml":
        from ..plan import plan_job

        return cast("PlanJson", plan_job(p).to_dict())
    doc = load_user_json(p, "plan", ReportError)
    if isinstance(doc, list):
        raise ReportError(f"{p}: a list of plans (stoker plan --compare); give one plan")
    return _check_plan(doc, str(p))


def _check_plan(doc: Any, where: str) -> PlanJson:
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise ReportError(
            f"{where}: not a plan (schema should be {PLAN_SCHEMA!r}); give a job "
            "spec (.toml) or the output of stoker plan --json"
        )
    for key in ("step", "data", "checkpoints", "cost", "run", "inference"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ReportError(f"{where}: {key} should be an object (docs/plan-json.md)")
    shapes = [
        ("warnings", doc.get("warnings"), list),
        ("data.chosen", (doc.get("data") or {}).get("chosen"), dict),
        ("data.options", (doc.get("data") or {}).get("options"), list),
        ("cost.items", (doc.get("cost") or {}).get("items"), list),
        ("cost.unknown", (doc.get("cost") or {}).get("unknown"), list),
    ]
    for key, value, kind in shapes:
        if value is not None and not isinstance(value, kind):
            what = "a list" if kind is list else "an object"
            raise ReportError(f"{where}: {key} should be {what} (docs/plan-json.md)")
    for key in ("data.options", "cost.items"):
        if any(not isinstance(x, dict) for x in _at(doc, key) or []):
            raise ReportError(f"{where}: every item of {key} should be an object")
    for i, option in enumerate(_at(doc, "data.options") or []):
        if not isinstance(option.get("tier"), str):  # each is drawn by its tier's name
            raise ReportError(f"{where}: data.options[{i}].tier should be the tier's name")
    if any(not isinstance(x, str) for x in _at(doc, "cost.unknown") or []):
        raise ReportError(f"{where}: cost.unknown should be a list of the unpriced items' names")
    _check_figures({k: v for k, v in doc.items() if k != "simulation"}, where, "")  # its own
    return cast("PlanJson", doc)  # (checked above: the keys the report reads have their shape)


# A plan's figures carry their unit in their name; each is a finite number or null (a plan
# edited by hand: "x" or NaN there would draw nonsense or stop a chart midway).
_UNITS = (
    "_s",
    "_usd",
    "_bps",
    "_bytes",
    "_hours",
    "_share",
    "_fraction",
    "_goodput",
    "_au",
    "_utilization",
)


# Daly's optimum and the goodput curve take a square root and divide by these.
_POSITIVE = ("checkpoints.interval_s", "checkpoints.optimal_interval_s")
_FIGURE_MAPS = ("inference.cold_start_s",)  # a figure per model source
_TEXT = ("tier", "name", "item", "kind", "region", "vm_size")  # drawn as labels


def _check_figures(doc: Any, where: str, path: str) -> None:
    if isinstance(doc, list):
        for i, x in enumerate(doc):
            _check_figures(x, where, f"{path}[{i}]")
    elif isinstance(doc, dict):
        for k, v in doc.items():
            key = f"{path}.{k}" if path else str(k)
            figure = str(k).endswith(_UNITS) or k in ("usd", "hours")
            if k in _TEXT and v is not None and not isinstance(v, str):
                raise ReportError(f"{where}: {key} should be text, not {v!r:.40}")
            if isinstance(v, list | dict) and (not figure or key in _FIGURE_MAPS):
                _check_figures(v, where, key)
            elif figure and v is not None and not _figure(v, key in _POSITIVE):
                least = "> 0 " if key in _POSITIVE else ""
                raise ReportError(
                    f"{where}: {key} should be a finite number {least}or null, "
                    f"not {v!r:.40}; give the output of stoker plan --json"
                )


def _figure(v: Any, positive: bool) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    finite = abs(v) < 1e308 if isinstance(v, int) else math.isfinite(v)
    return finite and (v > 0 or not positive)


def _at(doc: dict[str, Any], dotted: str) -> Any:
    a, b = dotted.split(".")
    return (doc.get(a) or {}).get(b)


def load_simulation(simulation: SimulationInput) -> SimulationJson:
    """A simulation's JSON dict from a file, a result object with ``to_dict()``, or a dict."""
    where = "the simulation"
    if not isinstance(simulation, str | os.PathLike | Mapping):  # a Simulation (or its like)
        simulation = simulation.to_dict()
    if isinstance(simulation, Mapping):
        sim: Any = dict(simulation)
    else:
        where = str(simulation)
        sim = load_user_json(Path(simulation), "simulation", ReportError)
    if not isinstance(sim, dict) or sim.get("kind") != SIMULATION_KIND:
        raise ReportError(
            f"{where}: not a simulation (kind should be {SIMULATION_KIND!r}); give "
            "the output of stoker simulate --json"
        )
    for key in ("goodput", "gpu_busy", "lost_hours"):
        if sim.get(key) is not None and not isinstance(sim[key], dict):
            raise ReportError(f"{where}: {key} should be an object of p5, p50, p95")
    for key in ("timeline", "plan_misses"):
        if sim.get(key) is not None and not isinstance(sim[key], list):
            raise ReportError(f"{where}: {key} should be a list")
    return cast("SimulationJson", sim)


def load_measured(records: MeasuredInputs | None) -> list[Measured]:
    """Measured records from files, Measured objects or their dicts (one or a list)."""
    if records is None:
        return []
    if isinstance(records, str | os.PathLike | Measured | Mapping):
        records = [records]
    out = []
    for r in records:
        if isinstance(r, Measured):
            out.append(r)
        elif isinstance(r, Mapping):
            out.append(parse_measured(dict(r)))
        else:
            out.append(read_measured(r))
    return out
