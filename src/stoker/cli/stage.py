"""``stoker stage SRC DST`` and ``stoker verify SRC DST``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import StageError
from ._interrupt import interruptible
from ._options import size
from ._output import command, emit_json, stderr, stdout, user_errors

if TYPE_CHECKING:
    from ..stage import StageOptions

# --delete asks (on a terminal) or wants --yes (elsewhere) before deleting more files than this.
ASK_ABOVE = 5
SHOW_AT_MOST = 20  # keys the question lists (--dry-run lists them all)

JsonOpt = Annotated[bool, typer.Option("--json", help="JSON lines instead of a progress bar.")]
HttpOpt = Annotated[
    bool, typer.Option("--allow-http", help="Allow plain HTTP to a non-loopback endpoint.")
]
IncludeOpt = Annotated[
    list[str] | None, typer.Option(help="Take only keys matching this glob (repeatable).")
]
ExcludeOpt = Annotated[
    list[str] | None, typer.Option(help="Skip keys matching this glob (repeatable).")
]
RankOpt = Annotated[
    int | None, typer.Option(help="This node's share, 0-based (default: torchrun's env, else all).")
]
FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks",
        help="Copy what a local source's symbolic links point to (default: skip them, said "
        "once); a link to a folder that holds it is skipped and named.",
    ),
]
WorldOpt = Annotated[
    int | None, typer.Option(help="Number of shares (nodes) (default: torchrun's env, else 1).")
]


def interactive() -> bool:
    """Whether a person can answer a question: stdin and stderr are terminals."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def _confirm(dst: str, yes: bool, json_out: bool, reporter: Any) -> Any:
    """``stage(confirm_delete=...)``: up to ASK_ABOVE deletions go ahead (each is named as it
    goes); more need --yes, or a yes typed at a terminal. Without a terminal (or with --json)
    and without --yes the run stops with exit status 2, having deleted nothing."""
    from .._redact import shown

    where = shown(dst)  # (a URL's SAS must not reach the terminal)

    def confirm(keys: list[str]) -> bool:
        n = len(keys)
        if yes or n <= ASK_ABOVE:
            return True
        if json_out or not interactive():
            raise StageError(
                f"--delete would delete {n:,} files from {where} that the source does not have "
                f"(more than {ASK_ABOVE}): pass --yes to delete them (--dry-run --delete names "
                "them); the copy is done and nothing was deleted"
            )
        reporter.stop()  # (the bar goes, the question stands alone)
        for key in keys[:SHOW_AT_MOST]:
            stderr.print(f"  {key}", highlight=False, markup=False, soft_wrap=True)
        if n > SHOW_AT_MOST:
            stderr.print(f"  ... and {n - SHOW_AT_MOST:,} more (--dry-run --delete lists all)")
        try:
            return typer.confirm(
                f"Delete these {n:,} files from {where}? The source does not have them",
                default=False,
                err=True,
            )
        except typer.Abort:  # Ctrl-C or end of input at the question: a no
            return False

    return confirm


def _options(
    include: list[str] | None,
    exclude: list[str] | None,
    rank: int | None,
    world: int | None,
    **rest: Any,
) -> StageOptions:
    """The StageOptions of a stage or verify command line (checked as it is built)."""
    from ..stage import StageOptions

    return StageOptions(
        include=tuple(include or ()),
        exclude=tuple(exclude or ()),
        rank=rank,
        world_size=world,
        **rest,
    )


