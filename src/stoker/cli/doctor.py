"""``stoker doctor``: check that this node is fit for the job; exit 1 when a check fails."""

from __future__ import annotations

from typing import Annotated

import typer

from ._output import command, emit_json, stdout
from ._tables import Column, print_fitted
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
    from rich.text import Text

    from ..measure.doctor import IMDS_URL
    from ..measure.doctor import doctor as run_doctor

    report = run_doctor(vm, imds_url=imds_url or IMDS_URL, catalog=catalog or ())
    if json_out:
        emit_json(report.to_dict())
    else:
        held = f"{report.vm} (from {report.vm_source})" if report.vm else "VM size unknown"
        # At 80 columns what was expected goes first, then what was found: the check, its
        # status and what to do always stay (`--json` has every field).
        columns = [
            Column("check"),
            Column("expected", 2),
            Column("found", 1),
            Column("status"),
            Column("what to do"),
        ]
        rows = [
            [
                Text(c.check),
                Text(c.expected),
                Text(c.found),
                Text(c.status, style=_STYLE[c.status]),
                Text(c.fix),
            ]
            for c in report.checks
        ]
        print_fitted(
            stdout, columns, rows, title=f"stoker doctor: {held}", dropped_hint="see --json"
        )
        counts = ", ".join(f"{k} {status}" for status, k in report.counts().items())
        verdict = "fit" if report.ok else "NOT fit: fix the failed checks"
        stdout.print(f"{counts}: node {verdict}", highlight=False)
    if not report.ok:
        raise typer.Exit(1)
