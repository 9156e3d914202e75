"""``stage(src, dst)``: copy what changed, resumably, verified, and only this rank's share.

A run first checks that what earlier runs copied is still whole at the destination, then lists
the source into the manifest (streaming, bounded memory) while it copies: each listed batch is
recorded, and what of it is to copy goes to the engine at once, so the first bytes move after
one page of the listing rather than after all of it. Then it optionally deletes what the source
no longer has (``--delete``: _mirror.py), and returns a summary. The same command after a crash
continues: finished files are skipped and large files resume at block granularity. What a run
copies (the destination's recheck, the listing against it) is _what_to_copy.py's.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import StageError
from ..store import Durability, Store, clear_stale, open_store, resume_unit, run_sync
from ._engine import Engine
from ._guard import (
    check_parent,
    check_writable,
    destination_lock,
    lock_name,
    state_error,
)
from ._manifest import Manifest, job_id
from ._mirror import extra_keys, mirror, refused_stop_delete
from ._progress import Reporter
from ._selection import Selection, check_source
from ._what_to_copy import ahead, listed_batches, reported, scan_destination
from .options import StageOptions, Tier


@dataclass
class StageSummary:
    src: str
    dst: str
    files_total: int = 0
    bytes_total: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    files_skipped: int = 0
    bytes_skipped: int = 0
    files_deleted: int = 0
    deleted: list[str] = field(default_factory=list)  # keys deleted (a dry run: would be)
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the run could not check, and why
    seconds: float = 0.0
    mb_per_s: float = 0.0
    dry_run: bool = False
    estimated_s: float | None = None
    manifest: str = ""
    durability: str | None = None  # what made a large download complete (into a folder only)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.failed

    def to_dict(self) -> dict:
        return asdict(self)


def state_path(src: Store, dst: Store, selection: Selection, state_dir: Path | None) -> Path:
    name = f"stage-{job_id(str(src), str(dst), str(selection))}.sqlite"
    if state_dir:
        return state_dir / name
    if dst.local_root is not None:
        return dst.local_root / ".stoker" / name
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "stoker" / "stage" / name


def stage(
    src: str,
    dst: str,
    *,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    rank: int | None = None,
    world_size: int | None = None,
    concurrency: int = 32,
    block_size: int | str = 8 << 20,
    dry_run: bool = False,
    delete: bool = False,
    hash_files: bool | None = None,
    state_dir: Path | None = None,
    allow_http: bool = False,
    reporter: Reporter | None = None,
    confirm_delete: Callable[[list[str]], bool] | None = None,
    checksum: bool = False,
    follow_symlinks: bool = False,
    bwlimit: float | str | None = None,
    tier: Tier | None = None,
    content_type: str | None = None,
    durability: Durability | None = None,
    options: StageOptions | None = None,
) -> StageSummary:
    """Copy ``src`` to ``dst`` (URLs or paths); see ``stoker stage --help`` for each option.

    The options are StageOptions' fields, given as keywords or as ``options=StageOptions(...)``
    (a keyword set beside it, to other than its default, replaces that field).
    ``rank``/``world_size`` default to torchrun's environment. ``hash_files`` defaults to on
    when either side is remote (MD5, checked against Content-MD5) and off for local copies.
    With ``delete``, ``confirm_delete(keys)`` (when given) sees every key to delete before the
    first goes; if it returns False none is deleted (and a note says so); it may raise to stop.
    A file already at the destination (whoever put it there) is not copied again when its size
    is the source's and it is not older (``checksum``: when its MD5 is the source's).
    ``follow_symlinks``, ``bwlimit`` (bytes per second, or ``"100MB/s"``), ``tier`` and
    ``content_type`` are ``--follow-symlinks``, ``--bwlimit``, ``--tier``, ``--content-type``;
    ``durability`` is ``--durability`` (fsync, batch or none; None: by the destination's file
    system, see StageOptions.durability).
    """
    given = {
        "include": include,
        "exclude": exclude,
        "rank": rank,
        "world_size": world_size,
        "concurrency": concurrency,
        "block_size": block_size,
        "dry_run": dry_run,
        "delete": delete,
        "hash_files": hash_files,
        "checksum": checksum,
        "follow_symlinks": follow_symlinks,
        "bwlimit": bwlimit,
        "tier": tier,
        "content_type": content_type,
        "allow_http": allow_http,
        "state_dir": state_dir,
        "durability": durability,
    }
    opts = StageOptions.merged(options, given)  # checked once: a bad value is one StageError
    return run_sync(  # (works inside a running event loop too: a notebook's)
        _stage(src, dst, opts, reporter or Reporter(), confirm_delete)
    )


async def _stage(
    src_url: str,
    dst_url: str,
    opts: StageOptions,
    reporter: Reporter,
    confirm_delete: Callable[[list[str]], bool] | None,
) -> StageSummary:
    sel, dry_run, state_dir = opts.selection, opts.dry_run, opts.state_dir
    block_size, concurrency, allow_http = opts.block_bytes, opts.concurrency, opts.allow_http
    src = open_store(src_url, block_size=block_size, concurrency=concurrency, allow_http=allow_http)
    dst = open_store(dst_url, block_size=block_size, concurrency=concurrency, allow_http=allow_http)
    opts.flags.apply(src, dst)
    try:
        check_source(src)
        _check_not_nested(src, dst)
        if dst.local_root is not None:
            check_parent(dst.local_root)
            if not dry_run:
                check_writable(dst.local_root)
        hash_files = opts.hash_files
        if hash_files is None:
            hash_files = src.local_root is None or dst.local_root is None
        path = state_path(src, dst, sel, state_dir)
        summary = StageSummary(str(src), str(dst), dry_run=dry_run, manifest=str(path))
        with contextlib.ExitStack() as held:
            if not dry_run:  # (a dry run writes nothing: no lock, no manifest)
                own = dst.local_root is not None and state_dir is None
                held.enter_context(
                    destination_lock(
                        path.parent,
                        lock_name(str(dst), own),
                        str(dst),
                        (sel.rank, sel.world_size),
                        summary.notes,
                    )
                )
            scratch = (
                held.enter_context(tempfile.TemporaryDirectory(prefix="stoker-dry-run-"))
                if dry_run
                else None
            )
            manifest = Manifest(_copy_of(path, Path(scratch)) if scratch else path)
            job = _Run(src, dst, manifest, summary, hash_files, path)
            return await _run(job, opts, reporter, confirm_delete)
    finally:
        await src.close()
        await dst.close()


@dataclass(frozen=True)
class _Run:
    """What one run opened and worked out, beside its options."""

    src: Store
    dst: Store
    manifest: Manifest
    summary: StageSummary
    hash_files: bool  # (the option, its default settled by the two sides)
    path: Path  # the job's manifest (a dry run's is a copy of it)


async def _run(
    job: _Run,
    opts: StageOptions,
    reporter: Reporter,
    confirm_delete: Callable[[list[str]], bool] | None,
) -> StageSummary:
    src, dst, manifest, summary, path = job.src, job.dst, job.manifest, job.summary, job.path
    sel, dry_run, delete, block_size = opts.selection, opts.dry_run, opts.delete, opts.block_bytes
    t0 = time.perf_counter()
    finished = False
    try:
        run = manifest.start_run()
        await scan_destination(dst, manifest, summary, delete)
        listing = listed_batches(src, dst, sel, manifest, run, summary, opts.checksum)
        if dry_run:
            async for batch in listing:
                summary.files_copied += len(batch)
                summary.bytes_copied += sum(size for _, size, _, _ in batch)
            if delete and not refused_stop_delete(summary):  # (as the real run would)
                summary.deleted = await extra_keys(src, dst, manifest, run, sel, summary)
                summary.files_deleted = len(summary.deleted)
            rate = _last_rate(manifest)
            summary.estimated_s = summary.bytes_copied / rate if rate else None
        else:
            manifest.use_block_size(resume_unit(block_size))  # (what a download records)
            await dst.create_root()  # a missing container, as AzCopy does
            reporter.start()
            engine = Engine(
                src,
                dst,
                manifest,
                reporter,
                concurrency=opts.concurrency,
                block_size=block_size,
                hash_files=job.hash_files,
                spool=_spool(path),
                durability=opts.durability,
            )
            if dst.local_root is not None:
                summary.durability = engine.durability  # (the option, or the file system's)
            async with ahead(reported(listing, reporter)) as batches:
                counters = await engine.run(batches)
            summary.files_copied, summary.failed = counters.files, counters.failed
            summary.bytes_copied = counters.bytes  # moved in this run, resumed blocks excluded
            if delete:
                await mirror(src, dst, manifest, run, sel, summary, reporter, confirm_delete)
        summary.seconds = time.perf_counter() - t0
        if not dry_run and summary.seconds > 0:
            summary.mb_per_s = summary.bytes_copied / summary.seconds / 1e6
            if summary.bytes_copied > 64 << 20:
                manifest.db.execute(
                    "INSERT OR REPLACE INTO meta VALUES('rate', ?)",
                    (str(summary.bytes_copied / summary.seconds),),
                )
        manifest.flush()
        finished = True
        reporter.finish(summary.to_dict())
        return summary
    finally:
        reporter.stop()
        try:
            manifest.close()
        except StageError:
            if finished:  # (else the error already on its way is the one to tell)
                raise


def _spool(manifest: Path) -> Path:
    root = manifest.parent / "spool"
    clear_stale(root)
    return root


def _copy_of(path: Path, folder: Path) -> Path:
    """A dry run works on a copy of the job's manifest (what earlier runs copied), so that it
    writes nothing, at the destination or elsewhere."""
    copy = folder / path.name
    if path.exists():
        try:
            source, target = sqlite3.connect(path), sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
        except sqlite3.Error as exc:
            raise state_error(path, exc) from exc
    return copy


def _check_not_nested(src: Store, dst: Store) -> None:
    """Refuse a local copy into its own source (each run would copy the last run's copy)."""
    if src.local_root is not None and dst.local_root is not None:
        inner, outer = dst.local_root.resolve(), src.local_root.resolve()
        if inner == outer or outer in inner.parents:
            raise StageError(f"{dst} is inside {src}: pick a destination outside the source")


def _last_rate(manifest: Manifest) -> float | None:
    row = manifest.db.execute("SELECT v FROM meta WHERE k = 'rate'").fetchone()
    return float(row[0]) if row else None
