"""The report's inputs, read and checked: a plan (a job spec, plan JSON, a Plan or its dict), a
simulation (``stoker.simulation/1``) and measured records (``stoker.measured/1``). Each bad input
is one ReportError line naming the file and the key."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ._measured import Measured, _read_json, parse_measured, read_measured

PLAN_SCHEMA = "stoker.plan/1"
SIMULATION_KIND = "stoker.simulation/1"

PathLike = str | os.PathLike[str]


def load_plan(plan: Any) -> dict[str, Any]:
    """A plan's JSON dict from a job spec (``.toml``), ``stoker plan --json`` output, a Plan, or
    its dict."""
    if hasattr(plan, "to_dict"):
        plan = plan.to_dict()
    if isinstance(plan, dict):
        return _check_plan(plan, "the plan")
    p = Path(plan)
    if p.suffix.lower() == ".toml":
        from ..plan import plan_job

        return plan_job(p).to_dict()
    doc = _read_json(p, "plan")
    if isinstance(doc, list):
        raise ReportError(f"{p}: a list of plans (stoker plan --compare); give one plan")
    return _check_plan(doc, str(p))


def _check_plan(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise ReportError(f"{where}: not a plan (schema should be {PLAN_SCHEMA!r}); give a job "
                          "spec (.toml) or the output of stoker plan --json")
    for key in ("step", "data", "checkpoints", "cost"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ReportError(f"{where}: {key} should be an object (docs/plan-json.md)")
    return doc


def load_simulation(sim: Any) -> dict[str, Any]:
    """A simulation's JSON dict from a file, a result object with ``to_dict()``, or a dict."""
    where = "the simulation"
    if hasattr(sim, "to_dict"):
        sim = sim.to_dict()
    if not isinstance(sim, dict):
        where = str(sim)
        sim = _read_json(Path(sim), "simulation")
    if not isinstance(sim, dict) or sim.get("kind") != SIMULATION_KIND:
        raise ReportError(f"{where}: not a simulation (kind should be {SIMULATION_KIND!r}); give "
                          "the output of stoker simulate --json")
    for key in ("goodput", "gpu_busy", "lost_hours"):
        if sim.get(key) is not None and not isinstance(sim[key], dict):
            raise ReportError(f"{where}: {key} should be an object of p5, p50, p95")
    for key in ("timeline", "plan_misses"):
        if sim.get(key) is not None and not isinstance(sim[key], list):
            raise ReportError(f"{where}: {key} should be a list")
    return sim


def load_measured(records: Any) -> list[Measured]:
    """Measured records from files, Measured objects or their dicts (one or a list)."""
    if records is None:
        return []
    if isinstance(records, str | os.PathLike | Measured | dict):
        records = [records]
    out = []
    for r in records:
        if isinstance(r, Measured):
            out.append(r)
        elif isinstance(r, dict):
            out.append(parse_measured(r))
        else:
            out.append(read_measured(r))
    return out
