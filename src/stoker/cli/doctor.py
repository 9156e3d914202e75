"""``stoker doctor``: check that this node is fit for the job; exit 1 when a check fails."""

from __future__ import annotations

from typing import Annotated

import typer

from ._output import command, emit_json, stdout
from .plan import CatalogOpt

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


@command
def doctor(
    vm: Annotated[
        str | None,
        typer.Option(
            "--vm",
            help="The VM size this node should be, e.g. ND96isr_H100_v5 (default: what IMDS "
            "reports). With it, missing GPUs or InfiniBand fail instead of being skipped.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    imds_url: Annotated[
        str | None,
        typer.Option(
            "--imds-url", help="Instance Metadata Service URL (default: Azure's, 169.254.169.254)."
        ),
    ] = None,
    catalog: CatalogOpt = None,
) -> None:
    """Check GPUs, InfiniBand, GPUDirect RDMA, NCCL settings, NVMe and the VM's placement."""
    from rich.table import Table
    from rich.text import Text

    from ..measure.doctor import IMDS_URL
    from ..measure.doctor import doctor as run_doctor

    report = run_doctor(vm, imds_url=imds_url or IMDS_URL, catalog=catalog or ())
    if json_out:
        emit_json(report.to_dict())
    else:
        held = f"{report.vm} (from {report.vm_source})" if report.vm else "VM size unknown"
        table = Table(title=f"stoker doctor: {held}", title_justify="left")
        for col in ("check", "expected", "found", "status", "what to do"):
            # fold, not ellipsis: a path or a command cut short is no use to anyone
            table.add_column(col, no_wrap=col in ("check", "status"), overflow="fold")
        for c in report.checks:
            status = Text(c.status, style=_STYLE[c.status])
            table.add_row(Text(c.check), Text(c.expected), Text(c.found), status, Text(c.fix))
        stdout.print(table)
        counts = ", ".join(f"{k} {status}" for status, k in report.counts().items())
        verdict = "fit" if report.ok else "NOT fit: fix the failed checks"
        stdout.print(f"{counts}: node {verdict}", highlight=False)
    if not report.ok:
        raise typer.Exit(1)