@command
def stage(
    src: Annotated[
        str, typer.Argument(help="az://CONTAINER/PATH, https://ACCOUNT.blob..., or a path")
    ],
    dst: Annotated[str, typer.Argument(help="Where to copy to: a URL or a path.")],
    include: IncludeOpt = None,
    exclude: ExcludeOpt = None,
    rank: RankOpt = None,
    world_size: WorldOpt = None,
    concurrency: Annotated[
        int,
        typer.Option(min=1, help="Requests in flight (a large file takes a quarter, 8 at least)."),
    ] = 32,
    block_size: Annotated[
        int,
        typer.Option(
            parser=size, metavar="SIZE", help="Range/block size, e.g. '8 MiB' (64 KiB to 4000 MiB)."
        ),
    ] = "8 MiB",  # type: ignore[assignment]
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would move; move nothing.")
    ] = False,
    delete: Annotated[
        bool,
        typer.Option(
            "--delete",
            help="Delete the files in DST that SRC does not have, within --include, --exclude "
            f"and --rank, each named; more than {ASK_ABOVE} are asked about (or need --yes).",
        ),
    ] = False,
    hash_files: Annotated[
        bool | None,
        typer.Option(
            "--hash/--no-hash", help="MD5 every file (default: on when a side is remote)."
        ),
    ] = None,
    checksum: Annotated[
        bool,
        typer.Option(
            "--checksum",
            "-c",
            help="A file already at DST counts as copied when its MD5 is SRC's (a local side "
            "is read and hashed), not when its size is SRC's and it is newer.",
        ),
    ] = False,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the resumable manifest lives (default: DST/.stoker for a local "
            "destination, else ~/.cache/stoker/stage)."
        ),
    ] = None,
    durability: Annotated[
        str | None,
        typer.Option(
            metavar="fsync|batch|none",
            help="When a large downloaded file counts as complete: fsync (each file fsynced), "
            "batch (synced together every 4 GiB and at the end, then named), none (never synced; "
            "a power cut may tear a file). Default: batch on a local disk, fsync on a shared one.",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help=f"With --delete: delete more than {ASK_ABOVE} files without asking (needed "
            "where there is no terminal to ask at).",
        ),
    ] = False,
    json_out: JsonOpt = False,
    allow_http: HttpOpt = False,
    follow_symlinks: FollowOpt = False,
    bwlimit: Annotated[
        str | None,
        typer.Option(
            metavar="RATE",
            help="Cap the bytes moved per second, all transfers together: '100M' or "
            "'100MB/s' (bytes), '800Mb/s' (bits), '100MiB/s'.",
        ),
    ] = None,
    tier: Annotated[
        str | None,
        typer.Option(metavar="TIER", help="Blob access tier of uploads: hot, cool, cold, archive."),
    ] = None,
    content_type: Annotated[
        str | None,
        typer.Option(
            metavar="TYPE",
            help="Content-Type of uploads (default: guessed from each file's extension, else "
            "application/octet-stream).",
        ),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option(help="Also save the run (MB/s over time) for stoker report (JSON)."),
    ] = None,
) -> None:
    """Copy SRC to DST: resumable after a crash, verified, only what changed.

    --delete also deletes every file in DST that SRC does not have (within --include,
    --exclude and --rank: nothing else is touched), naming each; more than a few need --yes."""
    from .._malloc import keep_freed_memory
    from ..stage import JsonReporter, terminal_reporter
    from ..stage import stage as run_stage
    from ..units import format_bytes, format_duration, format_rate

    keep_freed_memory()  # (this process exists to move data: see _malloc)

    shown = JsonReporter() if json_out else terminal_reporter(f"{src} -> {dst}")
    recorder = None
    if record is not None:
        from ..measure.records import RecordingReporter

        recorder = RecordingReporter(shown)
    reporter: Any = recorder or shown  # (a RecordingReporter passes each call on: a Reporter)
    # (the lines' reader learns why they stopped)
    with user_errors(json_lines=json_out), interruptible(json_out):
        if record is not None:
            from .._output_files import check_out

            check_out(record, "--record")  # before the copy, not after it
        options = _options(
            include,
            exclude,
            rank,
            world_size,
            concurrency=concurrency,
            block_size=block_size,
            dry_run=dry_run,
            delete=delete,
            hash_files=hash_files,
            checksum=checksum,
            follow_symlinks=follow_symlinks,
            bwlimit=bwlimit,
            tier=tier,
            content_type=content_type,
            allow_http=allow_http,
            state_dir=state_dir,
            durability=durability,
        )
        summary = run_stage(
            src,
            dst,
            options=options,
            reporter=None if dry_run else reporter,
            confirm_delete=_confirm(dst, yes, json_out, reporter) if delete else None,
        )
    if record is not None and recorder is not None and not dry_run:
        from ..measure.records import stage_record

        stage_record(summary, recorder.points).save_json(record)
    if json_out and dry_run:  # one "summary" line, as a run that copies ends with
        reporter.finish(summary.to_dict())
    elif not json_out:
        if dry_run:
            for key in summary.deleted:
                stdout.print(f"would delete {key}", highlight=False, markup=False, soft_wrap=True)
            eta = (
                format_duration(summary.estimated_s)
                if summary.estimated_s
                else "unknown until one run has measured this path"
            )
            deleting = f"would delete {summary.files_deleted}; " if delete else ""
            stdout.print(
                f"would copy {_files(summary.files_copied)}, "
                f"{format_bytes(summary.bytes_copied)}; {summary.files_skipped} "
                f"unchanged; {deleting}estimated time {eta}",
                highlight=False,
                soft_wrap=True,  # one line a log can grep, whatever the width
            )
        else:
            stdout.print(
                f"copied {_files(summary.files_copied)}, "
                f"{format_bytes(summary.bytes_copied)} in "
                f"{format_duration(summary.seconds)} ({format_rate(summary.mb_per_s * 1e6)}); "
                f"{summary.files_skipped} unchanged, {summary.files_deleted} deleted",
                highlight=False,
                soft_wrap=True,
            )
        for note in summary.notes:
            stderr.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
        for problem in summary.refused:
            stderr.print(f"error: {problem}", highlight=False, markup=False, soft_wrap=True)
        if summary.failed:  # each was named as it failed, above the bar
            stderr.print(
                f"error: {_files(len(summary.failed))} failed (named above); the same command "
                "copies them again",
                highlight=False,
                soft_wrap=True,
            )
    if not summary.ok:
        raise typer.Exit(1)


