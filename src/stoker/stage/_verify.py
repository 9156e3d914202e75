"""``verify(src, dst)``: re-check a finished copy and name every mismatch.

Both sides are listed into a scratch SQLite table (bounded memory), then compared: missing,
extra and size-mismatched keys come straight from SQL. For keys present on both sides, hashes
are compared: a remote side gives its Content-MD5 (or the MD5 stoker recorded at upload); a
POSIX side is hashed from disk. A key with no hash on either side is checked by size only and
counted as such.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import StageError
from ..store import Store, open_store, run_sync
from ._guard import state_error
from ._progress import Reporter
from ._selection import (
    Selection,
    check_source,
    is_utf8,
    nothing_listed,
    nothing_selected,
)
from .options import StageOptions

_TMP = "set TMPDIR to a folder on another file system"


@dataclass
class VerifyReport:
    src: str
    dst: str
    checked: int = 0
    hashed: int = 0
    size_only: int = 0
    mismatches: list[tuple[str, str]] = field(default_factory=list)  # (key, what is wrong)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def verify(
    src: str,
    dst: str,
    *,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    rank: int | None = None,
    world_size: int | None = None,
    concurrency: int = 8,
    allow_http: bool = False,
    reporter: Reporter | None = None,
    follow_symlinks: bool = False,
    options: StageOptions | None = None,
) -> VerifyReport:
    """Compare ``dst`` with ``src`` object by object; see VerifyReport. The selection options
    are stage's: a copy staged with them is compared on the keys they take (``options``: the
    StageOptions it was staged with; verify reads its selection, concurrency, allow_http and
    follow_symlinks). ``reporter`` (stage's RichReporter, say) shows the objects and bytes
    compared so far. ``follow_symlinks``: a local source's links are read as stage's
    --follow-symlinks does."""
    given = {
        "include": include,
        "exclude": exclude,
        "rank": rank,
        "world_size": world_size,
        "concurrency": concurrency,
        "allow_http": allow_http,
        "follow_symlinks": follow_symlinks,
    }
    opts = StageOptions.merged(options, given, {"concurrency": 8})  # (verify's own default)
    return run_sync(_verify(src, dst, opts, reporter or Reporter()))


async def _list(
    store: Store, db: sqlite3.Connection, table: str, sel: Selection
) -> tuple[int, int]:
    """The keys ``sel`` takes into ``table``; how many objects the store listed at all, and
    how many of them the globs took (this rank's share aside)."""
    db.execute(f"CREATE TABLE {table}(key TEXT PRIMARY KEY, size INTEGER, md5 TEXT)")
    listed = matched = 0
    async for batch in store.list():
        db.executemany(
            f"INSERT INTO {table} VALUES(?, ?, ?)",
            [(o.key, o.size, o.md5) for o in batch if sel.takes(o) and is_utf8(o.key)],
        )
        listed += len(batch)
        if sel.filtered:
            matched += sum(1 for o in batch if sel.matches(o.key))
    return listed, matched


async def _md5(store: Store, key: str, known: str | None) -> str | None:
    if known:
        return known
    if store.local_root is not None:

        def digest() -> str:
            path = store.local_path(key)
            assert path is not None  # (a folder's)
            try:
                with open(path, "rb") as f:
                    return hashlib.file_digest(f, "md5").hexdigest()
            except OSError as exc:  # an unreadable copy cannot be checked: the run stops
                raise StageError(
                    f"cannot read {path} to check it: {exc.strerror or exc}; run verify as a "
                    "user that may read it"
                ) from exc

        return await asyncio.to_thread(digest)
    return None


async def _verify(
    src_url: str,
    dst_url: str,
    opts: StageOptions,
    reporter: Reporter,
) -> VerifyReport:
    sel = opts.selection
    src = open_store(src_url, allow_http=opts.allow_http)
    dst = open_store(dst_url, allow_http=opts.allow_http)
    src.follow_symlinks = opts.follow_symlinks  # (only a folder has links to follow)
    report = VerifyReport(str(src), str(dst))
    try:
        tmp = tempfile.TemporaryDirectory(prefix="stoker-verify-")
    except OSError as exc:
        raise state_error(
            Path(tempfile.gettempdir()), exc, "verify's scratch listing", _TMP
        ) from exc
    with tmp:
        scratch = Path(tmp.name) / "verify.sqlite"
        db = sqlite3.connect(scratch)
        try:
            check_source(src)
            reporter.start()
            listed, matched = await _list(src, db, "s", sel)
            if not listed:
                raise StageError(nothing_listed(src))
            if sel.filtered and not matched:
                raise StageError(nothing_selected(src, sel, listed))
            await _list(dst, db, "d", sel)
            for (key,) in db.execute("SELECT key FROM s WHERE key NOT IN (SELECT key FROM d)"):
                report.mismatches.append((key, "missing from the destination"))
            for (key,) in db.execute("SELECT key FROM d WHERE key NOT IN (SELECT key FROM s)"):
                report.mismatches.append((key, "in the destination but not in the source"))
            reporter.grow(
                *db.execute(
                    "SELECT count(*), coalesce(sum(s.size), 0) FROM s JOIN d USING(key)"
                ).fetchone()
            )
            reporter.listed()
            rows = db.execute("SELECT s.key, s.size, d.size, s.md5, d.md5 FROM s JOIN d USING(key)")
            limit = asyncio.Semaphore(opts.concurrency)

            async def check(
                key: str, s_size: int, d_size: int, s_md5: str | None, d_md5: str | None
            ) -> None:
                report.checked += 1
                if s_size == d_size:
                    async with limit:
                        a = await _md5(src, key, s_md5)
                        b = await _md5(dst, key, d_md5) if a else None
                    if a and b:
                        report.hashed += 1
                        if a != b:
                            report.mismatches.append((key, f"MD5 {b} != source {a}"))
                    else:
                        report.size_only += 1
                else:
                    report.mismatches.append((key, f"size {d_size} != source {s_size}"))
                reporter.advance(s_size)
                reporter.file_done()

            batch: list = []
            for row in rows:
                batch.append(check(*row))
                if len(batch) >= 1000:
                    await asyncio.gather(*batch)
                    batch = []
            await asyncio.gather(*batch)
        except sqlite3.Error as exc:  # (its temporary folder's disk is full, say)
            raise state_error(scratch, exc, "verify's scratch listing", _TMP) from exc
        finally:
            reporter.stop()
            db.close()
            await src.close()
            await dst.close()
    report.mismatches.sort()
    reporter.finish(report.to_dict())
    return report
