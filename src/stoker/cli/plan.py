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
    plans = [plan_job(path, catalog or (), measured=measured) for path in specs]
    if json_out:
        emit_json([p.to_dict() for p in plans] if compare else plans[0].to_dict())
    elif markdown_out:
        emit_text(render.markdown_compare(plans) if compare else render.markdown(plans[0]))
    else:
        stdout.print(render.rich_compare(plans) if compare else render.rich_report(plans[0]))
