"""``stoker report --out FILE.html``: plan, simulation and measured runs in one HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._bars import steps_bar
from ._interrupt import interruptible
from ._output import command, emit_json, stdout


@command
def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")],
    plan: Annotated[
        Path | None,
        typer.Option(help="A job spec (TOML) or the output of stoker plan --json."),
    ] = None,
    simulation: Annotated[
        Path | None, typer.Option(help="The output of stoker simulate --json.")
    ] = None,
    measured: Annotated[
        list[Path] | None,
        typer.Option(help="A measured record (--record, save_json); repeatable."),
    ] = None,
    pdf: Annotated[
        Path | None, typer.Option(help="Also write every chart into this PDF, a page each.")
    ] = None,
    png: Annotated[
        Path | None, typer.Option(help="Also write one PNG per chart into this folder.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """One self-contained HTML file (opens offline) of a plan, a simulation and measured runs."""
    from ..report import report as run

    kept = "no report written; a file already at --out is untouched"
    with interruptible(kept=kept), steps_bar("report", quiet=json_out) as show:
        result = run(
            out,
            plan=plan,
            simulation=simulation,
            measured=measured or [],
            pdf=pdf,
            png=png,
            progress=show,
        )
    if json_out:
        emit_json(result.to_dict())
        return
    extra = "".join(f"; {p}" for p in ([result.pdf] if result.pdf else []))
    extra += f"; {len(result.png)} PNG files in {png}" if result.png else ""
    stdout.print(
        f"wrote {result.path} ({result.size_bytes / 1e3:,.0f} kB, {len(result.charts)} charts, "
        f"{result.elapsed_s:.2f} s){extra}",
        highlight=False,
    )