@command
def verify(
    src: Annotated[str, typer.Argument(help="The source that was copied.")],
    dst: Annotated[str, typer.Argument(help="The copy to check.")],
    include: IncludeOpt = None,
    exclude: ExcludeOpt = None,
    rank: RankOpt = None,
    world_size: WorldOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    allow_http: HttpOpt = False,
    follow_symlinks: FollowOpt = False,
) -> None:
    """Re-check a finished copy: every missing, extra, resized or changed object is named
    (on the keys that --include/--exclude/--rank took, as for the stage that made it)."""
    from ..stage import terminal_reporter
    from ..stage import verify as run_verify

    with interruptible(kept="nothing was changed; run it again to check"):
        options = _options(
            include,
            exclude,
            rank,
            world_size,
            concurrency=8,  # (verify's default: it hashes)
            allow_http=allow_http,
            follow_symlinks=follow_symlinks,
        )
        report = run_verify(
            src,
            dst,
            options=options,
            reporter=None if json_out else terminal_reporter(f"verify {dst} against {src}"),
        )
    if json_out:
        emit_json(report.to_dict())
    else:
        for key, problem in report.mismatches:
            stdout.print(
                f"MISMATCH {key}: {problem}", highlight=False, markup=False, soft_wrap=True
            )
        n = len(report.mismatches)
        stdout.print(
            f"{report.checked:,} objects compared ({report.hashed:,} by MD5, "
            f"{report.size_only:,} by size only): "
            f"{'all match' if report.ok else f'{n:,} mismatch' + ('es' if n != 1 else '')}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.ok:
        raise typer.Exit(1)


def _files(n: int) -> str:
    return f"{n:,} file" if n == 1 else f"{n:,} files"
