"""``plan_job``: the Python twin of ``stoker plan``: read a spec and the catalog, make the Plan."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..catalog import Catalog, load_catalog
from ..errors import SpecError
from .model import make_plan
from .result import Plan
from .shape import unknown_vm_size
from .spec import JobSpec, load_spec, parse_spec, with_placement_group_limit


def plan_job(
    spec: str | Path | JobSpec | dict[str, Any],
    catalog: Catalog | str | Path | Iterable[str | Path] = (),
    *,
    measured: str | Path | None = None,
    placement_group_limit: int | None = None,
) -> Plan:
    """Plan ``spec`` (a TOML path, a parsed JobSpec or a dict) against the built-in catalog laid
    under ``catalog`` override files (one path, a list, or a Catalog already loaded); with
    ``measured``, a file of figures measured on the VMs replaces the catalog's
    (plan/calibrate.py); ``placement_group_limit`` (``--placement-group-limit``) overrides the
    spec's: the VMs per scale set an approved support request allows, at most 300."""
    if isinstance(spec, JobSpec):
        job = spec
    elif isinstance(spec, dict):
        job = parse_spec(spec)
    else:
        job = load_spec(spec)
    job = with_placement_group_limit(job, placement_group_limit)
    if isinstance(catalog, str | Path):  # one override file, not an iterable of characters
        catalog = [catalog]
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    rows: list = []
    if measured is not None:
        from .calibrate import calibrate

        key = cat.vm_key(job.cluster.vm_size)
        if key is None:
            where = f"{spec}: " if isinstance(spec, str | Path) else ""
            raise SpecError(f"{where}cluster.vm_size: {unknown_vm_size(job.cluster.vm_size, cat)}")
        cat, rows = calibrate(cat, key, measured)
    try:
        plan = make_plan(job, cat)
    except SpecError as exc:  # name the file: with --compare there are several
        if isinstance(spec, str | Path):
            raise SpecError(f"{spec}: {exc}") from exc
        raise
    plan.calibration = rows
    plan.warnings += [row.warning for row in rows if row.warning]  # e.g. a CPU (gloo) sweep
    return plan
