"""``stoker checkpoint ls|verify|prune|pull``: the Checkpointer's tiers from a shell."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any

import typer

from ..errors import CheckpointError
from ._output import command, emit_json, stderr, stdout

app = typer.Typer(
    help="Inspect, verify, prune and pull checkpoints written by stoker.Checkpointer.",
    no_args_is_help=True,
)

Fast = Annotated[str, typer.Argument(help="The fast tier folder (local NVMe, Lustre, NetApp).")]
Durable = Annotated[str | None, typer.Option(help="The durable tier, e.g. az://acct/ckpts/run1.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _open(fast: str, durable: str | None, **retention: Any) -> Any:
    from ..checkpoint import Checkpointer

    return Checkpointer(fast, durable, **retention)


@contextmanager
def _progress(total: int | None, label: str, quiet: bool) -> Iterator[Any]:
    """A rich bar fed by the library's (what, bytes) callback; nothing when printing JSON."""
    if quiet:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda what, n: bar.update(task, advance=n, description=f"{label} {what}")


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


@app.command("ls")
@command
def ls(
    fast: Fast,
    durable: Durable = None,
    blob_tier: Annotated[str, typer.Option(help="Blob access tier to price.")] = "hot",
    fast_price: Annotated[
        float | None, typer.Option(help="USD per GB-month of the fast tier, if it is billed.")
    ] = None,
    json_out: Json = False,
) -> None:
    """Every step on each tier (complete or not), and what keeping them costs per month."""
    from ..units import format_bytes

    with _open(fast, durable) as ckpt:
        infos = ckpt.list()
        costs = ckpt.costs(blob_tier=blob_tier, fast_usd_per_gb_month=fast_price)
    if json_out:
        emit_json(
            {
                "checkpoints": [asdict(i) for i in infos],
                "costs": [asdict(c) | {"usd_per_month": c.usd_per_month} for c in costs],
            }
        )
        return
    from rich.table import Table

    table = Table("step", "size", "ranks", "kind", "created", *[c.tier for c in costs])
    for i in infos:
        states = [i.tiers.get(c.tier, "-") for c in costs]
        row = [str(i.step), format_bytes(i.bytes), str(i.world_size or "-"), i.kind or "-"]
        table.add_row(*row, i.created or "-", *states)
    stdout.print(table)
    prices = Table("tier", "where", "kept", "USD/GB-month", "USD/month", "price basis")
    for c in costs:
        per_gb = "-" if c.usd_per_gb_month is None else f"{c.usd_per_gb_month:.4f}"
        prices.add_row(
            c.tier, c.where, format_bytes(c.bytes), per_gb, _money(c.usd_per_month), c.basis
        )
    stdout.print(prices)


@app.command("verify")
@command
def verify(
    fast: Fast,
    durable: Durable = None,
    step: Annotated[int | None, typer.Option(help="Only this step.")] = None,
    json_out: Json = False,
) -> None:
    """Re-hash every file of every committed step on every tier; exit 1 on any mismatch."""
    with _open(fast, durable) as ckpt:
        total = sum(i.bytes for i in ckpt.list() if step is None or i.step == step)
        with _progress(total * len(ckpt.tiers), "verify", json_out) as progress:
            report = ckpt.verify(step, progress)
    if not report.steps:  # a mistyped folder or step must not pass as "ok"
        where = f"step {step} of {fast}" if step is not None else f"{fast}"
        raise CheckpointError(f"{where}: no committed checkpoint to verify; check the path")
    if json_out:
        emit_json(asdict(report) | {"ok": report.ok})
    else:
        for p in report.problems:
            stdout.print(f"[red]{p.tier} step {p.step} {p.file}[/]: {p.what}", highlight=False)
        verdict = "[green]ok[/]" if report.ok else f"[red]{len(report.problems)} problem(s)[/]"
        stdout.print(f"{report.steps} step copies, {report.files} files checked: {verdict}")
    if not report.ok:
        raise typer.Exit(1)


@app.command("prune")
@command
def prune(
    fast: Fast,
    durable: Durable = None,
    keep_last: Annotated[int, typer.Option(help="Keep this many newest steps per tier.")] = 3,
    keep_every: Annotated[
        int | None, typer.Option(help="Also keep every step that is a multiple of this.")
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Say what would go; delete nothing.")] = False,
    json_out: Json = False,
) -> None:
    """Delete what the retention policy does not keep (never the newest complete step), and
    incomplete steps older than the newest complete one."""
    with _open(fast, durable, keep_last=keep_last, keep_every=keep_every) as ckpt:
        gone = ckpt.prune(dry_run=dry_run)
    if json_out:
        emit_json({"dry_run": dry_run, "deleted": gone})
        return
    verb = "would delete" if dry_run else "deleted"
    for tier, steps in gone.items():
        stdout.print(f"{tier}: {verb} {len(steps)} step(s) {steps if steps else ''}")


@app.command("pull")
@command
def pull(
    durable: Annotated[str, typer.Argument(help="The durable tier, e.g. az://acct/ckpts/run1.")],
    fast: Fast,
    step: Annotated[int | None, typer.Option(help="This step (default: the newest).")] = None,
    json_out: Json = False,
) -> None:
    """Bring a checkpoint from the durable tier to the fast tier, verified (a new VM)."""
    with _open(fast, durable) as ckpt:
        with _progress(None, "pull", json_out) as progress:
            got, size = ckpt.pull(step, progress)
    if json_out:
        emit_json({"step": got, "bytes": size, "fast": fast})
    else:
        from ..units import format_bytes

        stdout.print(f"step {got} ({format_bytes(size)}) is on {fast}, verified")
