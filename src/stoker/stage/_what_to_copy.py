"""What a stage run copies: the destination's recheck, and the source's listing against the
manifest and the destination, batch by batch, listed ahead of the copy.

The destination is listed first (``scan_destination``): what an earlier run finished but the
destination no longer has whole is copied again, and what is already there is compared with each
listed batch (``listing``, see _unchanged.py), so that a first run, or a new ``--include``,
copies only what is missing. A listing that finds nothing, or of which the globs take nothing,
is an error: a mistyped path never reads as "done", least of all with ``--delete``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..errors import AccessDeniedError, NoContainerError, StageError, UnsafeKeyError
from ..shard import owns
from ..store import ObjectInfo, Store, check_key
from ._manifest import Manifest, Pending
from ._mirror import delete_needs_listing
from ._progress import Reporter
from ._selection import Selection, is_utf8, nothing_listed, nothing_selected
from ._unchanged import unchanged

if TYPE_CHECKING:
    from ._stage import StageSummary


async def listed_batches(
    src: Store,
    dst: Store,
    sel: Selection,
    manifest: Manifest,
    run: int,
    summary: StageSummary,
    checksum: bool = False,
) -> AsyncIterator[list[Pending]]:
    """List the source into the manifest, batch by batch; yields each batch's objects to copy.
    The summary's totals and skipped counts grow as it goes."""
    local, seen, matched = dst.local_root is not None, 0, 0
    local_names = src.local_root is not None  # only a file system's names can be other than UTF-8
    sharded = sel.world_size > 1
    async for batch in src.list():
        seen += len(batch)
        kept: list[ObjectInfo] = []
        for obj in batch:
            if obj.key.endswith("/") and not obj.size:  # a folder marker: no file (Selection.takes)
                continue
            if sel.filtered and not sel.matches(obj.key):
                continue
            matched += 1
            if sharded and not owns(obj.key, sel.rank, sel.world_size):
                continue
            if local_names and not is_utf8(obj.key):  # (the manifest holds text)
                shown = os.fsencode(obj.key).decode("utf-8", "backslashreplace")  # its bytes
                summary.refused.append(f"{src}/{shown}: the name is not UTF-8; rename it")
                continue
            if local:
                try:
                    check_key(obj.key)
                except UnsafeKeyError as exc:
                    summary.refused.append(str(exc))
                    continue
            kept.append(obj)
        if not kept:
            continue
        listed = manifest.record_listing(kept, run)
        summary.files_total += len(kept)
        summary.bytes_total += sum(o.size for o in kept)
        summary.files_skipped += listed.done_files
        summary.bytes_skipped += listed.done_bytes
        if listed.pending and manifest.present:
            listed.pending = await not_there(
                src, dst, manifest, kept, listed.pending, summary, checksum
            )
        if listed.pending:
            yield listed.pending
    links = src.link_notes()
    summary.notes.extend(links)  # symbolic links skipped, said once
    if not seen:  # a mistyped path or prefix: never "done", least of all with --delete
        raise StageError(nothing_listed(src) + "".join(f" ({note})" for note in links))
    if sel.filtered and not matched:  # a mistyped pattern, as loud as a mistyped prefix
        raise StageError(nothing_selected(src, sel, seen))
    manifest.clear_present()  # (spent: the copy's own files are not in it)


async def not_there(
    src: Store,
    dst: Store,
    manifest: Manifest,
    kept: list[ObjectInfo],
    pending: list[Pending],
    summary: StageSummary,
    checksum: bool,
) -> list[Pending]:
    """Of ``pending``, what the destination does not already have (see _unchanged.py); those
    it has are recorded done and counted unchanged."""
    found = manifest.present_for([p[0] for p in pending])
    if not found:
        return pending
    by_key = {o.key: o for o in kept}
    same = await unchanged(src, dst, {key: by_key[key] for key in found}, found, checksum)
    if not same:
        return pending
    manifest.mark_present(sorted(same))
    summary.files_skipped += len(same)
    summary.bytes_skipped += sum(by_key[k].size for k in same)
    return [p for p in pending if p[0] not in same]


async def reported(
    listing: AsyncIterator[list[Pending]], reporter: Reporter
) -> AsyncIterator[list[Pending]]:
    async for batch in listing:
        reporter.grow(len(batch), sum(size for _, size, _, _ in batch))
        yield batch
    reporter.listed()


@contextlib.asynccontextmanager
async def ahead(
    batches: AsyncIterator[list[Pending]], depth: int = 2
) -> AsyncIterator[AsyncIterator[list[Pending]]]:
    """``batches``, listed by a task of its own up to ``depth`` batches ahead of the copy: the
    engine works through one batch while the next page of the listing is on its way. A listing
    error reaches the consumer after the batches before it; leaving early stops the listing."""
    queue: asyncio.Queue = asyncio.Queue(depth)
    end = object()

    async def produce() -> None:
        try:
            async for batch in batches:
                await queue.put(batch)
        except Exception as exc:  # (handed to the consumer, which raises it)
            await queue.put(exc)
        else:
            await queue.put(end)

    async def consume() -> AsyncIterator[list[Pending]]:
        while (item := await queue.get()) is not end:
            if isinstance(item, Exception):
                raise item
            yield item

    producer = asyncio.create_task(produce())
    try:
        yield consume()
    finally:
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await producer


async def scan_destination(
    dst: Store, manifest: Manifest, summary: StageSummary, delete: bool
) -> None:
    """List what the destination already has into the manifest's ``present`` table, for the
    listing to compare with (see _unchanged.py), and copy again what an earlier run finished but
    the destination no longer has whole: a file someone removed or truncated, or a container
    that was emptied or recreated. (Done before the listing: the files this run copies are not
    in the destination's listing yet.) A local destination not made yet has nothing. Credentials
    that may write but not list (a CI job's upload SAS) skip it, and say so."""
    manifest.clear_present()
    if dst.local_root is not None and not dst.local_root.exists():
        return
    try:
        async for batch in dst.list():
            manifest.add_present(
                [(o.key, o.size, dst.modified(o), o.md5) for o in batch if is_utf8(o.key)]
            )
    except NoContainerError:
        pass  # nothing there yet (the copy creates the container), or no longer
    except AccessDeniedError as exc:
        if delete:
            raise delete_needs_listing(dst, exc) from exc
        summary.notes.append(
            f"cannot list {dst} with these credentials (they may only write): what is already "
            "there (what earlier runs copied, too) is taken as it was, unchecked"
        )
        manifest.clear_present()
        return
    manifest.present = True
    if manifest.earlier_done:
        with manifest.transaction():
            manifest.db.execute(
                """UPDATE objects SET state = 0, hash = NULL
                   WHERE state = 1 AND NOT EXISTS (
                     SELECT 1 FROM present p WHERE p.key = objects.key AND p.size = objects.size)"""
            )
