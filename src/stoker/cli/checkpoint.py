"""``stoker checkpoint ls|verify|prune|pull``: the Checkpointer's tiers from a shell."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.markup import escape

from ..errors import CorruptCheckpointError, StokerError
from ._output import command, emit_json, stderr, stdout

app = typer.Typer(
    help="Inspect, verify, prune and pull checkpoints written by stoker.Checkpointer.",
    no_args_is_help=True,
)

Fast = Annotated[str, typer.Argument(help="The fast tier folder (local NVMe, Lustre, NetApp).")]
Durable = Annotated[str | None, typer.Option(help="The durable tier, e.g. az://ckpts/run1.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
JobId = Annotated[
    str | None,
    typer.Option(
        help="The job whose checkpoints these are (the Checkpointer's job_id=); default: "
        "torchrun's run id, else the durable prefix's claim holder (prune: else the fast folder's)."
    ),
]


# The library's errors name its parameters ("keep_last=0: ..."); a shell user typed options.
OPTIONS = {
    "keep_last": "--keep-last",
    "keep_every": "--keep-every",
    "step": "--step",
    "blob_tier": "--blob-tier",
    "fast_usd_per_gb_month": "--fast-price",
    "job_id": "--job-id",
}
_PARAMETER = re.compile(r"\b(" + "|".join(OPTIONS) + r")=")


def _checkpoint_command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command whose library errors name options, not parameters; a damaged checkpoint
    (``CorruptCheckpointError``) exits 1, as a failed check does, and any other error 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StokerError as exc:
            text = _PARAMETER.sub(lambda m: OPTIONS[m[1]] + " ", str(exc))
            if isinstance(exc, CorruptCheckpointError):
                stderr.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
                raise typer.Exit(1) from None
            if text == str(exc):
                raise
            raise type(exc)(text) from exc

    return command(wrapper)


def _open(fast: str, durable: str | None, job_id: str | None, **retention: Any) -> Any:
    from ..checkpoint import Checkpointer

    return Checkpointer(fast, durable, job_id=job_id, **retention)


@contextmanager
def _progress(total: Callable[[], int | None] | None, label: str, quiet: bool) -> Iterator[Any]:
    """A rich bar fed by the library's (what, bytes) callback, its size from ``total()``;
    nothing (and no ``total()``) when printing JSON or when stderr is not a terminal (a
    transient bar there leaves a blank line behind)."""
    if quiet or not stderr.is_terminal:
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
        task = bar.add_task(label, total=total() if total else None)
        yield lambda what, n: bar.update(task, advance=n, description=f"{label} {what}")


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


@app.command("ls")
@_checkpoint_command
def ls(
    fast: Fast,
    durable: Durable = None,
    blob_tier: Annotated[
        str,
        typer.Option(
            help="Blob access tier to price the durable tier at: hot, cool, cold or archive."
        ),
    ] = "hot",
    fast_price: Annotated[
        float | None,
        typer.Option(
            help="Price of the fast tier in USD per GB-month (GB = 10^9 bytes), 0 or more, "
            "e.g. 0.08; default: not priced (a folder is billed with its VM or volume)."
        ),
    ] = None,
    hashes: Annotated[
        bool,
        typer.Option(
            "--hash",
            help="Read every byte to check it against its manifest (default: manifests and "
            "sizes, which find torn and truncated files, not a flipped byte).",
        ),
    ] = False,
    job_id: JobId = None,
    json_out: Json = False,
) -> None:
    """Every step with its state on each tier (ok, damaged and why, missing, incomplete),
    whether it loads, and what keeping them costs per month; exit 1 when a tier cannot be
    listed (what the others hold is shown all the same)."""
    from ..units import format_bytes

    with _open(fast, durable, job_id, check_writable=False) as ckpt:
        infos = ckpt.list(hashes=hashes)
        costs = ckpt.costs(blob_tier=blob_tier, fast_usd_per_gb_month=fast_price, listing=infos)
    if json_out:
        emit_json(
            {
                "checkpoints": [asdict(i) for i in infos],
                "costs": [asdict(c) | {"usd_per_month": c.usd_per_month} for c in costs],
                "unreachable": infos.unreachable,
            }
        )
        _fail_on_unreachable(infos.unreachable)
        return
    from rich.table import Table

    tiers = [c.tier for c in costs]
    table = Table("step", "size", "ranks", "kind", "created", "loads", *tiers)
    for i in infos:
        states = [escape(i.tiers.get(t, "?" if t in infos.unreachable else "-")) for t in tiers]
        row = [str(i.step), format_bytes(i.bytes), str(i.world_size or "-"), i.kind or "-"]
        loads = "[green]yes[/]" if i.loads else "[red]no[/]"
        table.add_row(*row, i.created or "-", loads, *states)
    stdout.print(table)
    prices = Table("tier", "where", "kept", "USD/GB-month", "USD/month", "price basis")
    for c in costs:
        per_gb = "-" if c.usd_per_gb_month is None else f"{c.usd_per_gb_month:.4f}"
        kept = "?" if c.bytes is None else format_bytes(c.bytes)
        prices.add_row(c.tier, c.where, kept, per_gb, _money(c.usd_per_month), c.basis)
    stdout.print(prices)
    _fail_on_unreachable(infos.unreachable)


def _fail_on_unreachable(unreachable: dict[str, str]) -> None:
    """Exit 1 once what could be listed is shown: a script must not take a partial listing
    for the whole."""
    for tier, why in unreachable.items():
        stderr.print(
            f"[bold red]error:[/] the {tier} tier could not be listed, so its steps are "
            f"missing above (?): {escape(why)}",
            highlight=False,
            soft_wrap=True,
        )
    if unreachable:
        raise typer.Exit(1)


@app.command("verify")
@_checkpoint_command
def verify(
    fast: Fast,
    durable: Durable = None,
    step: Annotated[int | None, typer.Option(help="Only this step.")] = None,
    job_id: JobId = None,
    json_out: Json = False,
) -> None:
    """Re-hash every file of every committed step on every tier; exit 1 on any mismatch."""
    with _open(fast, durable, job_id, check_writable=False) as ckpt:

        def size() -> int | None:  # the bar's: a listing of its own, so only for a bar
            with contextlib.suppress(StokerError):  # verify names what is wrong
                listing = ckpt.list()
                return len(ckpt.tiers) * sum(
                    i.bytes for i in listing if step is None or i.step == step
                )
            return None

        with _progress(size, "verify", json_out) as progress:
            report = ckpt.verify(step, progress)
    if json_out:
        emit_json(asdict(report) | {"ok": report.ok})
    else:
        for p in report.problems:
            stdout.print(  # one line per problem, however long, for grep
                f"[red]{p.tier}{'' if p.step is None else f' step {p.step} {p.file}'}[/]: "
                f"{escape(p.what)}",
                highlight=False,
                soft_wrap=True,
            )
        verdict = "[green]ok[/]" if report.ok else f"[red]{len(report.problems)} problem(s)[/]"
        stdout.print(f"{report.steps} step copies, {report.files} files checked: {verdict}")
    if not report.ok:
        raise typer.Exit(1)


@app.command("prune")
@_checkpoint_command
def prune(
    fast: Fast,
    durable: Durable = None,
    keep_last: Annotated[
        int, typer.Option(help="Keep this many newest steps per tier (1 or more).")
    ] = 3,
    keep_every: Annotated[
        int | None,
        typer.Option(help="Also keep every step that is a multiple of this (1 or more)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Say what would go; delete nothing.")] = False,
    delete_damaged: Annotated[
        bool,
        typer.Option(help="Also delete the steps that do not load (kept for inspection else)."),
    ] = False,
    job_id: JobId = None,
    json_out: Json = False,
) -> None:
    """Delete what the retention policy does not keep, counting only steps that load (each of
    the newest is verified: manifest, sizes and hashes), so the newest step that loads always
    stays; incomplete steps older than it go too. A newer step that does not load is kept for
    inspection and named; exit 1 when there is one."""
    with _open(fast, durable, job_id, keep_last=keep_last, keep_every=keep_every) as ckpt:
        gone = ckpt.prune(dry_run=dry_run, delete_damaged=delete_damaged)
    if json_out:
        emit_json({"dry_run": dry_run, "deleted": gone, "damaged": gone.damaged})
    else:
        verb = "would delete" if dry_run else "deleted"
        for tier, steps in gone.items():
            stdout.print(f"{tier}: {verb} {len(steps)} step(s) {steps if steps else ''}")
    for tier, damaged in gone.damaged.items():
        for step, why in damaged.items():
            deleted = delete_damaged and not dry_run and step in gone.get(tier, [])
            fate = "deleted" if deleted else "kept for inspection"
            stderr.print(
                f"[bold red]damaged:[/] {tier} step {step} does not load ({fate}): {escape(why)}",
                highlight=False,
                soft_wrap=True,
            )
    if gone.damaged:
        raise typer.Exit(1)


@app.command("pull")
@_checkpoint_command
def pull(
    durable: Annotated[str, typer.Argument(help="The durable tier, e.g. az://ckpts/run1.")],
    fast: Fast,
    step: Annotated[int | None, typer.Option(help="This step (default: the newest).")] = None,
    job_id: JobId = None,
    json_out: Json = False,
) -> None:
    """Bring a checkpoint from the durable tier to the fast tier, verified (a new VM)."""
    with _open(fast, durable, job_id, check_writable=False) as ckpt:  # pull reports its own writes
        with _progress(None, "pull", json_out) as progress:
            got, size = ckpt.pull(step, progress)
    if json_out:
        emit_json({"step": got, "bytes": size, "fast": fast})
    else:
        from ..units import format_bytes

        stdout.print(f"step {got} ({format_bytes(size)}) is on {fast}, verified")
