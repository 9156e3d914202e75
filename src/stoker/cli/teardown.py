"""``stoker teardown DEPLOYMENT``: stop the scale sets, archive Lustre to Blob, wait, delete the
file system, keep Blob; only resources carrying the deployment's ``stoker-deployment-id``. A dry
run (the default without ``--yes``) names the subscription and group, lists the steps, what each
saves per hour and, when Azure answers, each resource's live state and whether its tag matches;
``--expired`` lists deployments past their ``teardown-after`` tag.

Exit codes: 0 done (or listed), 1 the archive failed or was cancelled (the file system is left
in place), 2 anything else that stopped it: resources not provably the deployment's, a file
system still in use, Azure errors (a re-run resumes)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from ._output import command, emit_json, stderr, stdout

_STYLE = {"done": "green", "already": "green", "kept": "cyan", "planned": "yellow",
          "failed": "bold red"}  # fmt: skip


@command
def teardown(
    deployment: Annotated[
        str | None,
        typer.Argument(
            help="The folder `stoker provision --out` wrote, a resource group name, or "
            "/subscriptions/SUB/resourceGroups/RG.",
            show_default=False,
        ),
    ] = None,
    resource_group: Annotated[
        str | None,
        typer.Option("--resource-group", "-g", help="Where the folder was deployed."),
    ] = None,
    subscription: Annotated[
        str | None, typer.Option(help="Subscription id (default: $AZURE_SUBSCRIPTION_ID).")
    ] = None,
    deployment_id: Annotated[
        str | None,
        typer.Option(
            "--deployment-id",
            help="Which deployment, where the group holds several (its stoker-deployment-id).",
        ),
    ] = None,
    skip_foreign: Annotated[
        bool,
        typer.Option(
            "--skip-foreign",
            help="Leave resources of the template's names that are not this deployment's "
            "alone and tear down the rest (without: refuse).",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do it (without: a dry run).")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the steps and savings; change nothing.")
    ] = False,
    delete_scale_sets: Annotated[
        bool, typer.Option(help="Delete the scale sets instead of deallocating them.")
    ] = False,
    no_archive: Annotated[
        bool,
        typer.Option("--no-archive", help="Delete Lustre without archiving (its data is lost)."),
    ] = False,
    expired_only: Annotated[
        bool,
        typer.Option("--expired", help="List resource groups past their teardown-after tag."),
    ] = False,
    archive_timeout: Annotated[
        str, typer.Option(help="How long to wait for the archive, e.g. 12h.")
    ] = "24h",
    poll: Annotated[float, typer.Option(help="Seconds between status reads.")] = 30.0,
    arm_endpoint: Annotated[
        str | None,
        typer.Option(help="Azure Resource Manager URL (sovereign clouds; default Azure's)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Archive Lustre to Blob, then delete it; deallocate the scale sets; keep Blob."""
    from ..errors import ArchiveError, StokerError, TeardownError
    from ..operate import expired, teardown
    from ..units import parse_duration

    if expired_only:
        if deployment or yes:
            raise StokerError("--expired lists only: give it no DEPLOYMENT and no --yes")
        found = expired(subscription=subscription, base_url=arm_endpoint)
        _show_expired(found, json_out)
        return
    if deployment is None:
        raise StokerError("give a DEPLOYMENT (a provision folder, a resource group) or --expired")
    if yes and dry_run:
        raise StokerError("--yes and --dry-run contradict each other: pick one")
    if not 0.01 <= poll <= 3600:
        raise StokerError(f"--poll {poll}: give seconds from 0.01 to 3600")
    progress = None if json_out else _Progress()
    try:
        report = teardown(
            deployment,
            resource_group=resource_group,
            subscription=subscription,
            deployment_id=deployment_id,
            skip_foreign=skip_foreign,
            dry_run=not yes,
            delete_scale_sets=delete_scale_sets,
            archive=not no_archive,
            base_url=arm_endpoint,
            polling_interval_s=poll,
            archive_timeout_s=parse_duration(archive_timeout),
            progress=progress,
        )
    except TeardownError as exc:
        partial = getattr(exc, "report", None)
        if partial is not None and json_out:
            emit_json(partial.to_dict())
        elif partial is not None:
            _show(partial)
        if isinstance(exc, ArchiveError):
            stderr.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        raise
    if json_out:
        emit_json(report.to_dict())
    else:
        _show(report)


