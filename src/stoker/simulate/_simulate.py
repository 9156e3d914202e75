"""``simulate()``: the Python twin of ``stoker simulate``: plan the spec, then run it N times."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..catalog import Catalog, load_catalog
from ..errors import SpecError
from ..plan import JobSpec, Plan, parse_spec, plan_job
from ._checks import FAILURES_MAX, check_arguments, check_duration, check_knobs, check_size
from ._engine import TooManyFailures, run_once
from ._inputs import build_inputs
from ._knobs import SimulateKnobs, parse_knobs, read_spec_file, split_spec
from ._result import Simulation, summarize
from ._save import check_out
from ._stragglers import Stragglers

Progress = Callable[[str, int, int], None]


def load_job(
    spec: str | Path | JobSpec | dict[str, Any], knobs: dict[str, Any] | None = None
) -> tuple[JobSpec, SimulateKnobs, str]:
    """(the plan's spec, the ``[simulate]`` knobs with ``knobs`` laid over them, a name)."""
    check_knobs(knobs)
    if isinstance(spec, JobSpec):
        base: dict[str, Any] = {}
        job, source = spec, spec.name
    else:
        if isinstance(spec, dict):
            data, source = spec, "<spec>"
        elif not isinstance(spec, str | Path):
            raise SpecError(
                f"spec: give a TOML path, a dict or a JobSpec (got {type(spec).__name__})"
            )
        else:
            data, source = read_spec_file(spec), str(spec)
        rest, _ = split_spec(data, source)
        base = data.get("simulate") or {}
        if not isinstance(base, dict):
            parse_knobs(base, source)  # says what is wrong with it
        job = parse_spec(rest, source=source)
    return job, parse_knobs({**base, **(knobs or {})}, source), source


def simulate(
    spec: str | Path | JobSpec | dict[str, Any],
    runs: int = 100,
    seed: int = 0,
    *,
    days: float | None = None,
    knobs: dict[str, Any] | None = None,
    catalog: Catalog | str | Path | Iterable[str | Path] = (),
    plan: Plan | None = None,
    progress: Progress | None = None,
    out: str | Path | None = None,
) -> Simulation:
    """Simulate ``spec`` ``runs`` times from ``seed`` and compare it with the closed-form plan.

    ``spec`` is a TOML path (its ``[simulate]`` table holds the knobs), a dict or a JobSpec;
    ``knobs`` overrides that table (e.g. ``{"stragglers": "none"}``); ``days`` is the wall
    clock simulated (default: the plan's). ``progress(what, done, total)`` is called per run.
    ``out``: also write the JSON there (its folder is checked first; written whole or not at
    all).
    """
    check_arguments(runs, seed, days)
    if isinstance(catalog, str | Path):
        catalog = [catalog]
    elif not isinstance(catalog, Catalog):
        catalog = list(catalog)  # read twice below: a generator would be empty the second time
    if out is not None:
        check_out(out, [spec, *(() if isinstance(catalog, Catalog) else catalog)])
    job, kn, source = load_job(spec, knobs)
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    if job.workload.kind not in ("pretrain", "fine-tune"):
        raise SpecError(
            f"{source}: workload.kind = {job.workload.kind!r}: only training jobs (pretrain, "
            "fine-tune) have steps, saves and restarts to simulate"
        )
    plan = plan or plan_job(job, cat)
    if plan.checkpoints is None or plan.run is None:
        raise SpecError(f"{source}: the plan has no checkpoints or run to simulate")
    duration = days * 86400 if days is not None else plan.run.wall_s
    check_duration(source, duration, given=days is not None)
    inp = build_inputs(plan, job, cat, kn, duration)
    check_size(source, inp, runs, given=days is not None)
    straggle = Stragglers(kn.stragglers, kn.straggler_cv, plan.gpus, inp.compute_s)
    tallies = []
    start = time.perf_counter()
    budget = max(1000, 2 * FAILURES_MAX // runs)  # twice the mean check_size allows
    for i in range(runs):
        rng = np.random.default_rng([seed, i])
        try:
            tallies.append(run_once(inp, straggle, rng, timeline=i == 0, max_failures=budget))
        except TooManyFailures as exc:
            raise SpecError(
                f"{source}: run {i + 1} passed {exc} (failure_shape = {kn.failure_shape:g}; "
                "below 1 a swapped VM's new parts fail sooner still): too many to simulate; "
                "give a failure_shape nearer 1, or fewer runs (--runs) or days (--days)"
            ) from None
        if progress:
            progress(f"run {i + 1} of {runs}", i + 1, runs)
    seconds = time.perf_counter() - start
    name = Path(source).name if source != "<spec>" else job.name
    sim = summarize(name, inp, tallies, seed, seconds, straggle.mean_s)
    if out is not None:
        sim.save(out)
    return sim
