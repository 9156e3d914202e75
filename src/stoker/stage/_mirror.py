"""``--delete`` mirrors, as rsync's ``--delete`` and rclone's ``sync`` do: every file in the
destination that the source does not have is deleted, whoever wrote it, but only within the
run's selection (its ``--include``/``--exclude`` globs and its share): a key the selection does
not take is never touched. The deletions are listed whole before the first one, so the caller
(``confirm_delete``) can see them and say no; none happen when the source listed nothing, when
the selection took nothing, or when a source object was refused (a name that is not UTF-8,
say: its copy in the destination would look extra).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import AccessDeniedError, StageError
from ..store import Store
from ._manifest import Manifest
from ._progress import Reporter
from ._selection import Selection, is_utf8

if TYPE_CHECKING:
    from ._stage import StageSummary


async def extra_keys(
    src: Store, dst: Store, manifest: Manifest, run: int, sel: Selection, summary: StageSummary
) -> list[str]:
    """The destination's keys that ``--delete`` removes: those the selection takes and this
    run's listing of the source did not have. Listed whole before anything is deleted; never
    any when the selection took none of the source's objects."""
    if not summary.files_total:
        what = f"{sel.describe()} takes" if sel.describe() else "this run takes"
        raise StageError(
            f"{what} none of the objects {src} lists, so --delete would delete everything it "
            f"takes in {dst}: nothing was deleted; check the source and the options"
        )
    extra: list[str] = []
    odd = 0  # local names that are not UTF-8: never compared, so never deleted
    try:
        async for batch in dst.list():
            keys = [o.key for o in batch if sel.takes(o)]
            odd += len(keys)
            keys = [key for key in keys if is_utf8(key)]
            odd -= len(keys)
            if not keys:
                continue
            marks = ",".join("?" * len(keys))
            kept = {
                r[0]
                for r in manifest.db.execute(
                    f"SELECT key FROM objects WHERE seen = ? AND key IN ({marks})", (run, *keys)
                )
            }
            extra.extend(key for key in keys if key not in kept)
    except AccessDeniedError as exc:
        raise delete_needs_listing(dst, exc) from exc
    if odd:
        summary.notes.append(
            f"--delete kept {odd:,} file(s) in {dst} whose names are not UTF-8: stoker cannot "
            "compare them with the source"
        )
    return extra


async def mirror(
    src: Store,
    dst: Store,
    manifest: Manifest,
    run: int,
    sel: Selection,
    summary: StageSummary,
    reporter: Reporter,
    confirm: Callable[[list[str]], bool] | None,
) -> None:
    """Delete what the source no longer has (see the module doc), each key named as it goes."""
    if refused_stop_delete(summary):
        return
    extra = await extra_keys(src, dst, manifest, run, sel, summary)
    if extra and confirm is not None and not confirm(extra):
        summary.notes.append(
            f"kept {len(extra):,} file(s) in {dst} that the source does not have: deleting "
            "them was declined"
        )
        return
    limit = asyncio.Semaphore(16)

    async def remove(key: str) -> None:
        async with limit:
            reporter.deleting(key)
            await dst.delete(key)
            summary.deleted.append(key)

    outcomes = await asyncio.gather(*(remove(key) for key in extra), return_exceptions=True)
    summary.files_deleted = len(summary.deleted)
    summary.deleted.sort()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    for key in list(manifest.forget_unseen(run)):
        manifest.drop(key)


def refused_stop_delete(summary: StageSummary) -> bool:
    """A refused key is not in the manifest, so its copy in the destination (one another tool
    wrote under a name that is not UTF-8, say) would look extra: then --delete deletes nothing,
    and says so. (A failed file is listed, hence kept; and deleting goes on then, as a file in
    the way of one may be the fix.)"""
    if summary.refused:
        summary.notes.append(
            "--delete deleted nothing: some source objects were refused (named below), and a "
            "destination file that looks extra might be one of them; fix them and run again"
        )
    return bool(summary.refused)


def delete_needs_listing(dst: Store, exc: AccessDeniedError) -> AccessDeniedError:
    return AccessDeniedError(
        f"--delete needs credentials that can list {dst}, to see what the source no longer has "
        f"({exc})"
    )
