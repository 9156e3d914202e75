"""``stoker preflight DEPLOYMENT|SPEC``: will it deploy? vCPU quota per family and in the
region, the VM size and Lustre SKU in the region and zone, the right to create role
assignments, marketplace terms, ARM's validate and what-if; read-only. Without a subscription
(or with ``--offline``) the catalog's limits only, and a line per check it could not do.

Exit codes: 0 nothing failed, 1 a check failed, 2 bad input (a folder preflight cannot read)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ._output import command, emit_json, stderr, stdout
from .plan import CatalogOpt

_MARK = {"failed": "FAIL", "warning": "WARN", "ok": "ok  ", "unchecked": "skip"}


@command
def preflight(
    deployment: Annotated[
        Path,
        typer.Argument(
            help="The folder `stoker provision --out` wrote, or a job spec (.toml).",
            show_default=False,
        ),
    ],
    subscription: Annotated[
        str | None,
        typer.Option(help="Subscription id (default: the folder's, then $AZURE_SUBSCRIPTION_ID)."),
    ] = None,
    resource_group: Annotated[
        str | None,
        typer.Option("--resource-group", "-g", help="Where it will be deployed (default: its)."),
    ] = None,
    parameter: Annotated[
        list[str] | None,
        typer.Option(
            "--parameter", "-p", help="NAME=VALUE for a template parameter left empty (repeat)."
        ),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Check the catalog's limits only; ask Azure nothing.")
    ] = False,
    arm_endpoint: Annotated[
        str | None,
        typer.Option(help="Azure Resource Manager URL (sovereign clouds; default Azure's)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """Check quota, SKUs, rights, terms and ARM's validation before deploying."""
    from ..operate import parameter_pairs, preflight

    report = preflight(
        deployment,
        subscription=subscription,
        resource_group=resource_group,
        parameters=parameter_pairs(parameter or []),
        offline=offline,
        base_url=arm_endpoint,
        catalog=catalog or (),
        progress=None if json_out else _progress,
    )
    if json_out:
        emit_json(report.to_dict())
    else:
        show(report)
    if not report.ok:
        raise typer.Exit(1)


def _progress(event: dict[str, Any]) -> None:
    if event["status"] == "checking":
        stderr.print(f"checking {event['kind']} ...", highlight=False, markup=False)


def show(report: Any) -> None:
    """The report, one line per check (``provision --check`` prints it too)."""
    where = f"{report.region}, subscription {report.subscription or 'unknown'}, resource group "
    stdout.print(
        f"preflight of {report.deployment}: {where}{report.group or 'unknown'}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    for c in report.checks:
        stdout.print(f"  {_MARK[c.status]} {c.line}", highlight=False, markup=False, soft_wrap=True)
    if report.idle_weekend:
        stdout.print(f"  $ {report.idle_weekend}", highlight=False, markup=False, soft_wrap=True)
    counts = {s: sum(1 for c in report.checks if c.status == s) for s in _MARK}
    verdict = (
        "NOT safe to deploy"
        if counts["failed"]
        else "nothing failed, but not all was checked"
        if counts["unchecked"]
        else "safe to deploy"
    )
    stdout.print(
        f"{verdict}: {counts['failed']} failed, {counts['warning']} to act on, "
        f"{counts['unchecked']} not checked, {counts['ok']} ok "
        f"({report.elapsed_s:.1f} s)",
        highlight=False,
        markup=False,
    )
