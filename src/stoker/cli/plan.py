"""``stoker plan JOB.toml``: size the interconnect, storage, checkpoints and cost of a job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._output import command, emit_json, emit_text, stdout

CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option("--catalog", "-c", help="Catalog file(s) laid over the built-in one."),
]


@command
def plan(
    specs: Annotated[
        list[Path], typer.Argument(help="Job spec (TOML); two or more with --compare.")
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    markdown_out: Annotated[bool, typer.Option("--markdown", help="Print Markdown.")] = False,
    compare: Annotated[
        bool, typer.Option("--compare", help="Show the specs side by side.")
    ] = False,
    catalog: CatalogOpt = None,
    measured: Annotated[
        Path | None,
        typer.Option(help="JSON of figures measured on the VMs (stoker bench ... --json)."),
    ] = None,
    simulate: Annotated[
        bool,
        typer.Option(
            "--simulate", help="Also simulate the run (stoker simulate) beside the closed form."
        ),
    ] = False,
    runs: Annotated[
        int | None, typer.Option(help="Runs to simulate with --simulate (default 30).")
    ] = None,
    placement_group_limit: Annotated[
        int | None,
        typer.Option(help="VMs per scale set an approved support request allows (at most 300)."),
    ] = None,
) -> None:
    """Plan a job: where the GPU would wait, what to provision, and what it costs."""
    from ..errors import SpecError
    from ..plan import plan_job, render

    if json_out and markdown_out:
        raise SpecError("--json and --markdown: pick one output")
    if len(specs) > 1 and not compare:
        raise SpecError("several specs given: add --compare to show them side by side")
    if compare and len(specs) < 2:
        raise SpecError("--compare needs two or more job specs")
    if runs is not None and not simulate:
        raise SpecError("--runs counts simulated runs: add --simulate, or drop --runs")
    if simulate:
        if compare:
            raise SpecError("--simulate: one job spec at a time, not with --compare")
        return _plan_and_simulate(
            specs[0],
            catalog,
            measured,
            30 if runs is None else runs,
            json_out,
            markdown_out,
            placement_group_limit,
        )
    plans = [
        plan_job(
            path, catalog or (), measured=measured, placement_group_limit=placement_group_limit
        )
        for path in specs
    ]
    if json_out:
        emit_json([p.to_dict() for p in plans] if compare else plans[0].to_dict())
    elif markdown_out:
        emit_text(render.markdown_compare(plans) if compare else render.markdown(plans[0]))
    else:
        stdout.print(render.rich_compare(plans) if compare else render.rich_report(plans[0]))


def _plan_and_simulate(
    spec: Path,
    catalog: list[Path] | None,
    measured: Path | None,
    runs: int,
    json_out: bool,
    markdown_out: bool,
    placement_group_limit: int | None = None,
) -> None:
    """The plan, then the simulation's P5 / P50 / P95 beside its closed-form figures. The
    spec's [simulate] table is the simulation's: the plan is given the spec without it."""
    from ..plan import plan_job, render
    from ..simulate import load_job, simulate
    from ..simulate import render as sim_render
    from ._bars import steps_bar
    from ._output import stderr

    job, _, _ = load_job(spec)
    plan = plan_job(
        job, catalog or (), measured=measured, placement_group_limit=placement_group_limit
    )
    quiet = json_out or markdown_out
    try:
        with steps_bar("simulate", quiet=quiet) as show:
            sim = simulate(spec, runs=runs, catalog=catalog or (), plan=plan, progress=show)
    except KeyboardInterrupt:
        stderr.print("interrupted: nothing was printed; run it again to simulate", highlight=False)
        raise typer.Exit(130) from None
    if json_out:
        emit_json({**plan.to_dict(), "simulation": sim.to_dict()})
    elif markdown_out:
        emit_text(render.markdown(plan) + "\n" + sim_render.markdown(sim))
    else:
        stdout.print(render.rich_report(plan))
        stdout.print(sim_render.rich_report(sim))
