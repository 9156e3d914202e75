"""``stoker simulate JOB.toml``: the run event by event, beside the closed-form plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._bars import steps_bar
from ._output import command, emit_json, stderr, stdout


@command
def simulate(
    spec: Annotated[
        Path, typer.Argument(help="Job spec (TOML); its [simulate] table sets the knobs.")
    ],
    runs: Annotated[
        int, typer.Option("--runs", "-n", help="Runs to simulate, each its own seed.")
    ] = 100,
    seed: Annotated[int, typer.Option(help="First seed; run i uses (seed, i).")] = 0,
    days: Annotated[
        float | None, typer.Option(help="Wall clock to simulate, days (default: the plan's).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON to this file.")
    ] = None,
    catalog: Annotated[
        list[Path] | None,
        typer.Option("--catalog", "-c", help="Catalog file(s) laid over the built-in one."),
    ] = None,
) -> None:
    """Simulate a training run: failures, saves, restarts, stragglers and contention, N times."""
    from ..simulate import simulate as run
    from ..simulate.render import rich_report

    try:
        with steps_bar("simulate", quiet=json_out) as show:
            sim = run(
                spec,
                runs=runs,
                seed=seed,
                days=days,
                catalog=catalog or (),
                progress=show,
                out=out,
            )
    except KeyboardInterrupt:
        kept = f"; {out} is as it was" if out is not None and out.exists() else ""
        stderr.print(f"interrupted: nothing was written{kept}", highlight=False)
        raise typer.Exit(130) from None
    if json_out:
        emit_json(sim.to_dict())
    else:
        stdout.print(rich_report(sim))
