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
from ..store import Store, clear_stale, open_store, resume_unit, run_sync
from ..units import parse_bytes
from ._engine import Engine
from ._flags import Flags
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
from ._selection import Selection, check_source, select
from ._what_to_copy import ahead, listed_batches, reported, scan_destination

MIN_BLOCK = 64 << 10  # smaller blocks only multiply requests (one byte each would never end)
MAX_BLOCK = 4000 << 20  # Blob's largest block (Put Block, service version 2019-12-12 on)


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
    tier: str | None = None,
    content_type: str | None = None,
) -> StageSummary:
    """Copy ``src`` to ``dst`` (URLs or paths); see ``stoker stage --help`` for each option.

    ``rank``/``world_size`` default to torchrun's environment. ``hash_files`` defaults to on
    when either side is remote (MD5, checked against Content-MD5) and off for local copies.
    With ``delete``, ``confirm_delete(keys)`` (when given) sees every key to delete before the
    first goes; if it returns False none is deleted (and a note says so); it may raise to stop.
    A file already at the destination (whoever put it there) is not copied again when its size
    is the source's and it is not older (``checksum``: when its MD5 is the source's).
    ``follow_symlinks``, ``bwlimit`` (bytes per second, or ``"100MB/s"``), ``tier`` and
    ``content_type`` are ``--follow-symlinks``, ``--bwlimit``, ``--tier``, ``--content-type``.
    """
    selection = select(include, exclude, rank, world_size)
    flags = Flags.checked(follow_symlinks, bwlimit, tier, content_type)
    if isinstance(block_size, str):  # "8 MiB", as the CLI takes it
        block_size = int(parse_bytes(block_size))
    if concurrency < 1:
        raise StageError(f"--concurrency {concurrency}: use 1 or more (default 32)")
    if not MIN_BLOCK <= block_size <= MAX_BLOCK:
        raise StageError(
            f"--block-size {block_size:,} bytes: use {MIN_BLOCK >> 10} KiB to {MAX_BLOCK >> 20} "
            "MiB (default 8 MiB)"
        )
    return run_sync(  # (works inside a running event loop too: a notebook's)
        _stage(
            src,
            dst,
            selection,
            concurrency,
            block_size,
            dry_run,
            delete,
            hash_files,
            state_dir,
            allow_http,
            reporter or Reporter(),
            confirm_delete,
            flags,
            checksum=checksum,
        )
    )


async def _stage(
    src_url: str,
    dst_url: str,
    sel: Selection,
    concurrency: int,
    block_size: int,
    dry_run: bool,
    delete: bool,
    hash_files: bool | None,
    state_dir: Path | None,
    allow_http: bool,
    reporter: Reporter,
    confirm_delete: Callable[[list[str]], bool] | None,
    flags: Flags | None = None,
    checksum: bool = False,
) -> StageSummary:
    src = open_store(src_url, block_size=block_size, concurrency=concurrency, allow_http=allow_http)
    dst = open_store(dst_url, block_size=block_size, concurrency=concurrency, allow_http=allow_http)
    (flags or Flags()).apply(src, dst)
    try:
        check_source(src)
        _check_not_nested(src, dst)
        if dst.local_root is not None:
            check_parent(dst.local_root)
            if not dry_run:
                check_writable(dst.local_root)
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
            return await _run(
                src,
                dst,
                sel,
                manifest,
                summary,
                concurrency,
                block_size,
                dry_run,
                delete,
                hash_files,
                path,
                reporter,
                confirm_delete,
                checksum=checksum,
            )
    finally:
        await src.close()
        await dst.close()


async def _run(
    src: Store,
    dst: Store,
    sel: Selection,
    manifest: Manifest,
    summary: StageSummary,
    concurrency: int,
    block_size: int,
    dry_run: bool,
    delete: bool,
    hash_files: bool,
    path: Path,
    reporter: Reporter,
    confirm_delete: Callable[[list[str]], bool] | None,
    checksum: bool = False,
) -> StageSummary:
    t0 = time.perf_counter()
    finished = False
    try:
        run = manifest.start_run()
        await scan_destination(dst, manifest, summary, delete)
        listing = listed_batches(src, dst, sel, manifest, run, summary, checksum)
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
                concurrency=concurrency,
                block_size=block_size,
                hash_files=hash_files,
                spool=_spool(path),
            )
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
