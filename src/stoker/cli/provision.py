"""``stoker provision JOB.toml --out DIR``: write the plan as a deployment (ARM template,
cloud-init, CCWS parameters, README with the cost); ``--check`` validates it offline, then
runs ``stoker preflight`` on it (offline without a subscription)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from ._output import command, emit_json, stderr, stdout
from .plan import CatalogOpt


@command
def provision(
    spec: Annotated[Path, typer.Argument(help="Job spec (TOML), as for stoker plan.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the deployment to.")],
    name: Annotated[
        str | None, typer.Option(help="Stem of every resource name (default: the plan's name).")
    ] = None,
    resource_group: Annotated[
        str | None, typer.Option("--resource-group", "-g", help="Default rg-<name>.")
    ] = None,
    address_space: Annotated[
        str, typer.Option(help="The VNet's private IPv4 range.")
    ] = "10.0.0.0/16",
    admin_username: Annotated[str, typer.Option(help="Admin user on the nodes.")] = "azureuser",
    ssh_key: Annotated[
        Path | None,
        typer.Option(help="OpenSSH public key file to put in the parameters (else at deploy)."),
    ] = None,
    teardown_after: Annotated[
        dt.datetime | None,
        typer.Option(help="UTC time for the teardown-after tag (default: the plan's run end)."),
    ] = None,
    install: Annotated[
        str | None,
        typer.Option(help="pip requirement the nodes install stoker from (default: this version)."),
    ] = None,
    access: Annotated[
        str | None,
        typer.Option(help="The way in: bastion, login-vm or none (default: cluster.access)."),
    ] = None,
    blob_access: Annotated[
        str | None,
        typer.Option(
            help="Staging into Blob from outside: firewall-ip, private-endpoint or none "
            "(default: cluster.blob_access)."
        ),
    ] = None,
    deployer_ip: Annotated[
        str | None,
        typer.Option(help="Your public IPv4 address for the firewall rule and the login VM."),
    ] = None,
    placement_group_limit: Annotated[
        int | None,
        typer.Option(help="VMs per scale set an approved support request allows (at most 300)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into --out whatever it holds: overwrite a main.json or README.md stoker "
            "did not write, another deployment's files, and your edits to this one's.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Validate: ARM schemas (strict), CCWS schema or Kubernetes schemas, checkov; "
            "then preflight (quota, SKUs, rights, terms; offline without a subscription).",
        ),
    ] = False,
    target: Annotated[
        str,
        typer.Option(help="vmss (scale sets, cloud-init, CCWS) or aks (AKS + Kubernetes)."),
    ] = "vmss",
    trainer: Annotated[
        str,
        typer.Option(help="aks training: job (an Indexed Job) or pytorchjob (Kubeflow)."),
    ] = "job",
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """Write the plan as infrastructure: main.json + parameters, cloud-init, CCWS, README."""
    from ..provision import money, read_ssh_key
    from ..provision import provision as run

    key = read_ssh_key(ssh_key) if ssh_key else None
    d = run(
        spec,
        out,
        catalog or (),
        name=name,
        resource_group=resource_group,
        address_space=address_space,
        admin_username=admin_username,
        ssh_public_key=key,
        teardown_after=teardown_after,
        access=access,
        blob_access=blob_access,
        deployer_ip=deployer_ip,
        placement_group_limit=placement_group_limit,
        force=force,
        target=target,
        trainer=trainer,
        **({"install": install} if install else {}),
    )
    summary = d.to_dict()
    report = None
    if check and target == "aks":
        from ..provision.aks import check as validate_aks

        report = validate_aks(out)
        summary["check"] = {
            "resources": report.resources,
            "manifests": report.manifests,
            "kubernetes_version": report.kubernetes_version,
            "schema_errors": report.errors,
            "checkov_passed": report.checkov_passed,
            "checkov_failed": report.checkov_failed,
            "checkov_skipped": report.checkov_skipped,
        }
    elif check:
        from ..provision.validate import check as validate

        report = validate(out)
        summary["check"] = {
            "resources": report.resources,
            "schema_errors": report.schema_errors,
            "checkov_passed": report.checkov_passed,
            "checkov_failed": report.checkov_failed,
            "checkov_skipped": report.checkov_skipped,
        }
    pre = None
    if check:  # will it deploy: quota, SKUs, rights, terms (stoker preflight)
        from ..operate import preflight

        pre = preflight(out, catalog=catalog or ())
        summary["preflight"] = pre.to_dict()
    if json_out:
        emit_json(summary)
    else:
        from rich.markup import escape
        from rich.table import Table

        # The plan's name is the user's text: shown as is, never read as rich markup.
        table = Table(
            title=escape(f"stoker provision: {d.layout.plan_name} -> {out}"),
            title_justify="left",
        )
        for col in ("#", "resource", "name", "size", "per hour"):
            table.add_column(col, overflow="fold", justify="right" if col == "per hour" else "left")
        for i, line in enumerate(d.bill.lines, 1):
            table.add_row(str(i), line.resource, line.name, line.size, money(line.per_hour_usd))
        stdout.print(table)
        unknown = f" (priced part; unpriced: {', '.join(d.bill.unknown)})" if d.bill.unknown else ""
        stdout.print(
            f"total per hour {money(d.per_hour_usd)}{unknown}; per idle day "
            f"{money(d.per_hour_usd * 24)}; scale sets deallocated "
            f"{money(d.bill.idle_per_hour_usd * 24)} a day",
            highlight=False,
        )
        stdout.print(
            f"wrote {', '.join(p.name for p in d.files)} in {d.elapsed_s * 1000:.0f} ms; "
            f"deploy and teardown commands: {out / 'README.md'}",
            highlight=False,
        )
        for name in d.kept:
            stdout.print(
                f"kept {name} as you edited it (--force overwrites it with stoker's)",
                highlight=False,
                markup=False,
            )
        if report is not None:
            checkov = (
                "checkov not installed (make checkov)"
                if report.checkov_passed is None
                else f"checkov {report.checkov_passed} passed, {len(report.checkov_failed)} "
                f"failed, {len(report.checkov_skipped)} skipped with a reason"
            )
            found = summary["check"]
            errors = found["schema_errors"]
            k8s = (
                f"{found['manifests']} Kubernetes {found['kubernetes_version']} manifests, "
                if "manifests" in found
                else ""
            )
            stdout.print(
                f"check: {report.resources} ARM resources, {k8s}"
                f"{len(errors)} schema errors; {checkov}",
                highlight=False,
            )
            for line in errors + report.checkov_failed:
                stderr.print(f"  {line}", highlight=False, markup=False)
        if pre is not None:
            from .preflight import show

            show(pre)
    if (report is not None and not report.ok) or (pre is not None and not pre.ok):
        raise typer.Exit(1)