class _Progress:
    """One line on stderr per step as it starts and ends, and the archive's percentage."""

    def __init__(self) -> None:
        self.last = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event["event"] == "archive":
            line = f"archive {event['name']}: {event['state']} {event.get('percent') or 0} %"
            if line == self.last:
                return
        elif event["status"] == "checking":
            line = f"{event['action']} {event['name']} ..."
        else:
            detail = f" ({event['detail']})" if event.get("detail") else ""
            line = f"{event['action']} {event['name']}: {event['status']}{detail}"
        self.last = line
        stderr.print(escape(line), highlight=False)


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def _show(report: Any) -> None:
    from rich.table import Table

    mode = "dry run" if report.dry_run else "teardown"
    verb = "would act on" if report.dry_run else "acting on"
    who = f", deployment {report.deployment_id}" if report.deployment_id else ""
    stdout.print(f"{verb}: {escape(report.where())}{escape(who)}", highlight=False, soft_wrap=True)
    table = Table(title=f"stoker {mode}: {escape(report.deployment)}", title_justify="left")
    for col in ("#", "step", "resource", "saves /h", "status", "why"):
        right, keep = col in ("#", "saves /h"), col in ("#", "step", "saves /h", "status")
        table.add_column(col, justify="right" if right else "left", overflow="fold", no_wrap=keep)
    for i, s in enumerate(report.steps, 1):
        style = _STYLE.get(s.status, "")
        why = s.why + (f"; {s.detail}" if s.detail else "")
        status = f"[{style}]{s.status}[/]" if style else s.status
        table.add_row(str(i), s.action, escape(f"{s.resource.label} {s.resource.name}"),
                      _money(s.saves_usd_per_hour), status, escape(why))  # fmt: skip
    stdout.print(table)
    _show_checked(report)
    if report.left_alone:
        alone = ", ".join(f"{r.label} {r.name}" for r in report.left_alone)
        stdout.print(f"left as is: {escape(alone)}", highlight=False, soft_wrap=True)
    per_h = report.saves_usd_per_hour
    saves = f"saves {_money(per_h)}/h ({_money(per_h * 24)}/day)"
    if report.unknown_cost:
        saves += f"; not counted (cost unknown): {', '.join(report.unknown_cost)}"
    stdout.print(saves, highlight=False)
    still = (
        f"still billed after it: {_money(report.still_usd_per_hour)}/h (kept storage, left as is)"
    )
    if report.still_unknown:
        still += f"; cost unknown: {', '.join(report.still_unknown)}"
    stdout.print(still, highlight=False)
    if report.note:
        stdout.print(f"{escape(report.note)}.", highlight=False, soft_wrap=True)
    if report.dry_run:
        how = "--yes" if report.group else "--yes (and -g RG if stoker-deployment.json lacks it)"
        stdout.print(f"dry run: nothing was changed; add {how} to do it", highlight=False)


def _show_checked(report: Any) -> None:
    """Per resource, its live state and whether its tag matches (or that nothing was checked)."""
    if not report.queried_azure:
        stdout.print("ownership and live state: NOT checked (Azure was not queried)",
                     highlight=False)  # fmt: skip
        return
    tag = {True: "tag matches", False: "tag does not match", None: "tag not checked"}
    seen = set()
    stdout.print("checked in Azure:", highlight=False)
    for s in report.steps:
        key = (s.resource.kind, s.resource.name)
        if key in seen:
            continue
        seen.add(key)
        live = s.live or ("not found" if s.resource.id is None else "not read")
        owner = "" if live in ("gone", "not found") else f"; {tag[s.owned]}"
        line = f"  {s.resource.label} {s.resource.name}: {live}{owner}"
        stdout.print(escape(line), highlight=False, soft_wrap=True)
    for f in report.foreign:
        line = f"  {f.resource.label} {f.resource.name}: not stoker's ({f.why}): left alone"
        stdout.print(escape(line), highlight=False, soft_wrap=True)


def _show_expired(found: list[Any], json_out: bool) -> None:
    if json_out:
        emit_json({"expired": [e.to_dict() for e in found]})
        return
    if not found:
        stdout.print("no deployment is past its teardown-after tag")
        return
    from rich.table import Table

    from ..units import format_duration

    table = Table(title="past their teardown-after tag", title_justify="left")
    for col in ("resource group", "plan", "teardown-after", "overdue", "$/h", "resources"):
        table.add_column(col, overflow="fold")
    for e in found:
        table.add_row(escape(e.group), escape(e.plan or "-"), e.teardown_after.isoformat(),
                      format_duration(e.overdue_s), _money(e.usd_per_hour),
                      escape(", ".join(e.resources) or "(the group's own tag)"))  # fmt: skip
    stdout.print(table)
    stdout.print("tear one down: stoker teardown RG --yes", highlight=False)
